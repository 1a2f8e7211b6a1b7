#!/bin/sh
# Runs in temporalio/admin-tools once the server is up: creates the namespace and the search attributes
# Switchboard writes (A2ATaskState is upserted on every transition; the others are set at start).
# Written for re-runs: existing namespace / attributes count as success.
set -eu
ADDRESS="${TEMPORAL_ADDRESS:-temporal:7233}"
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
# Closed workflows are kept as long as Switchboard keeps finished tasks (SWITCHBOARD_TASK_RETENTION, 30d by default;
# Temporal's floor is 1 day). Switchboard's retention sweep deletes a purged task's workflow itself in any case.
RETENTION="${TEMPORAL_NAMESPACE_RETENTION:-720h}"
SEARCH_ATTRIBUTES="A2ATaskState A2AAgentId A2AContextId A2ATenant A2APatchLevel"

attempt=0
until temporal operator cluster health --address "$ADDRESS"; do
  attempt=$((attempt + 1))
  if [ "$attempt" -ge 30 ]; then echo "Temporal at $ADDRESS not healthy after $attempt attempts" >&2; exit 1; fi
  sleep 2
done

if ! temporal operator namespace describe --namespace "$NAMESPACE" --address "$ADDRESS" >/dev/null 2>&1; then
  temporal operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION" --address "$ADDRESS"
else
  temporal operator namespace update --namespace "$NAMESPACE" --retention "$RETENTION" --address "$ADDRESS"
fi

for name in $SEARCH_ATTRIBUTES; do
  if out=$(temporal operator search-attribute create --namespace "$NAMESPACE" --address "$ADDRESS" \
      --name "$name" --type Keyword 2>&1); then
    echo "search attribute $name: created"
  elif echo "$out" | grep -qi 'already exists'; then
    echo "search attribute $name: already exists"
  else
    echo "$out" >&2; exit 1
  fi
done
echo "namespace $NAMESPACE ready"
