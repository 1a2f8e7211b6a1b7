#!/usr/bin/env bash
# The test command (`npm test`). Usage: scripts/test.sh [test files...] — no args runs test/*.test.ts.
# Each test file starts its own Temporal dev server from $TEMPORAL_CLI, so none is started here.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

TEMPORAL_CLI="$(bash scripts/ensure-temporal.sh | tail -n 1)"
export TEMPORAL_CLI
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"

# Fail fast with a readable message instead of a wall of ECONNREFUSED from every test.
if ! node -e '
  const { Client } = require("pg");
  const c = new Client({ connectionString: process.env.DATABASE_URL, connectionTimeoutMillis: 5000 });
  c.connect().then(() => c.query("select 1")).then(() => c.end(), (e) => { console.error(e.message); process.exit(1); });
'; then
  echo "test.sh: PostgreSQL is not reachable at DATABASE_URL=$DATABASE_URL." >&2
  echo "  Start it (e.g. pg_ctlcluster \$(ls /etc/postgresql) main start) or set DATABASE_URL." >&2
  exit 1
fi

if [[ $# -gt 0 ]]; then
  files=("$@")
else
  files=(test/*.test.ts)
fi
# The task workflows bundled once for the run (each file would bundle the same sources again): the harness reads
# them from SWITCHBOARD_TEST_WORKFLOW_BUNDLES. A run given the folder already (a caller's own) keeps it.
if [[ -z "${SWITCHBOARD_TEST_WORKFLOW_BUNDLES:-}" ]]; then
  SWITCHBOARD_TEST_WORKFLOW_BUNDLES="$(mktemp -d "${TMPDIR:-/tmp}/sb-workflow-bundles.XXXXXX")"
  export SWITCHBOARD_TEST_WORKFLOW_BUNDLES
  trap 'rm -rf "$SWITCHBOARD_TEST_WORKFLOW_BUNDLES"' EXIT
  npx tsx scripts/bundle-test-workflows.ts "$SWITCHBOARD_TEST_WORKFLOW_BUNDLES"
fi

# One file at a time: every file runs its own Temporal server and the box has 2 cores.
# TAP on stdout as before; the failures, gathered, on stderr at the end, where a truncated log still shows them.
# --test-force-exit: a file whose tests have all ended is ended too, even if something it opened still holds its
# event loop (a before-hook that failed half-way leaves what it had opened): a failure, never a run hung for good.
npx tsx --test --test-concurrency=1 --test-force-exit \
  --test-reporter=tap --test-reporter-destination=stdout \
  --test-reporter=./scripts/failures-reporter.mjs --test-reporter-destination=stderr \
  "${files[@]}"
