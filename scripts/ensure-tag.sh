#!/usr/bin/env bash
# The binaries of the peer bench (`BENCH_ONLY=peer npm run bench`, bench/peer.ts): prints (last stdout line) the
# directory that holds them, and exits 0 when both are there, 1 otherwise (saying what is missing on stderr).
#
# - tag-echo-worker: TAG's echo agent, a Temporal worker (bench/tag-echo-worker, ours: a Go port of TAG's Python echo
#   worker). Built here into the directory when it is missing or older than its sources: CGO_ENABLED=0, Go's module
#   and build caches where Go keeps them (outside this clone).
# - tag-gateway: TAG's gateway (github.com/sratomun/temporal-a2a-gateway, Go). This repository neither vendors nor
#   builds it: the directory must be given a binary of it (docs/benchmark.md, "Against TAG", says which one was
#   measured). The Go module proxy does not serve TAG, so `go install` cannot fetch it.
#
# The directory: BENCH_TAG_DIR, default ${SWITCHBOARD_TOOLS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/switchboard}/tag.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${BENCH_TAG_DIR:-${SWITCHBOARD_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/switchboard}/tag}"
WORKER_SRC="$REPO_ROOT/bench/tag-echo-worker"
log() { echo "ensure-tag: $*" >&2; }

mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"

# The worker: built again when any of its sources is newer than the binary.
stale=1
if [[ -x "$DIR/tag-echo-worker" ]] && [[ -z "$(find "$WORKER_SRC" -newer "$DIR/tag-echo-worker" -type f -print -quit)" ]]; then stale=0; fi
if [[ $stale == 1 ]]; then
  GO="$(command -v go || true)"
  [[ -z "$GO" && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
  if [[ -z "$GO" ]]; then
    log "no Go toolchain to build $WORKER_SRC into $DIR/tag-echo-worker"
  else
    log "building $DIR/tag-echo-worker from bench/tag-echo-worker"
    # stdout is reserved for the directory: go's own output goes to stderr.
    (cd "$WORKER_SRC" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false "$GO" build -trimpath -o "$DIR/tag-echo-worker" . >&2)
  fi
fi

missing=()
[[ -x "$DIR/tag-echo-worker" ]] || missing+=(tag-echo-worker)
[[ -x "$DIR/tag-gateway" ]] || missing+=("tag-gateway (TAG's gateway binary, which this repository does not build)")
if (( ${#missing[@]} )); then
  log "missing in $DIR: ${missing[*]}"
  echo "$DIR"
  exit 1
fi
echo "$DIR"
