#!/usr/bin/env bash
# A production-shaped Temporal on this machine: the Temporal server (not the CLI's dev server) built from the Go
# module proxy, with its history and visibility stores in PostgreSQL. The same topology as docker-compose.yml's
# `temporal` service, without Docker.
#
#   scripts/temporal-cluster.sh build    builds temporal-server and temporal-sql-tool into .tools/bin (when missing)
#   scripts/temporal-cluster.sh setup    build, then create the two databases and apply the schemas (idempotent)
#   scripts/temporal-cluster.sh start    setup, write the server config, start the server in the background, wait
#                                        for it, create the namespace and Switchboard's search attributes
#   scripts/temporal-cluster.sh config   write the server config only, and print its path
#   scripts/temporal-cluster.sh stop     SIGTERM the server (SIGKILL after 20 s)
#   scripts/temporal-cluster.sh status   running or not, and the cluster's health
#   scripts/temporal-cluster.sh destroy  stop, drop both databases, remove the state directory
#
# Environment (all optional):
#   TEMPORAL_CLUSTER_PORT  frontend gRPC port (default 7333, clear of a dev server on 7233). The server's other
#                          ports follow it: history +1, matching +2, worker +3, frontend HTTP +10, metrics +20,
#                          membership +100..+103. Point Switchboard at TEMPORAL_ADDRESS=127.0.0.1:<this port>.
#                          At most 32664: Temporal stores membership ports as smallint (at most 32767).
#   TEMPORAL_CLUSTER_DB    database name (default temporal_cluster); visibility goes to <name>_visibility
#   TEMPORAL_CLUSTER_DIR   config, log and pid file (default <repo>/.data/temporal-cluster-<port>)
#   TEMPORAL_CLUSTER_SHARDS  history shards (default 4; fixed when the databases are first set up)
#   TEMPORAL_NAMESPACE     namespace to create (default default)
#   PGHOST PGPORT PGUSER PGPASSWORD  the PostgreSQL server (default 127.0.0.1 5432 postgres, no password); the
#                          user must be allowed CREATE DATABASE and CREATE EXTENSION btree_gin (visibility schema)
#   TEMPORAL_CLUSTER_BIN   where temporal-server and temporal-sql-tool are (default <repo>/.tools/bin; built there
#                          when missing), e.g. the binaries of a release tarball
#   TEMPORAL_CLUSTER_SCHEMA_DIR  the schema/postgresql/v12 directory of the same release (default: the server
#                          module's, in the Go module cache)
#   TEMPORAL_CLI           the `temporal` CLI used for the namespace step (default: scripts/ensure-temporal.sh)
set -euo pipefail

VERSION=v1.29.1
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${TEMPORAL_CLUSTER_BIN:-$REPO_ROOT/.tools/bin}"
SERVER="$BIN/temporal-server"
SQL_TOOL="$BIN/temporal-sql-tool"

PORT="${TEMPORAL_CLUSTER_PORT:-7333}"
DB="${TEMPORAL_CLUSTER_DB:-temporal_cluster}"
VIS_DB="${DB}_visibility"
DIR="${TEMPORAL_CLUSTER_DIR:-$REPO_ROOT/.data/temporal-cluster-$PORT}"
SHARDS="${TEMPORAL_CLUSTER_SHARDS:-4}"
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
PGHOST="${PGHOST:-127.0.0.1}"
PGPORT="${PGPORT:-5432}"
PGUSER="${PGUSER:-postgres}"
PGPASSWORD="${PGPASSWORD:-}"
ADDRESS="127.0.0.1:$PORT"
PID_FILE="$DIR/server.pid"
LOG_FILE="$DIR/server.log"

# shellcheck source=progress.sh
source "$REPO_ROOT/scripts/progress.sh"

log() { echo "temporal-cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# The server keeps each service's membership port in a smallint column (cluster_membership.rpc_port): above 32767
# it starts, then dies ("value 47435 is out of range for type smallint"). Membership is PORT+100..+103.
MAX_PORT=$((32767 - 103))
check_port() {
  [[ "$PORT" =~ ^[0-9]+$ ]] && ((PORT >= 1)) || die "TEMPORAL_CLUSTER_PORT=$PORT is not a port number; choose a port from 1 to $MAX_PORT (default 7333)"
  if ((PORT > MAX_PORT)); then
    die "TEMPORAL_CLUSTER_PORT=$PORT is too high: the membership ports would be $((PORT + 100))..$((PORT + 103)), and Temporal stores them as smallint, at most 32767; choose a port from 1 to $MAX_PORT (default 7333)"
  fi
}

go_bin() {
  local go
  go="$(command -v go || true)"
  [[ -z "$go" && -x /usr/local/go/bin/go ]] && go=/usr/local/go/bin/go
  [[ -n "$go" ]] || die "no Go toolchain (go on PATH or /usr/local/go/bin/go) to build the Temporal server $VERSION"
  echo "$go"
}

cmd_build() {
  local go target name
  for target in server:temporal-server tools/sql:temporal-sql-tool; do
    name="${target#*:}"
    [[ -x "$BIN/$name" ]] && continue
    go="$(go_bin)"
    log "building $name $VERSION with $go (a cold build takes several minutes)"
    local tmp
    # go install names the binary after its package directory (server, sql); build into a scratch GOBIN and rename.
    tmp="$(mktemp -d)"
    with_progress "temporal-cluster: building $name $VERSION" env CGO_ENABLED=0 GOBIN="$tmp" "$go" install "go.temporal.io/server/cmd/${target%%:*}@$VERSION" >&2
    mkdir -p "$BIN"
    mv "$tmp/$(basename "${target%%:*}")" "$BIN/$name"
    rmdir "$tmp"
  done
}

# The schemas ship in the server module: the module cache has them once the build has run.
schema_dir() {
  if [[ -n "${TEMPORAL_CLUSTER_SCHEMA_DIR:-}" ]]; then echo "$TEMPORAL_CLUSTER_SCHEMA_DIR"; return; fi
  local go cache
  go="$(go_bin)"
  cache="$("$go" env GOMODCACHE)/go.temporal.io/server@$VERSION/schema/postgresql/v12"
  [[ -d "$cache" ]] || (cd / && "$go" mod download "go.temporal.io/server@$VERSION" >&2)
  [[ -d "$cache" ]] || die "no PostgreSQL schemas at $cache"
  echo "$cache"
}

# The SQL tool logs every statement; its output goes to $DIR/setup.log and is shown only when a step fails.
sql() {
  mkdir -p "$DIR"
  if ! "$SQL_TOOL" --plugin postgres12 --ep "$PGHOST" --port "$PGPORT" --user "$PGUSER" --password "$PGPASSWORD" "$@" >>"$DIR/setup.log" 2>&1; then
    tail -n 20 "$DIR/setup.log" >&2
    die "temporal-sql-tool $* failed (log: $DIR/setup.log)"
  fi
}

cmd_setup() {
  cmd_build
  local schemas db dir
  schemas="$(schema_dir)"
  for db in "$DB" "$VIS_DB"; do
    dir=temporal
    [[ "$db" == "$VIS_DB" ]] && dir=visibility
    # Each step is idempotent: create skips an existing database, setup-schema keeps a newer version,
    # update-schema applies only the versions not applied yet.
    sql --db "$db" create-database
    sql --db "$db" setup-schema -v 0.0
    sql --db "$db" update-schema -d "$schemas/$dir/versioned"
  done
  log "databases $DB and $VIS_DB ready on $PGHOST:$PGPORT"
}

# The server config: config/development-postgres12.yaml of the server module, with every port derived from
# TEMPORAL_CLUSTER_PORT, the databases named above, archival off, and the dynamic config docker-compose uses.
write_config() {
  mkdir -p "$DIR/config"
  local p=$PORT
  cat >"$DIR/config/cluster.yaml" <<YAML
# Written by scripts/temporal-cluster.sh; rewritten at every start.
log:
  stdout: true
  level: warn

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: $SHARDS
  datastores:
    postgres-default:
      sql:
        pluginName: postgres12
        databaseName: "$DB"
        connectAddr: "$PGHOST:$PGPORT"
        connectProtocol: tcp
        user: "$PGUSER"
        password: "$PGPASSWORD"
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    postgres-visibility:
      sql:
        pluginName: postgres12
        databaseName: "$VIS_DB"
        connectAddr: "$PGHOST:$PGPORT"
        connectProtocol: tcp
        user: "$PGUSER"
        password: "$PGPASSWORD"
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
  metrics:
    prometheus:
      framework: tally
      timerType: histogram
      listenAddress: "127.0.0.1:$((p + 20))"

services:
  frontend:
    rpc: { grpcPort: $p, membershipPort: $((p + 100)), bindOnLocalHost: true, httpPort: $((p + 10)) }
  history:
    rpc: { grpcPort: $((p + 1)), membershipPort: $((p + 101)), bindOnLocalHost: true }
  matching:
    rpc: { grpcPort: $((p + 2)), membershipPort: $((p + 102)), bindOnLocalHost: true }
  worker:
    rpc: { grpcPort: $((p + 3)), membershipPort: $((p + 103)), bindOnLocalHost: true }

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "$ADDRESS"

dcRedirectionPolicy:
  policy: noop

archival:
  history: { state: disabled }
  visibility: { state: disabled }

namespaceDefaults:
  archival:
    history: { state: disabled }
    visibility: { state: disabled }

dynamicConfigClient:
  filepath: "$REPO_ROOT/docker/dynamicconfig/switchboard.yaml"
  pollInterval: 10s
YAML
}

running() { [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; }

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

temporal_cli() { bash "$REPO_ROOT/scripts/ensure-temporal.sh" | tail -n 1; }

cmd_start() {
  if running; then log "already running (pid $(cat "$PID_FILE")) at $ADDRESS"; echo "$ADDRESS"; return; fi
  local p
  for p in $PORT $((PORT + 1)) $((PORT + 2)) $((PORT + 3)) $((PORT + 10)) $((PORT + 20)) $((PORT + 100)) $((PORT + 101)) $((PORT + 102)) $((PORT + 103)); do
    port_taken "$p" && die "port $p is in use (the server needs $PORT..+3, +10, +20, +100..+103): set TEMPORAL_CLUSTER_PORT"
  done
  cmd_setup
  local cli
  cli="$(temporal_cli)"
  write_config
  log "starting $SERVER (config $DIR/config/cluster.yaml, log $LOG_FILE)"
  # Its own session: the server outlives this script and a Ctrl-C in the terminal that started it.
  local detach=()
  command -v setsid >/dev/null && detach=(setsid)
  "${detach[@]}" "$SERVER" --root "$DIR" --config config --env cluster --allow-no-auth start >"$LOG_FILE" 2>&1 </dev/null &
  echo $! >"$PID_FILE"

  local deadline=$((SECONDS + 120))
  until "$cli" operator cluster health --address "$ADDRESS" >/dev/null 2>&1; do
    if ! running; then tail -n 40 "$LOG_FILE" >&2; die "the server exited during start-up (log: $LOG_FILE)"; fi
    if ((SECONDS > deadline)); then tail -n 40 "$LOG_FILE" >&2; die "the server did not become healthy in 120 s (log: $LOG_FILE)"; fi
    sleep 1
  done
  # The namespace and the search attributes, by the same script docker-compose's temporal-setup runs (and, as
  # compose restarts it on failure, run again here: a namespace just created is not in the server's namespace
  # cache for some seconds, and adding search attributes to it fails until it is).
  local attempt
  for attempt in $(seq 1 15); do
    PATH="$(dirname "$cli"):$PATH" TEMPORAL_ADDRESS="$ADDRESS" TEMPORAL_NAMESPACE="$NAMESPACE" sh "$REPO_ROOT/docker/setup-temporal.sh" >&2 && break
    ((attempt == 15)) && die "the namespace $NAMESPACE or its search attributes could not be created"
    sleep 2
  done
  log "ready at $ADDRESS (pid $(cat "$PID_FILE")): TEMPORAL_ADDRESS=$ADDRESS TEMPORAL_NAMESPACE=$NAMESPACE"
  echo "$ADDRESS"
}

cmd_stop() {
  if ! running; then log "not running"; rm -f "$PID_FILE"; return; fi
  local pid
  pid="$(cat "$PID_FILE")"
  kill -TERM "$pid"
  local deadline=$((SECONDS + 20))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS > deadline)); then log "still running after 20 s: SIGKILL"; kill -KILL "$pid"; fi
    sleep 0.5
  done
  rm -f "$PID_FILE"
  log "stopped (pid $pid)"
}

cmd_status() {
  if running; then
    log "running (pid $(cat "$PID_FILE")) at $ADDRESS"
    "$(temporal_cli)" operator cluster health --address "$ADDRESS"
  else
    log "not running"
    return 1
  fi
}

cmd_destroy() {
  cmd_stop
  if [[ -x "$SQL_TOOL" ]]; then
    local db
    for db in "$DB" "$VIS_DB"; do sql --db "$db" drop-database --force; done
    log "dropped $DB and $VIS_DB"
  fi
  rm -rf "$DIR"
}

case "${1:-}" in
  config | start) check_port ;;
esac
case "${1:-}" in
  build) cmd_build ;;
  setup) cmd_setup ;;
  config) write_config; echo "$DIR/config/cluster.yaml" ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  destroy) cmd_destroy ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
