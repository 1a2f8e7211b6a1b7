#!/bin/sh
# Runs in temporalio/admin-tools. Every step is idempotent (create ignores existing databases, setup-schema
# keeps a newer version, update-schema applies only missing versions), so `docker compose up` can re-run it.
set -eu
SQL="temporal-sql-tool --plugin postgres12 --ep ${POSTGRES_SEEDS} -u ${POSTGRES_USER} -p 5432"
SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

echo 'waiting for PostgreSQL...'
until nc -z -w 5 "${POSTGRES_SEEDS}" 5432; do sleep 1; done

for db in temporal temporal_visibility; do
  dir=temporal
  [ "$db" = temporal_visibility ] && dir=visibility
  $SQL --db "$db" create
  $SQL --db "$db" setup-schema -v 0.0
  $SQL --db "$db" update-schema -d "$SCHEMA_DIR/$dir/versioned"
done

# Switchboard's own database and role: docker/setup-switchboard-db.sh (the switchboard-db-setup one-shot).
echo 'PostgreSQL setup complete'
