// Static checks of the user-facing docker-compose.yml (no docker engine on CI): service graph, start-up
// ordering, the env Switchboard reads, and that the setup script creates every search attribute the
// workflows write. Validated against the compose schema separately with compose-go (`docker compose config`).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { codecCorsOriginsOf, loadConfig } from '../src/core/config';
import { gatewayEndpoints } from '../src/core/agents/gateway-card';
import { migrate } from '../src/core/db/migrate';
import { createPool } from '../src/core/db/pool';
import { DATABASE_URL } from './helpers/harness';
import { SEARCH_ATTRIBUTES } from '../task/messages';
import { DYNAMIC_CONFIG } from '../src/embedded/temporal';

const root = path.resolve(__dirname, '..');
const read = (p: string) => readFileSync(path.join(root, p), 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  environment?: Record<string, string | number>;
  depends_on?: Record<string, { condition: string }>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: { test: string[] };
  restart?: string;
}
// Merge keys (`<<: *switchboard`): compose resolves them, and so does the parser here.
const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, Service> };
const { services } = compose;

/** The Switchboard services: two api processes and two workers (SWITCHBOARD_ROLE). */
const SWITCHBOARD = ['switchboard-api-1', 'switchboard-api-2', 'switchboard-worker-1', 'switchboard-worker-2'];

/**
 * A compose value as compose resolves it with .env holding only the required variables: `${VAR:-default}` is the
 * default, `${VAR:?message}` (compose refuses to start without VAR) the value set for it here.
 */
const REQUIRED_SET = (name: string) => `set-${name.toLowerCase().replace(/_/g, '-')}`;
const interpolate = (v: string | number) => String(v).replace(/\$\{\w+:-([^}]*)\}/g, '$1').replace(/\$\{(\w+):\?[^}]*\}/g, (_, name: string) => REQUIRED_SET(name));

/** A short-syntax port, `[ip:]host:container`; without an ip, compose publishes it on every interface. */
function portOf(spec: string): { ip?: string; host?: string; container: string } {
  const parts = spec.split(':');
  if (parts.length === 3) return { ip: parts[0], host: parts[1], container: parts[2]! };
  if (parts.length === 2) return { host: parts[0], container: parts[1]! };
  return { container: parts[0]! };
}

test('has the Temporal-on-Postgres services, without the deprecated auto-setup image', () => {
  assert.deepEqual(Object.keys(services).sort(),
    ['postgresql', ...SWITCHBOARD, 'switchboard-db-setup', 'temporal', 'temporal-admin-tools', 'temporal-setup', 'temporal-ui'].sort());
  // PostgreSQL 16 with pgvector, for hybrid search's HNSW index (issue 42).
  assert.match(interpolate(services.postgresql.image!), /^pgvector\/pgvector:pg16\b/);
  assert.match(services.temporal.image!, /^temporalio\/server:/);
  assert.match(services['temporal-admin-tools'].image!, /^temporalio\/admin-tools:/);
  assert.match(services['temporal-ui'].image!, /^temporalio\/ui:/);
  for (const s of Object.values(services)) assert.doesNotMatch(s.image ?? '', /auto-setup/);
  for (const name of ['postgresql', 'temporal', ...SWITCHBOARD]) assert.ok(services[name].healthcheck, name);
});

/** `${VAR:-default}` in a compose value, as compose resolves it with VAR unset. */
const envOf = (service: string) => Object.fromEntries(Object.entries(services[service].environment ?? {}).map(([k, v]) => [k, interpolate(v)]));

test('every Switchboard process is healthy when ready: /readyz on the port it listens on, workers included', () => {
  for (const sb of SWITCHBOARD) {
    const check = services[sb].healthcheck!.test.join(' ');
    assert.match(check, /fetch\('http:\/\/127\.0\.0\.1:8080\/readyz'\)/, sb);
    assert.equal(loadConfig(envOf(sb)).PORT, 8080, `${sb} serves /readyz on the port its check asks`);
  }
});

test('gRPC is published on the port each api process listens on, and the cards advertise that address', () => {
  for (const [api, http] of [['switchboard-api-1', 8080], ['switchboard-api-2', 8081]] as const) {
    const config = loadConfig(envOf(api));
    assert.ok(config.SWITCHBOARD_GRPC_PORT > 0, `${api} serves gRPC`);
    assert.ok(services[api].ports!.includes(`${http}:8080`), `${api} HTTP on ${http}`);
    // A client on the host reads the card at http://localhost:<http>: the gRPC interface it is given must be a
    // published port that leads to the port this process listens on.
    const endpoints = gatewayEndpoints(`http://localhost:${http}`, 'some-agent', { port: config.SWITCHBOARD_GRPC_PORT, publicTarget: config.SWITCHBOARD_PUBLIC_GRPC_URL });
    const advertised = Number(endpoints.grpc!.target.split(':')[1]);
    assert.equal(endpoints.grpc!.target, `localhost:${advertised}`);
    assert.ok(services[api].ports!.includes(`${advertised}:${config.SWITCHBOARD_GRPC_PORT}`), `${api} publishes ${advertised} to its gRPC port: ${services[api].ports}`);
  }
  // Every published host port is used once (api-2's HTTP is on 8081, the default gRPC port: not advertised).
  const published = Object.values(services).flatMap((s) => (s.ports ?? []).map((p) => portOf(p).host));
  assert.equal(new Set(published).size, published.length, published.join(', '));
  // A proxy in front: SWITCHBOARD_PUBLIC_GRPC_URL is passed through to the api processes.
  const proxied = loadConfig({ ...envOf('switchboard-api-1'), SWITCHBOARD_PUBLIC_GRPC_URL: 'grpc.example.com:443' });
  assert.equal(gatewayEndpoints('https://switchboard.example.com', 'a', { port: proxied.SWITCHBOARD_GRPC_PORT, publicTarget: proxied.SWITCHBOARD_PUBLIC_GRPC_URL }).grpc!.target, 'grpc.example.com:443');
  assert.equal(services['switchboard-api-1'].environment?.SWITCHBOARD_PUBLIC_GRPC_URL, '${SWITCHBOARD_PUBLIC_GRPC_URL:-}');
});

test("Temporal UI's codec endpoint is Switchboard's /codec at a published address, and Switchboard allows the UI's origin", () => {
  const ui = envOf('temporal-ui');
  const codec = new URL(ui.TEMPORAL_CODEC_ENDPOINT!);
  assert.equal(codec.pathname, '/codec', 'the UI posts to <endpoint>/decode: POST /codec/decode');
  assert.ok(services['switchboard-api-1'].ports!.includes(`${codec.port}:8080`), `${codec} is an api process's published port`);
  assert.equal(ui.TEMPORAL_CODEC_PASS_ACCESS_TOKEN, 'true');
  const uiOrigin = `http://localhost:${portOf(services['temporal-ui'].ports![0]!).host}`;
  for (const sb of ['switchboard-api-1', 'switchboard-api-2']) assert.ok(codecCorsOriginsOf(loadConfig(envOf(sb))).includes(uiOrigin), sb);
});

test('the Temporal server and admin tools are the version scripts/temporal-cluster.sh builds', () => {
  const version = /^VERSION=v(\S+)$/m.exec(read('scripts/temporal-cluster.sh'))?.[1];
  assert.ok(version, 'the script names its version');
  const tag = (service: string) => interpolate(services[service].image!).split(':')[1]!;
  assert.equal(tag('temporal'), version);
  for (const s of ['temporal-admin-tools', 'temporal-setup']) assert.ok(tag(s) === version || tag(s).startsWith(`${version}-`), `${s}: ${tag(s)}`);
  assert.match(read('docs/operations.md'), new RegExp(`Compose pins the \`temporalio/server\` ${version.replace(/\./g, '\\.')} image`));
});

test('one-shots run in order: schema -> server -> namespace/search attributes -> switchboard', () => {
  const cond = (svc: string, dep: string) => services[svc].depends_on?.[dep]?.condition;
  assert.equal(cond('temporal-admin-tools', 'postgresql'), 'service_healthy');
  assert.equal(cond('temporal', 'temporal-admin-tools'), 'service_completed_successfully');
  assert.equal(cond('temporal-setup', 'temporal'), 'service_healthy');
  assert.equal(cond('temporal-ui', 'temporal'), 'service_healthy');
  assert.equal(cond('switchboard-db-setup', 'postgresql'), 'service_healthy');
  for (const sb of SWITCHBOARD) {
    assert.equal(cond(sb, 'switchboard-db-setup'), 'service_completed_successfully', sb);
    assert.equal(cond(sb, 'temporal-admin-tools'), 'service_completed_successfully', sb);
    assert.equal(cond(sb, 'temporal-setup'), 'service_completed_successfully', sb);
    assert.equal(cond(sb, 'postgresql'), 'service_healthy', sb);
  }
  // The first worker migrates and makes the data volume's secrets-key; the others start once it is healthy, so two
  // processes never each make a different one. It must come first: an api process is ready (healthy) only once a
  // worker polls the task queue, so a worker waiting for an api process would wait for ever.
  const switchboardDeps = (svc: string) => SWITCHBOARD.filter((sb) => cond(svc, sb));
  assert.deepEqual(switchboardDeps('switchboard-worker-1'), []);
  for (const sb of SWITCHBOARD.slice(0, 2).concat('switchboard-worker-2')) assert.equal(cond(sb, 'switchboard-worker-1'), 'service_healthy', sb);
  // The first api process makes the admin key; the second starts once it is healthy, so they never make two.
  assert.equal(cond('switchboard-api-2', 'switchboard-api-1'), 'service_healthy');
  assert.equal(cond('switchboard-api-1', 'switchboard-api-2'), undefined);
  // No service waits, even through another, for one that waits for it.
  const waitsFor = (svc: string, seen = new Set<string>()): Set<string> => {
    for (const dep of Object.keys(services[svc].depends_on ?? {})) if (!seen.has(dep)) waitsFor(dep, seen.add(dep));
    return seen;
  };
  for (const svc of Object.keys(services)) assert.ok(!waitsFor(svc).has(svc), `${svc} waits for itself`);
});

test('publishes the two api processes on 8080 and 8081 (gRPC 9090 and 9091), no worker, and the Temporal UI on 8233', () => {
  assert.deepEqual(services['switchboard-api-1'].ports, ['8080:8080', '9090:9090']);
  assert.deepEqual(services['switchboard-api-2'].ports, ['8081:8080', '9091:9091']);
  for (const w of ['switchboard-worker-1', 'switchboard-worker-2']) assert.equal(services[w].ports, undefined, w);
  assert.deepEqual(services['temporal-ui'].ports, ['127.0.0.1:8233:8080']);
});

test('Temporal (frontend, UI) and PostgreSQL are not published on every interface: they do not authenticate', () => {
  // Whoever reaches the frontend or the UI can read every payload, signal, reset or terminate any task.
  assert.deepEqual(services.temporal.ports, ['127.0.0.1:7233:7233']);
  for (const name of ['temporal', 'temporal-ui', 'postgresql', 'temporal-admin-tools', 'temporal-setup', 'switchboard-db-setup']) {
    for (const p of services[name].ports ?? []) assert.equal(portOf(p).ip, '127.0.0.1', `${name} publishes ${p} beyond loopback`);
  }
  assert.equal(services.postgresql.ports, undefined, 'PostgreSQL is reached on the compose network only');
  // Only Switchboard's api processes (every request authenticated) are published on every interface.
  const open = Object.entries(services).filter(([, s]) => (s.ports ?? []).some((p) => portOf(p).ip === undefined)).map(([name]) => name);
  assert.deepEqual(open, ['switchboard-api-1', 'switchboard-api-2']);
});

/** One-shots: services another waits for to complete (schemas, databases, namespace); the rest run for good. */
const ONE_SHOTS = [...new Set(Object.values(services).flatMap((s) => Object.entries(s.depends_on ?? {}).filter(([, d]) => d.condition === 'service_completed_successfully').map(([name]) => name)))];

test('every long-running service restarts unless stopped; the one-shots only retry a failure', () => {
  assert.deepEqual(ONE_SHOTS.sort(), ['switchboard-db-setup', 'temporal-admin-tools', 'temporal-setup']);
  for (const [name, s] of Object.entries(services)) {
    if (ONE_SHOTS.includes(name)) assert.match(s.restart ?? 'no', /^(no|on-failure(:\d+)?)$/, `${name} is run once`);
    else assert.equal(s.restart, 'unless-stopped', name);
  }
});

test('no password has a default: compose refuses to start without each, and compose.env.example lists them', () => {
  const raw = read('docker-compose.yml');
  const refs = [...raw.matchAll(/\$\{(\w+)(:?[-?])?([^}]*)\}/g)].map(([, name, op, rest]) => ({ name: name!, op, rest: rest! }));
  const passwords = refs.filter((r) => /PASSWORD|PWD/.test(r.name));
  assert.deepEqual([...new Set(passwords.map((r) => r.name))].sort(), ['POSTGRES_PASSWORD', 'SWITCHBOARD_DB_PASSWORD']);
  for (const r of passwords) {
    assert.equal(r.op, ':?', `\${${r.name}${r.op ?? ''}${r.rest}}: required, no default`);
    assert.match(r.rest, /^set \w+ in \.env \(compose\.env\.example\)$/, `${r.name}: the message says what to do`);
  }
  // Keys and secrets: required, or unset (made on first start in the data volume), never a value of the file's.
  for (const r of refs.filter((x) => /SECRET|_KEY$/.test(x.name))) assert.ok(r.op === ':?' || (r.op === ':-' && r.rest === ''), `${r.name} has a default`);
  // Every environment entry that holds a password or secret takes it from the environment, not the file.
  for (const [name, s] of Object.entries(services)) {
    for (const [key, value] of Object.entries(s.environment ?? {})) {
      if (/PASSWORD|PWD|SECRET|_KEY$/.test(key)) assert.match(String(value), /^\$\{\w+:[-?][^}]*\}$/, `${name}: ${key}`);
      assert.doesNotMatch(String(value), /:\/\/[^/@:]+:[^$/@][^/@]*@/, `${name}: ${key} holds a literal password`);
    }
  }
  const example = read('compose.env.example');
  for (const name of new Set(refs.filter((r) => r.op === ':?').map((r) => r.name))) assert.match(example, new RegExp(`^${name}=$`, 'm'), name);
  assert.match(read('.gitignore'), /^\.env$/m, 'a real .env is never committed');
});

test("Temporal is healthy when it serves (the CLI's health check, not an open port), and what needs it waits for that", () => {
  const check = services.temporal.healthcheck!.test;
  assert.deepEqual(check, ['CMD', 'temporal', 'operator', 'cluster', 'health', '--address', '127.0.0.1:7233']);
  assert.doesNotMatch(check.join(' '), /\bnc\b/);
  for (const [name, s] of Object.entries(services)) {
    if (s.depends_on?.temporal) assert.equal(s.depends_on.temporal.condition, 'service_healthy', name);
    // A long-running service waits for another's health, not only its start.
    for (const [dep, { condition }] of Object.entries(s.depends_on ?? {})) assert.notEqual(condition, 'service_started', `${name} -> ${dep}`);
  }
  // Everything that talks to Temporal waits, directly or through temporal-setup, for it to be healthy.
  const waitsForTemporal = (svc: string): boolean =>
    Object.entries(services[svc].depends_on ?? {}).some(([dep, { condition }]) => (dep === 'temporal' && condition === 'service_healthy') || waitsForTemporal(dep));
  for (const [name, s] of Object.entries(services)) if (String(s.environment?.TEMPORAL_ADDRESS ?? '').startsWith('temporal:')) assert.ok(waitsForTemporal(name), name);
});

test('each Switchboard service gets a valid config with its role, all on the same database, Temporal and task queue', () => {
  const configs = SWITCHBOARD.map((name) => {
    const env = Object.fromEntries(Object.entries(services[name].environment ?? {}).map(([k, v]) => [k, interpolate(v)]));
    return loadConfig(env);
  });
  assert.deepEqual(configs.map((c) => c.SWITCHBOARD_ROLE), ['api', 'api', 'worker', 'worker']);
  for (const config of configs) {
    assert.equal(config.TEMPORAL_ADDRESS, 'temporal:7233');
    assert.equal(config.TEMPORAL_NAMESPACE, 'default');
    assert.equal(config.TEMPORAL_TASK_QUEUE, 'switchboard');
    assert.equal(config.HOST, '0.0.0.0');
    assert.equal(config.PORT, 8080);
    const db = new URL(config.DATABASE_URL!);
    assert.equal(db.hostname, 'postgresql');
    assert.equal(db.pathname, '/switchboard');
    // Not the superuser the postgres image makes (and Temporal uses): the role the setup one-shot makes.
    const setup = envOf('switchboard-db-setup');
    assert.notEqual(db.username, services.postgresql.environment?.POSTGRES_USER);
    assert.equal(db.username, setup.SWITCHBOARD_DB_USER);
    assert.equal(decodeURIComponent(db.password), setup.SWITCHBOARD_DB_PASSWORD);
    assert.equal(db.pathname, `/${setup.SWITCHBOARD_DB}`);
  }
  // One image and one data volume (the admin key and the secrets key made by the first start).
  assert.equal(new Set(SWITCHBOARD.map((s) => services[s].image)).size, 1);
  for (const sb of SWITCHBOARD) assert.deepEqual(services[sb].volumes, ['switchboard-data:/app/.data'], sb);
  // That database is created by its own one-shot (docker/setup-switchboard-db.sh), not by Temporal's.
  assert.doesNotMatch(read('docker/setup-postgres.sh'), /--db switchboard create/);
  assert.deepEqual(services['switchboard-db-setup'].volumes, ['./docker/setup-switchboard-db.sh:/scripts/setup-switchboard-db.sh:ro']);
});

/**
 * docker/setup-switchboard-db.sh run for real (psql) against the local PostgreSQL, as the superuser: a role that is
 * not a superuser and its database, where Switchboard's migrations then run as that role; run again (idempotent),
 * and on a database an older compose file made as the superuser, which it hands over to the role.
 */
test('the database setup makes a least-privilege role that owns the database; Switchboard migrates and works as it', async () => {
  const name = `sb_role_${Math.random().toString(16).slice(2, 8)}`;
  const url = new URL(DATABASE_URL);
  const env = { ...process.env, PGHOST: url.hostname, PGPORT: url.port || '5432', PGUSER: decodeURIComponent(url.username) || 'postgres', PGPASSWORD: decodeURIComponent(url.password), SWITCHBOARD_DB: name, SWITCHBOARD_DB_USER: name, SWITCHBOARD_DB_PASSWORD: "it's secret" };
  const setup = () => execFileSync('sh', [path.join(root, 'docker/setup-switchboard-db.sh')], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const admin = createPool({ connectionString: DATABASE_URL, max: 1 });
  const asRole = (db = name) => {
    const u = new URL(DATABASE_URL);
    u.username = name;
    u.password = "it's secret";
    u.pathname = `/${db}`;
    return createPool({ connectionString: u.toString(), max: 2 });
  };
  const upgraded = `${name}_old`;
  try {
    assert.match(setup(), new RegExp(`database ${name} ready, owned by role ${name} \\(not a superuser\\)`));
    setup(); // again: nothing to do, no error
    const { rows } = await admin.query('SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = $1', [name]);
    assert.deepEqual(rows[0], { rolsuper: false, rolcreatedb: false, rolcreaterole: false, rolreplication: false, rolbypassrls: false });
    const pool = asRole();
    try {
      assert.ok((await migrate(pool)).length > 10, 'every migration applied as the role');
      await pool.query("INSERT INTO tenants (id, name) VALUES ('t1', 'T1')");
      await assert.rejects(pool.query(`CREATE DATABASE ${name}_more`), /permission denied/);
      await assert.rejects(pool.query(`CREATE ROLE ${name}_more`), /permission denied/);
    } finally {
      await pool.end();
    }

    // A database made (and migrated) by the superuser, as the compose file before this one did: handed over.
    await admin.query(`CREATE DATABASE ${upgraded}`);
    const old = createPool({ connectionString: Object.assign(new URL(DATABASE_URL), { pathname: `/${upgraded}` }).toString(), max: 1 });
    try {
      await migrate(old);
    } finally {
      await old.end();
    }
    execFileSync('sh', [path.join(root, 'docker/setup-switchboard-db.sh')], { env: { ...env, SWITCHBOARD_DB: upgraded }, stdio: 'ignore' });
    const moved = asRole(upgraded);
    try {
      const { rows: foreign } = await moved.query(
        `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relkind IN ('r', 'S', 'v') AND pg_get_userbyid(c.relowner) <> current_user
         UNION ALL SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = 'public' AND pg_get_userbyid(p.proowner) <> current_user`,
      );
      assert.deepEqual(foreign, [], 'every table, sequence and function is the role\'s now');
      assert.deepEqual(await migrate(moved), [], 'nothing left to migrate');
      await moved.query("INSERT INTO tenants (id, name) VALUES ('t1', 'T1')");
      await moved.query('ALTER TABLE tenants ADD COLUMN later_migration text'); // what a future migration does
    } finally {
      await moved.end();
    }
  } finally {
    for (const db of [name, upgraded]) await admin.query(`DROP DATABASE IF EXISTS ${db}`);
    await admin.query(`DROP ROLE IF EXISTS ${name}`);
    await admin.end();
  }
});

test('the image runs Node 20 on glibc, starts node itself on the compiled build under an init, as a non-root user', () => {
  const dockerfile = read('Dockerfile');
  // Both stages: the build stage (tsc, webpack) and the image.
  const froms = [...dockerfile.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]);
  assert.equal(froms.length, 2, 'a build stage and the image');
  for (const from of froms) {
    const [image, tag = ''] = from.split(':');
    assert.equal(image, 'node');
    // The Temporal core-bridge native module does not load on musl, and Switchboard is built for Node 20.
    assert.match(tag, /^20(\.|-|$)/, `FROM ${from}`);
    assert.doesNotMatch(tag, /alpine/, `FROM ${from}`);
  }
  // node is the process SIGTERM reaches (npm would not pass it on); compose runs it under an init. It runs the
  // compiled build, the file `npm start` runs, made by `npm run build` in the build stage and copied into the image.
  const start = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.start;
  assert.equal(start, 'node dist/src/main.js');
  assert.match(dockerfile, /^CMD \["node", "dist\/src\/main\.js"\]$/m);
  assert.match(dockerfile, /^FROM \S+ AS build$[^]*^RUN npm run build$/m, 'a build stage runs npm run build');
  assert.match(dockerfile, /^COPY --from=build \/app\/dist \.\/dist$/m, 'the image holds the build stage\'s dist/');
  for (const sb of SWITCHBOARD) assert.equal((services[sb] as Service & { init?: boolean }).init, true, sb);
  assert.match(dockerfile, /^USER node$/m);
});

test('the image runs node on jemalloc (glibc malloc kept ~80 MB more with many tasks paused; docs/benchmark.md "Paused tasks")', () => {
  const dockerfile = read('Dockerfile');
  assert.match(dockerfile, /apt-get install[^\n]*\blibjemalloc2\b/);
  const preload = dockerfile.match(/^ENV LD_PRELOAD=(\S+)$/m)?.[1];
  assert.ok(preload, 'ENV LD_PRELOAD in the Dockerfile');
  // The path preloaded is the one the install step links, and it is set before node starts (before CMD).
  assert.match(dockerfile, new RegExp(`ln -s "\\$\\(dpkg -L libjemalloc2 [^\\n]*" ${preload}$`, 'm'), `${preload} is linked to the package's library`);
  assert.ok(dockerfile.indexOf('ENV LD_PRELOAD') < dockerfile.indexOf('CMD '));
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
  // The same settings as every dev server Switchboard starts (one list, src/embedded/temporal.ts).
  for (const [key, value] of Object.entries(DYNAMIC_CONFIG)) assert.equal(dynamic[key]?.[0]?.value, value, `${key} in ${dc}`);
});

/** A TEMPORAL_CLUSTER_PORT the script accepts (at most 32664) whose ports up to +103 are free now. */
async function clusterPort(): Promise<number> {
  const { portIsFree } = await import('../src/embedded/net');
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * 22_000);
    const ports = [0, 1, 2, 3, 10, 20, 100, 101, 102, 103].map((d) => port + d);
    if ((await Promise.all(ports.map((p) => portIsFree('127.0.0.1', p)))).every(Boolean)) return port;
  }
}

test('scripts/temporal-cluster.sh refuses a port whose membership ports would pass 32767, saying which to choose', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'temporal-cluster-'));
  const calls = path.join(dir, 'calls');
  // Stand-ins that would record a build, a SQL step or a server start: none may happen.
  for (const name of ['temporal-sql-tool', 'temporal-server', 'temporal']) writeFileSync(path.join(dir, name), `#!/bin/sh\necho "${name} $*" >> "${calls}"\n`, { mode: 0o755 });
  try {
    for (const [port, why] of [['47333', /too high: the membership ports would be 47433\.\.47436/], ['32665', /32765\.\.32768/], ['7333x', /not a port number/]] as const) {
      const r = spawnSync('bash', [path.join(root, 'scripts/temporal-cluster.sh'), 'start'], {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TEMPORAL_CLUSTER_PORT: port, TEMPORAL_CLUSTER_BIN: dir, TEMPORAL_CLUSTER_DIR: path.join(dir, 'state'), TEMPORAL_CLI: path.join(dir, 'temporal') },
        encoding: 'utf8',
      });
      assert.equal(r.status, 1, port);
      assert.match(r.stderr, why, port);
      assert.match(r.stderr, /choose a port from 1 to 32664 \(default 7333\)/, port);
    }
    assert.equal(existsSync(calls), false, 'nothing was set up or started');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * scripts/temporal-cluster.sh is the same topology without Docker (the Temporal server on PostgreSQL, the
 * namespace and search attributes by docker/setup-temporal.sh, the same dynamic config). Run here for real with
 * stand-ins for the server, the SQL tool and the CLI that record how they are called; `npm run cluster` runs it
 * with the real ones.
 */
test('scripts/temporal-cluster.sh sets up both databases, starts the server on its own ports, makes the namespace, stops, destroys', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'temporal-cluster-'));
  const calls = path.join(dir, 'calls');
  const bin = path.join(dir, 'bin');
  const schemas = path.join(dir, 'schema');
  const state = path.join(dir, 'state');
  execFileSync('mkdir', ['-p', bin, path.join(schemas, 'temporal/versioned'), path.join(schemas, 'visibility/versioned')]);
  const stub = (name: string, body: string) => writeFileSync(path.join(bin, name), `#!/bin/sh\necho "${name} $*" >> "${calls}"\n${body}\n`, { mode: 0o755 });
  stub('temporal-sql-tool', 'exit 0');
  stub('temporal-server', 'exec sleep 300'); // runs until stopped, as the server does
  stub('temporal', 'case "$*" in *"namespace describe"*) exit 1 ;; *"cluster health"*) echo SERVING ;; esac; exit 0');
  const port = await clusterPort();
  const env = {
    PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '',
    TEMPORAL_CLUSTER_BIN: bin, TEMPORAL_CLUSTER_SCHEMA_DIR: schemas, TEMPORAL_CLUSTER_DIR: state, TEMPORAL_CLUSTER_PORT: String(port),
    TEMPORAL_CLUSTER_DB: 'tc_test', TEMPORAL_CLI: path.join(bin, 'temporal'),
  };
  const script = (cmd: string) => execFileSync('bash', [path.join(root, 'scripts/temporal-cluster.sh'), cmd], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    assert.equal(script('start').trim(), `127.0.0.1:${port}`, 'prints the address to use as TEMPORAL_ADDRESS');
    const log = () => readFileSync(calls, 'utf8').trim().split('\n');
    const sql = log().filter((c) => c.startsWith('temporal-sql-tool')).map((c) => c.replace(/^.*--password  ?/, ''));
    assert.deepEqual(sql, [
      '--db tc_test create-database', '--db tc_test setup-schema -v 0.0', `--db tc_test update-schema -d ${schemas}/temporal/versioned`,
      '--db tc_test_visibility create-database', '--db tc_test_visibility setup-schema -v 0.0', `--db tc_test_visibility update-schema -d ${schemas}/visibility/versioned`,
    ]);
    assert.ok(log().every((c) => !c.startsWith('temporal-sql-tool') || c.includes('--plugin postgres12 --ep 127.0.0.1 --port 5432 --user postgres')));
    assert.deepEqual(log().filter((c) => c.startsWith('temporal-server')), [`temporal-server --root ${state} --config config --env cluster --allow-no-auth start`]);
    // Namespace and search attributes through docker/setup-temporal.sh, at the cluster's address.
    assert.ok(log().some((c) => c.startsWith(`temporal operator namespace create --namespace default --retention 720h --address 127.0.0.1:${port}`)), log().join('\n'));
    const created = log().filter((c) => c.includes('search-attribute create')).map((c) => c.match(/--name (\S+)/)?.[1]);
    assert.deepEqual(created.sort(), Object.keys(SEARCH_ATTRIBUTES).sort());

    // The config the server got: PostgreSQL for both stores, every port derived from TEMPORAL_CLUSTER_PORT and
    // distinct, and the dynamic config docker-compose's server reads.
    const config = parse(readFileSync(path.join(state, 'config/cluster.yaml'), 'utf8'));
    const stores = config.persistence.datastores;
    assert.deepEqual([stores[config.persistence.defaultStore].sql.databaseName, stores[config.persistence.visibilityStore].sql.databaseName], ['tc_test', 'tc_test_visibility']);
    assert.equal(stores['postgres-default'].sql.pluginName, services.temporal.environment?.DB, 'the plugin the compose server uses');
    const rpc = Object.values(config.services as Record<string, { rpc: Record<string, number | boolean> }>).map((s) => s.rpc);
    const ports = [...rpc.flatMap((r) => [r.grpcPort, r.membershipPort, r.httpPort].filter((p) => p !== undefined)), Number(config.global.metrics.prometheus.listenAddress.split(':')[1])];
    assert.equal(new Set(ports).size, ports.length, `distinct ports: ${ports.join(', ')}`);
    assert.equal(config.services.frontend.rpc.grpcPort, port);
    assert.equal(config.clusterMetadata.clusterInformation.active.rpcAddress, `127.0.0.1:${port}`);
    assert.equal(path.relative(root, config.dynamicConfigClient.filepath), path.join('docker', String(services.temporal.environment?.DYNAMIC_CONFIG_FILE_PATH).replace(/^config\//, '')));

    assert.match(script('status'), /SERVING/, 'status asks the cluster');
    const pid = Number(readFileSync(path.join(state, 'server.pid'), 'utf8'));
    script('stop');
    assert.throws(() => process.kill(pid, 0), 'the server is gone');
    assert.throws(() => script('status'), 'status says not running (exit 1)');
    script('destroy');
    assert.deepEqual(log().filter((c) => c.includes('drop-database')).map((c) => c.match(/--db (\S+)/)?.[1]), ['tc_test', 'tc_test_visibility']);
    assert.equal(existsSync(state), false);
  } finally {
    try {
      script('stop');
    } catch {
      // already stopped
    }
    rmSync(dir, { recursive: true, force: true });
  }
});
