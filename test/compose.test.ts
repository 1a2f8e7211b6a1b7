// Static checks of the user-facing docker-compose.yml (no docker engine on CI): service graph, start-up
// ordering, the env Switchboard reads, and that the setup script creates every search attribute the
// workflows write. Validated against the compose schema separately with compose-go (`docker compose config`).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { loadConfig } from '../src/config';
import { SEARCH_ATTRIBUTES } from '../workflows/messages';
import { DYNAMIC_CONFIG } from '../src/temporal/dev-server';

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
});

test('the image runs Node 20 on glibc, starts node itself under an init, as a non-root user', () => {
  const dockerfile = read('Dockerfile');
  const from = dockerfile.match(/^FROM\s+(\S+)/m)?.[1] ?? '';
  const [image, tag = ''] = from.split(':');
  assert.equal(image, 'node');
  // The Temporal core-bridge native module does not load on musl, and Switchboard is built for Node 20.
  assert.match(tag, /^20(\.|-|$)/, `FROM ${from}`);
  assert.doesNotMatch(tag, /alpine/, `FROM ${from}`);
  // node is the process SIGTERM reaches (npm would not pass it on); compose runs it under an init.
  assert.match(dockerfile, /^CMD \["node", "--import", "tsx", "src\/main\.ts"\]$/m);
  assert.equal((services.switchboard as Service & { init?: boolean }).init, true);
  assert.match(dockerfile, /^USER node$/m);
});

test('the setup script waits for the server, then creates the namespace and every search attribute, and may run again', () => {
  // Run it for real against a stand-in `temporal` on PATH that records each call: unhealthy twice, then up;
  // no namespace yet; one attribute already there.
  const dir = mkdtempSync(path.join(tmpdir(), 'setup-temporal-'));
  const calls = path.join(dir, 'calls');
  writeFileSync(path.join(dir, 'sleep'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  writeFileSync(
    path.join(dir, 'temporal'),
    `#!/bin/sh
echo "$*" >> "${calls}"
case "$*" in
  *"cluster health"*) n=$(grep -c "cluster health" "${calls}"); [ "$n" -ge 3 ] ;;
  *"namespace describe"*) exit 1 ;;
  *"--name A2AAgentId"*) echo "search attribute A2AAgentId already exists" >&2; exit 1 ;;
  *) exit 0 ;;
esac
`,
    { mode: 0o755 },
  );
  try {
    const out = execFileSync('sh', [path.join(root, 'docker/setup-temporal.sh')], {
      env: { PATH: `${dir}:${process.env.PATH}`, TEMPORAL_ADDRESS: 'temporal:7233', TEMPORAL_NAMESPACE: 'default' },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const log = readFileSync(calls, 'utf8').trim().split('\n');
    assert.equal(log.filter((c) => c.includes('cluster health')).length, 3);
    assert.ok(log.some((c) => c.startsWith('operator namespace create --namespace default')), log.join('\n'));
    const created = log.filter((c) => c.includes('search-attribute create')).map((c) => c.match(/--name (\S+)/)?.[1]);
    assert.deepEqual(created.sort(), Object.keys(SEARCH_ATTRIBUTES).sort());
    assert.ok(log.filter((c) => c.includes('search-attribute create')).every((c) => c.includes('--type Keyword')));
    assert.match(out, /A2AAgentId: already exists/);
    assert.match(out, /namespace default ready/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
  const dynamic = parse(read(dc));
  assert.equal(dynamic['limit.maxIDLength'][0].value, 255);
  // The same settings as every dev server Switchboard starts (one list, src/temporal/dev-server.ts).
  for (const [key, value] of Object.entries(DYNAMIC_CONFIG)) assert.equal(dynamic[key]?.[0]?.value, value, `${key} in ${dc}`);
});
