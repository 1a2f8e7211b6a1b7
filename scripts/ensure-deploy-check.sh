#!/usr/bin/env bash
# Prints (last stdout line) the absolute path of deploy/check built (the Go program test/deploy.test.ts runs on the
# Kubernetes manifests: strict decoding into k8s.io/api's types, offline), building it if needed.
#
# The build lives in SWITCHBOARD_TOOLS_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/switchboard), as
# scripts/ensure-temporal.sh's does, one directory per hash of deploy/check's sources (main.go, go.mod, go.sum):
# an edit there builds anew, every clone with the same sources reuses one build, and two at once take turns (flock).
# Cold (empty Go module and build caches) it downloads about 130 MB of modules and builds in 1.5 min on a busy
# 2-core box; with Go's build cache warm, about 1 s.
# Exit 3: no Go toolchain (the test then skips outside CI, and fails in it).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$REPO_ROOT/deploy/check"
HASH="$(cat "$SRC/main.go" "$SRC/go.mod" "$SRC/go.sum" | sha256sum | cut -c1-16)"
DIR="${SWITCHBOARD_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/switchboard}/deploy-check-$HASH"
BIN="$DIR/deploy-check"
# shellcheck source=progress.sh
source "$REPO_ROOT/scripts/progress.sh"

log() { echo "ensure-deploy-check: $*" >&2; }

if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi

GO="$(command -v go || true)"
[[ -z "$GO" && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
if [[ -z "$GO" ]]; then
  log "no Go toolchain to build deploy/check (install Go >= 1.24 and re-run)"
  exit 3
fi

mkdir -p "$DIR"
if command -v flock >/dev/null; then
  exec 9>"$DIR.lock"
  if ! flock -n 9; then
    log "another clone is building deploy/check into $DIR; waiting for it"
    with_progress "ensure-deploy-check: waiting for the other build" flock 9
  fi
  if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi
fi

build() {
  # stdout is reserved for the path; -mod=readonly: go.sum is the pinned set, never rewritten by a build.
  # Into a temporary name, then renamed: a build cut short never leaves a binary that looks finished.
  (cd "$SRC" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -ldflags "-s -w" -o "$BIN.tmp" .) >&2
  mv "$BIN.tmp" "$BIN"
}

log "building deploy/check into $DIR with $GO (k8s.io/api; cold, about 1.5 min; once per change of its sources)"
with_progress "ensure-deploy-check: building deploy/check" build
echo "$BIN"
