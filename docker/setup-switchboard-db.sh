#!/bin/sh
# Runs in the postgres image (for psql), as the PostgreSQL superuser, once the server is up: Switchboard's own
# database, owned by a role of its own that is not a superuser and may create neither databases nor roles.
# Switchboard connects as that role and migrates its tables itself (as the database's owner it may). Every step is
# idempotent, so `docker compose up` can re-run it; a database made by an older compose file (owned by the
# superuser, which Switchboard used to connect as) is handed over to the role, tables and functions included.
#
# PGHOST, PGPORT, PGUSER, PGPASSWORD: the server and its superuser. SWITCHBOARD_DB (default switchboard),
# SWITCHBOARD_DB_USER (default switchboard), SWITCHBOARD_DB_PASSWORD (required).
set -eu
DB="${SWITCHBOARD_DB:-switchboard}"
ROLE="${SWITCHBOARD_DB_USER:-switchboard}"
: "${SWITCHBOARD_DB_PASSWORD:?SWITCHBOARD_DB_PASSWORD must be set}"

echo "waiting for PostgreSQL at ${PGHOST:-localhost}..."
until pg_isready -q; do sleep 1; done

# psql reads the variables (-v) into the statements below; \gexec runs what a SELECT builds, so names and the
# password are quoted by format() (%I, %L), never spliced into SQL by the shell.
psql -v ON_ERROR_STOP=1 -q -d postgres -v db="$DB" -v role="$ROLE" -v password="$SWITCHBOARD_DB_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'role') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD %L', :'role', :'password') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role') WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SELECT format('ALTER DATABASE %I OWNER TO %I', :'db', :'role') \gexec
\connect :"db"
-- PostgreSQL 15+ gives the public schema to the database's owner (pg_database_owner); before 15 anyone may create
-- in it. Either way the role may; this makes it explicit.
SELECT format('GRANT ALL ON SCHEMA public TO %I', :'role') \gexec
-- pgvector where the image has it (compose's does): hybrid search's HNSW index (migration 037). Made here, as the
-- superuser, because the role may not create an extension that is not trusted; without it search scans.
SELECT 'CREATE EXTENSION IF NOT EXISTS vector' WHERE EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') \gexec
-- What an older compose file's Switchboard made as the superuser: tables (their serial sequences follow), views,
-- standalone sequences and functions of the public schema.
SELECT format('ALTER %s %s OWNER TO %I', CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END, c.oid::regclass, :'role')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S') AND pg_get_userbyid(c.relowner) <> :'role'
   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')) \gexec
SELECT format('ALTER FUNCTION %s OWNER TO %I', p.oid::regprocedure, :'role')
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'public' AND pg_get_userbyid(p.proowner) <> :'role'
   -- An extension's functions (pgvector's) stay its owner's.
   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e') \gexec
SQL
echo "database $DB ready, owned by role $ROLE (not a superuser)"
