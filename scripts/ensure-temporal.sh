#!/usr/bin/env bash
# Prints (last stdout line) the absolute path of a working `temporal` CLI, building it if needed.
# The CLI embeds the dev server; v1.5.1 is the newest tag `go install` accepts (later tags use replace
# directives), and CGO_ENABLED=0 works because its SQLite driver is pure Go.
set -euo pipefail

VERSION=1.5.1
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL_BIN="$REPO_ROOT/.tools/bin/temporal"

log() { echo "ensure-temporal: $*" >&2; }

# Resolve to an absolute path so callers can use it from any cwd.
abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

if [[ -n "${TEMPORAL_CLI:-}" ]]; then
  if [[ -x "$TEMPORAL_CLI" ]]; then abspath "$TEMPORAL_CLI"; exit 0; fi
  log "TEMPORAL_CLI=$TEMPORAL_CLI is not an executable file; falling back"
fi

if [[ -x "$LOCAL_BIN" ]]; then echo "$LOCAL_BIN"; exit 0; fi

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

log "building temporal CLI v$VERSION into $REPO_ROOT/.tools/bin with $GO (a cold build takes several minutes)"
start=$(date +%s)
mkdir -p "$REPO_ROOT/.tools/bin"
# stdout is reserved for the path, so go's own output (module downloads) goes to stderr.
GOBIN="$REPO_ROOT/.tools/bin" CGO_ENABLED=0 "$GO" install -trimpath \
  -ldflags "-s -w -X github.com/temporalio/cli/temporalcli.Version=$VERSION" \
  "github.com/temporalio/cli/cmd/temporal@v$VERSION" >&2
log "built in $(( $(date +%s) - start ))s: $("$LOCAL_BIN" --version)"
echo "$LOCAL_BIN"
