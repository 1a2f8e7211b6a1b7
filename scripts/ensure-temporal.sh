#!/usr/bin/env bash
# Prints (last stdout line) the absolute path of a working `temporal` CLI, building it if needed.
# The CLI embeds the dev server; v1.5.1 is the newest tag `go install` accepts (later tags use replace
# directives), and CGO_ENABLED=0 works because its SQLite driver is pure Go.
#
# In order: TEMPORAL_CLI; this clone's .tools/bin/temporal; the machine's shared build (below), linked into
# .tools/bin; a `temporal` on PATH; else a build with Go into the shared directory, linked into .tools/bin.
# The shared build lives in SWITCHBOARD_TOOLS_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/switchboard), one
# directory per version, beside Go's own build cache: every clone on the machine reuses one build (a cold one
# takes several minutes), and two clones building at once take turns (flock).
set -euo pipefail

VERSION=1.5.1
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL_BIN="$REPO_ROOT/.tools/bin/temporal"
SHARED_DIR="${SWITCHBOARD_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/switchboard}/temporal-cli-v$VERSION"
SHARED_BIN="$SHARED_DIR/temporal"
# shellcheck source=progress.sh
source "$REPO_ROOT/scripts/progress.sh"

log() { echo "ensure-temporal: $*" >&2; }

# Resolve to an absolute path so callers can use it from any cwd.
abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

works() { [[ -x "$1" ]] && "$1" --version >/dev/null 2>&1; }

# .tools/bin/temporal -> the shared build (a link: one 200 MB binary per machine, not per clone).
link_shared() {
  mkdir -p "$(dirname "$LOCAL_BIN")"
  ln -sfn "$SHARED_BIN" "$LOCAL_BIN"
  log "using the machine's shared build $SHARED_BIN (linked as $LOCAL_BIN)"
  echo "$LOCAL_BIN"
}

if [[ -n "${TEMPORAL_CLI:-}" ]]; then
  if [[ -x "$TEMPORAL_CLI" ]]; then abspath "$TEMPORAL_CLI"; exit 0; fi
  log "TEMPORAL_CLI=$TEMPORAL_CLI is not an executable file; falling back"
fi

# -x follows a link: a link whose shared build is gone falls through and is made again.
if [[ -x "$LOCAL_BIN" ]]; then echo "$LOCAL_BIN"; exit 0; fi

if works "$SHARED_BIN"; then link_shared; exit 0; fi

# A Temporal CLI already installed (brew, the release tarball, a package) is used before building one.
if ON_PATH="$(command -v temporal 2>/dev/null)" && "$ON_PATH" --version >/dev/null 2>&1; then
  log "using $ON_PATH ($("$ON_PATH" --version | head -n 1))"
  abspath "$ON_PATH"; exit 0
fi

GO="$(command -v go || true)"
[[ -z "$GO" && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
if [[ -z "$GO" ]]; then
  cat >&2 <<MSG
ensure-temporal: no Temporal CLI found and no Go toolchain to build one. Either:
  - install Go (>= 1.25) and re-run this script (it runs: go install github.com/temporalio/cli/cmd/temporal@v$VERSION), or
  - download a Temporal CLI from https://temporal.download and set TEMPORAL_CLI=/path/to/temporal, or
  - copy a binary to $LOCAL_BIN
MSG
  exit 1
fi

# Where the build goes: the shared directory, or this clone's .tools/bin when that cannot be written.
TARGET_DIR="$SHARED_DIR"
if ! mkdir -p "$SHARED_DIR" 2>/dev/null || [[ ! -w "$SHARED_DIR" ]]; then
  log "cannot write $SHARED_DIR; building into this clone's .tools/bin instead"
  TARGET_DIR="$(dirname "$LOCAL_BIN")"
  mkdir -p "$TARGET_DIR"
fi

build() {
  # stdout is reserved for the path, so go's own output (module downloads) goes to stderr.
  GOBIN="$TARGET_DIR" CGO_ENABLED=0 "$GO" install -trimpath \
    -ldflags "-s -w -X github.com/temporalio/cli/temporalcli.Version=$VERSION" \
    "github.com/temporalio/cli/cmd/temporal@v$VERSION" >&2
}

if [[ "$TARGET_DIR" == "$SHARED_DIR" ]] && command -v flock >/dev/null; then
  # One build per machine at a time: a second clone waits, then finds the first one's build.
  exec 9>"$SHARED_DIR.lock"
  if ! flock -n 9; then
    log "another clone is building the Temporal CLI into $SHARED_DIR; waiting for it"
    with_progress "ensure-temporal: waiting for the other build" flock 9
  fi
  if works "$SHARED_BIN"; then link_shared; exit 0; fi
fi

log "building temporal CLI v$VERSION into $TARGET_DIR with $GO (a cold build takes several minutes; once per machine)"
with_progress "ensure-temporal: building temporal CLI v$VERSION" build
if [[ "$TARGET_DIR" == "$SHARED_DIR" ]]; then
  log "built: $("$SHARED_BIN" --version)"
  link_shared
else
  log "built: $("$LOCAL_BIN" --version)"
  echo "$LOCAL_BIN"
fi
