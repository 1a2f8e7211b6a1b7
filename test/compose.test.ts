// Static checks of the user-facing docker-compose.yml (no docker engine on CI): service graph, start-up
// ordering, the env Switchboard reads, and that the setup script creates every search attribute the
// workflows write. Validated against the compose schema separately with compose-go (`docker compose config`).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { loadConfig } from '../src/config';
import { SEARCH_ATTRIBUTES } from '../workflows/messages';

const root = path.resolve(__dirname, '..');
const read = (p: string) => readFileSync(path.join(root, p), 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  environment?: Record<string, string | number>;
  depends_on?: Record<string, { condition: string }>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: unknown;
  restart?: string;
}
const compose = parse(read('docker-compose.yml')) as { services: Record<string, Service> };
const { services } = compose;

/** `${VAR:-default}` as compose resolves it with VAR unset. */
const interpolate = (v: string | number) => String(v).replace(/\$\{\w+:-([^}]*)\}/g, '$1');

test('has the Temporal-on-Postgres services, without the deprecated auto-setup image', () => {
  assert.deepEqual(Object.keys(services).sort(),
    ['postgresql', 'switchboard', 'temporal', 'temporal-admin-tools', 'temporal-setup', 'temporal-ui']);
  assert.match(interpolate(services.postgresql.image!), /^postgres:16\b/);
  assert.match(services.temporal.image!, /^temporalio\/server:/);
  assert.match(services['temporal-admin-tools'].image!, /^temporalio\/admin-tools:/);
  assert.match(services['temporal-ui'].image!, /^temporalio\/ui:/);
  for (const s of Object.values(services)) assert.doesNotMatch(s.image ?? '', /auto-setup/);
  for (const name of ['postgresql', 'temporal', 'switchboard']) assert.ok(services[name].healthcheck, name);
});

test('one-shots run in order: schema -> server -> namespace/search attributes -> switchboard', () => {
  const cond = (svc: string, dep: string) => services[svc].depends_on?.[dep]?.condition;
  assert.equal(cond('temporal-admin-tools', 'postgresql'), 'service_healthy');
  assert.equal(cond('temporal', 'temporal-admin-tools'), 'service_completed_successfully');
  assert.equal(cond('temporal-setup', 'temporal'), 'service_healthy');
  assert.equal(cond('temporal-ui', 'temporal'), 'service_healthy');
  assert.equal(cond('switchboard', 'temporal-admin-tools'), 'service_completed_successfully');
  assert.equal(cond('switchboard', 'temporal-setup'), 'service_completed_successfully');
  assert.equal(cond('switchboard', 'postgresql'), 'service_healthy');
});

test('publishes Switchboard on 8080 and the Temporal UI on 8233', () => {
  assert.deepEqual(services.switchboard.ports, ['8080:8080']);
  assert.deepEqual(services['temporal-ui'].ports, ['8233:8080']);
});

test('switchboard gets a valid config pointing at the compose services', () => {
  const env = Object.fromEntries(
    Object.entries(services.switchboard.environment ?? {}).map(([k, v]) => [k, interpolate(v)]));
  const config = loadConfig(env);
  assert.equal(config.TEMPORAL_ADDRESS, 'temporal:7233');
  assert.equal(config.TEMPORAL_NAMESPACE, 'default');
  assert.equal(config.TEMPORAL_TASK_QUEUE, 'switchboard');
  assert.equal(config.HOST, '0.0.0.0');
  assert.equal(config.PORT, 8080);
  const db = new URL(config.DATABASE_URL!);
  assert.equal(db.hostname, 'postgresql');
  assert.equal(db.pathname, '/switchboard');
  // That database is created by the schema one-shot, not by the postgres image.
  assert.match(read('docker/setup-postgres.sh'), /--db switchboard create/);
  assert.match(read('Dockerfile'), /^FROM node:20-bookworm-slim$/m);
});

test('the setup script creates every search attribute the workflows write', () => {
  const script = read('docker/setup-temporal.sh');
  const declared = script.match(/^SEARCH_ATTRIBUTES="([^"]*)"/m)?.[1].split(/\s+/) ?? [];
  assert.deepEqual(declared.sort(), Object.keys(SEARCH_ATTRIBUTES).sort());
  assert.match(script, /search-attribute create .*\\\n.*--type Keyword/);
  assert.doesNotMatch(script, /ATTdMPTS/); // the upstream script's typo
});

test('every mounted file exists', () => {
  for (const s of Object.values(services)) {
    for (const v of s.volumes ?? []) {
      const src = v.split(':')[0];
      if (src.startsWith('./')) assert.ok(existsSync(path.join(root, src)), `${v} is missing`);
    }
  }
  // The server resolves this under /etc/temporal, where ./docker/dynamicconfig is mounted.
  const dc = path.join('docker', String(services.temporal.environment?.DYNAMIC_CONFIG_FILE_PATH).replace(/^config\//, ''));
  assert.ok(existsSync(path.join(root, dc)), `${dc} is missing`);
  assert.equal(parse(read(dc))['limit.maxIDLength'][0].value, 255);
});
