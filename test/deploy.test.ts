// Static checks of the Kubernetes manifests under deploy/ (no cluster on CI): each document decoded strictly into
// the Kubernetes API's own types by deploy/check (Go, k8s.io/api: unknown fields, wrong types, bad quantities and
// names fail, offline), then what ties them together and to Switchboard: selectors and the pods they pick, probes
// on the port the process listens on, every env variable one src/core/config.ts reads and a valid config per role, the
// drain's timings against the worker's shutdown grace, the security context the image allows.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { ConfigError, loadConfig } from '../src/core/config';
import { parseKeyRing } from '../src/core/temporal/encryption-codec';

const root = path.resolve(__dirname, '..');
const read = (p: string) => readFileSync(path.join(root, p), 'utf8');

type Labels = Record<string, string>;
interface Probe { httpGet?: { path: string; port: string | number }; periodSeconds?: number; timeoutSeconds?: number; failureThreshold?: number }
interface Container {
  name: string;
  image: string;
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string }; configMapKeyRef?: { name: string; key: string } } }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  ports?: { name?: string; containerPort: number }[];
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] }; sleep?: { seconds: number } } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; runAsGroup?: number };
  containers: Container[];
  volumes?: { name: string }[];
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Labels; annotations?: Record<string, string> };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  spec?: {
    replicas?: number;
    selector?: { matchLabels?: Labels } & Labels;
    strategy?: { type: string; rollingUpdate?: { maxUnavailable?: number | string; maxSurge?: number | string } };
    template?: { metadata: { labels: Labels; annotations?: Record<string, string> }; spec: PodSpec };
    ports?: { name: string; port: number; targetPort: string | number }[];
    maxUnavailable?: number | string;
    minAvailable?: number | string;
  };
}

const kustomization = parseAllDocuments(read('deploy/kustomization.yaml'))[0]!.toJS() as {
  kind: string;
  resources: string[];
  images?: { name: string; newName?: string; newTag?: string }[];
};
const files = kustomization.resources.map((f) => path.join('deploy', f));
const objects: K8sObject[] = files.flatMap((f) =>
  parseAllDocuments(read(f)).map((doc) => {
    assert.deepEqual(doc.errors, [], f);
    return doc.toJS() as K8sObject;
  }),
).filter(Boolean);
const all = (kind: string) => objects.filter((o) => o.kind === kind);
const one = (kind: string, name: string) => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  assert.ok(found, `${kind}/${name} in deploy/`);
  return found;
};
const ROLES = ['api', 'worker'] as const;
const deployment = (role: (typeof ROLES)[number]) => one('Deployment', `switchboard-${role}`);
const podOf = (d: K8sObject) => d.spec!.template!.spec;
const containerOf = (d: K8sObject) => {
  const { containers } = podOf(d);
  assert.equal(containers.length, 1, `${d.metadata.name}: one container, Switchboard`);
  return containers[0]!;
};
const matches = (selector: Labels, labels: Labels) => Object.entries(selector).every(([k, v]) => labels[k] === v);

/** The variables src/core/config.ts reads: the keys of its zod object (the only reader of process.env). */
const CONFIG_NAMES = new Set([...read('src/core/config.ts').matchAll(/^ {2}([A-Z][A-Z0-9_]*):/gm)].map((m) => m[1]!));

/** A value of the Secret that would start a pod, for each placeholder: the template's own must not (below). */
const FILLED: Record<string, string> = {
  DATABASE_URL: 'postgres://switchboard:pw@postgresql.example.internal:5432/switchboard',
  SWITCHBOARD_ADMIN_KEY: 'a'.repeat(43),
  SWITCHBOARD_SECRETS_KEY: `k1:${Buffer.alloc(32, 1).toString('base64')}`,
};

/** The environment a container gets: envFrom's objects (ConfigMap data, Secret stringData) then its own env. */
function envOf(c: Container, secretValues: 'template' | 'filled' = 'filled'): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? []) {
    if (from.configMapRef) Object.assign(env, one('ConfigMap', from.configMapRef.name).data);
    if (from.secretRef) {
      const data = one('Secret', from.secretRef.name).stringData ?? {};
      Object.assign(env, secretValues === 'filled' ? Object.fromEntries(Object.keys(data).map((k) => [k, FILLED[k] ?? data[k]!])) : data);
    }
  }
  for (const e of c.env ?? []) {
    const ref = e.valueFrom?.secretKeyRef ?? e.valueFrom?.configMapKeyRef;
    env[e.name] = ref ? (e.valueFrom!.secretKeyRef ? one('Secret', ref.name).stringData : one('ConfigMap', ref.name).data)![ref.key]! : e.value!;
  }
  return env;
}

/** The container port a probe or a Service names (a port name, or a number). */
function portNumber(c: Container, port: string | number): number {
  if (typeof port === 'number') return port;
  const found = c.ports?.find((p) => p.name === port);
  assert.ok(found, `${c.name} has a port named ${port}`);
  return found.containerPort;
}

function ensureChecker(t: { skip(message: string): void }): string | undefined {
  const r = spawnSync('bash', [path.join(root, 'scripts/ensure-deploy-check.sh')], { encoding: 'utf8' });
  if (r.status === 3 && !process.env.CI) {
    t.skip('no Go toolchain to build deploy/check (CI has one)');
    return undefined;
  }
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim().split('\n').at(-1)!;
}

test('every manifest decodes strictly into the Kubernetes API types (deploy/check), and a broken one does not', (t) => {
  const checker = ensureChecker(t);
  if (!checker) return;
  const ok = spawnSync(checker, files.map((f) => path.join(root, f)), { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stdout + ok.stderr);
  assert.match(ok.stdout, new RegExp(`^${objects.length} documents in ${files.length} files decode strictly`));
  // The checker refuses what a strict kubeconform refuses: a misspelt field, a bad quantity, a port name the API
  // server would refuse, a string for a number, a kind it does not know.
  const dir = mkdtempSync(path.join(tmpdir(), 'deploy-check-'));
  try {
    const broken = (from: string, to: string, file = 'deploy/api.yaml') => {
      const text = read(file);
      assert.ok(text.includes(from), `${file} has ${from}`);
      const f = path.join(dir, 'broken.yaml');
      writeFileSync(f, text.replace(from, to));
      const r = spawnSync(checker, [f], { encoding: 'utf8' });
      assert.equal(r.status, 1, `${from} -> ${to} is refused`);
      return r.stdout;
    };
    assert.match(broken('maxSurge: 1', 'maxSurg: 1'), /unknown field "maxSurg"/);
    assert.match(broken('memory: 1Gi', 'memory: 1Gx', 'deploy/worker.yaml'), /quantities must match/);
    assert.match(broken('- name: grpc\n', '- name: grpc-binding-port\n'), /port name "grpc-binding-port": must be no more than 15 characters/);
    assert.match(broken('containerPort: 8080', 'containerPort: "8080"'), /cannot unmarshal string/);
    assert.match(broken('kind: Secret', 'kind: Secrets', 'deploy/secret.yaml'), /kind "Secrets" is not a kind deploy\/ ships/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the kustomization applies every manifest in deploy/, names the image the containers use, and no namespace', () => {
  assert.equal(kustomization.kind, 'Kustomization');
  const yamls = readdirSync(path.join(root, 'deploy')).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml');
  assert.deepEqual([...kustomization.resources].sort(), yamls.sort());
  for (const role of ROLES) assert.ok(kustomization.images?.some((i) => i.name === containerOf(deployment(role)).image), role);
  assert.equal((kustomization as { namespace?: string }).namespace, undefined, 'namespace-agnostic: set it in an overlay or with -n');
  for (const o of objects) assert.equal(o.metadata.namespace, undefined, `${o.kind}/${o.metadata.name}`);
  assert.deepEqual(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort(), [
    'ConfigMap/switchboard', 'Deployment/switchboard-api', 'Deployment/switchboard-worker', 'PodDisruptionBudget/switchboard-api',
    'PodDisruptionBudget/switchboard-worker', 'Secret/switchboard', 'Service/switchboard-api', 'ServiceAccount/switchboard',
  ]);
});

test('each role runs at least two pods, rolled one new pod ahead (maxUnavailable 0, maxSurge 1), and its selector picks its pods only', () => {
  for (const role of ROLES) {
    const d = deployment(role);
    assert.ok(d.spec!.replicas! >= 2, role);
    assert.deepEqual(d.spec!.strategy, { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } }, role);
    const selector = d.spec!.selector!.matchLabels!;
    assert.ok(matches(selector, d.spec!.template!.metadata.labels), `${role}: its selector picks its own pods`);
    const other = deployment(role === 'api' ? 'worker' : 'api');
    assert.ok(!matches(selector, other.spec!.template!.metadata.labels), `${role}'s selector does not pick ${other.metadata.name}'s pods`);
  }
});

test('the Service sends HTTP and gRPC to the api pods only, on the ports the api listens on', () => {
  const service = one('Service', 'switchboard-api');
  const api = deployment('api');
  const config = loadConfig(envOf(containerOf(api)));
  assert.ok(matches(service.spec!.selector as Labels, api.spec!.template!.metadata.labels));
  assert.ok(!matches(service.spec!.selector as Labels, deployment('worker').spec!.template!.metadata.labels), 'no worker behind the Service');
  const target = (name: string) => portNumber(containerOf(api), service.spec!.ports!.find((p) => p.name === name)!.targetPort);
  assert.equal(target('http'), config.PORT);
  assert.equal(target('grpc'), config.SWITCHBOARD_GRPC_PORT);
  assert.equal(all('Service').length, 1, 'workers serve only probes and /metrics: no Service');
});

test('each PodDisruptionBudget covers its Deployment\'s pods and lets a drain evict one at a time', () => {
  for (const role of ROLES) {
    const d = deployment(role);
    const pdb = one('PodDisruptionBudget', d.metadata.name);
    assert.deepEqual(pdb.spec!.selector!.matchLabels, d.spec!.selector!.matchLabels, role);
    assert.equal(pdb.spec!.maxUnavailable, 1, role);
  }
  assert.equal(all('PodDisruptionBudget').length, ROLES.length);
});

test('every variable the pods get is one Switchboard reads, and each role gets a valid config on external Temporal and PostgreSQL', () => {
  assert.ok(CONFIG_NAMES.has('DATABASE_URL') && CONFIG_NAMES.has('SWITCHBOARD_ROLE') && CONFIG_NAMES.size > 40, 'the names are read from src/core/config.ts');
  const configs = ROLES.map((role) => {
    const c = containerOf(deployment(role));
    const env = envOf(c);
    for (const name of Object.keys(env)) assert.ok(CONFIG_NAMES.has(name), `${role}: ${name} is not a variable src/core/config.ts reads`);
    const config = loadConfig(env);
    assert.equal(config.SWITCHBOARD_ROLE, role);
    // Probes, the Service and the scraper come from outside the pod: loopback (the default) would refuse them.
    assert.equal(config.HOST, '0.0.0.0', role);
    assert.equal(portNumber(c, 'http'), config.PORT, `${role}: the http port is PORT`);
    // Both external: the embedded ones are one process's, and a split role refuses to start without TEMPORAL_ADDRESS.
    assert.ok(config.DATABASE_URL && config.TEMPORAL_ADDRESS, role);
    // The root filesystem is read-only and every pod must share them: the keys come from the Secret, never a file.
    assert.ok(config.SWITCHBOARD_ADMIN_KEY && config.SWITCHBOARD_SECRETS_KEY, role);
    parseKeyRing(config.SWITCHBOARD_SECRETS_KEY, 'SWITCHBOARD_SECRETS_KEY');
    return config;
  });
  // One database, one Temporal namespace and task queue.
  for (const k of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE', 'TEMPORAL_TASK_QUEUE'] as const) assert.equal(configs[0]![k], configs[1]![k], k);
  // Every envFrom, keyRef and serviceAccountName names an object in deploy/ (one() asserts it), every mount a volume.
  for (const role of ROLES) {
    const pod = podOf(deployment(role));
    one('ServiceAccount', pod.serviceAccountName!);
    for (const m of containerOf(deployment(role)).volumeMounts ?? []) assert.ok(pod.volumes?.some((v) => v.name === m.name), `${role}: volume ${m.name}`);
  }
});

test('the Secret is a template: every value is a REPLACE_ME placeholder or empty, and a placeholder left in stops the pod', () => {
  const secret = one('Secret', 'switchboard');
  assert.equal(secret.data, undefined, 'stringData only: readable placeholders, nothing base64-hidden');
  for (const [key, value] of Object.entries(secret.stringData!)) assert.ok(value === '' || value.includes('REPLACE_ME'), `${key} holds no real secret`);
  for (const key of Object.keys(FILLED)) assert.ok(key in secret.stringData!, `${key} is in the Secret`);
  // Left as it is, the config is refused at start (exit 2, naming the variable), and so is the key ring.
  const env = envOf(containerOf(deployment('api')), 'template');
  assert.throws(() => loadConfig(env), (err: Error) => err instanceof ConfigError && /SWITCHBOARD_ADMIN_KEY: must be at least 32 characters/.test(err.message));
  assert.throws(() => parseKeyRing(env.SWITCHBOARD_SECRETS_KEY!, 'SWITCHBOARD_SECRETS_KEY'), /SWITCHBOARD_SECRETS_KEY entry 1/);
  // The secrets are not in the ConfigMap.
  const config = one('ConfigMap', 'switchboard').data!;
  for (const key of ['DATABASE_URL', 'SWITCHBOARD_ADMIN_KEY', 'SWITCHBOARD_SECRETS_KEY', 'SWITCHBOARD_PAYLOAD_KEY', 'REDIS_URL']) assert.ok(!(key in config), key);
});

test('probes: ready on /readyz, alive on /healthz, on the port the process listens on; a slow start is not killed', () => {
  for (const role of ROLES) {
    const c = containerOf(deployment(role));
    const port = loadConfig(envOf(c)).PORT;
    const probe = (p: Probe | undefined, kind: string) => {
      assert.ok(p?.httpGet, `${role}: ${kind}`);
      assert.equal(portNumber(c, p.httpGet.port), port, `${role}: ${kind} on PORT`);
      return p;
    };
    assert.equal(probe(c.readinessProbe, 'readiness').httpGet!.path, '/readyz');
    assert.equal(probe(c.livenessProbe, 'liveness').httpGet!.path, '/healthz');
    // Listening comes after migrating: the startup probe allows minutes before liveness counts.
    const startup = probe(c.startupProbe, 'startup');
    assert.equal(startup.httpGet!.path, '/healthz');
    assert.ok(startup.periodSeconds! * startup.failureThreshold! >= 300, `${role}: at least 5 minutes to start`);
    // /readyz probes PostgreSQL and Temporal with 2 s deadlines each (src/core/health.ts): give it more than that.
    assert.ok((c.readinessProbe!.timeoutSeconds ?? 1) > 2, `${role}: readiness timeout`);
  }
});

/** The longest shutdownGraceTime a Switchboard worker is created with (src/worker/worker.ts), in seconds. */
function workerShutdownGraceS(): number {
  const graces = [...read('src/worker/worker.ts').matchAll(/shutdownGraceTime: '(\d+)s'/g)].map((m) => Number(m[1]));
  assert.ok(graces.length >= 2, 'the task worker and the hub worker each set one');
  return Math.max(...graces);
}

/** A preStop hook's sleep, in seconds (exec `sleep N`, or the sleep action). */
function preStopS(c: Container): number {
  const hook = c.lifecycle?.preStop;
  if (!hook) return 0;
  if (hook.sleep) return hook.sleep.seconds;
  const [cmd, arg] = hook.exec!.command;
  assert.equal(cmd, 'sleep');
  return Number(arg);
}

test('the drain fits: terminationGracePeriodSeconds covers preStop, the worker\'s shutdown grace and a margin; the api leaves the endpoints first', () => {
  const grace = workerShutdownGraceS();
  const MARGIN_S = 15; // closing the HTTP server, the connections and the pool on a busy node
  for (const role of ROLES) {
    const d = deployment(role);
    const c = containerOf(d);
    const termination = podOf(d).terminationGracePeriodSeconds!;
    assert.ok(termination >= preStopS(c) + grace + MARGIN_S, `${role}: ${termination} s >= preStop ${preStopS(c)} s + grace ${grace} s + ${MARGIN_S} s`);
    // The docs give the numbers as they are.
    assert.match(read('docs/operations.md'), new RegExp(`\`switchboard-${role}\`[^\\n]*terminationGracePeriodSeconds\` ${termination}`), `docs/operations.md states ${role}'s ${termination} s`);
  }
  // Endpoints are removed while preStop runs: the api sleeps long enough for kube-proxy and ingresses to stop
  // sending new connections before SIGTERM closes its server. Workers have no endpoints and no preStop.
  assert.ok(preStopS(containerOf(deployment('api'))) >= 5);
  assert.equal(preStopS(containerOf(deployment('worker'))), 0);
  // The image has the sleep the hook runs (Debian's coreutils in node:20-bookworm-slim).
  assert.match(read('Dockerfile'), /^FROM node:20-bookworm-slim$/m);
});

test('pods run as the image\'s non-root user on a read-only root filesystem, with no privileges, no API token, and bounded resources', () => {
  // USER node in the Dockerfile; node images give it uid 1000. Numeric, so the kubelet can check runAsNonRoot.
  assert.match(read('Dockerfile'), /^USER node$/m);
  for (const role of ROLES) {
    const d = deployment(role);
    const pod = podOf(d);
    const c = containerOf(d);
    assert.deepEqual({ ...pod.securityContext, seccompProfile: undefined }, { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, seccompProfile: undefined }, role);
    assert.deepEqual(c.securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } }, role);
    assert.equal(pod.automountServiceAccountToken, false, `${role}: Switchboard never calls the Kubernetes API`);
    for (const r of ['cpu', 'memory']) assert.ok(c.resources?.requests?.[r] && c.resources.limits?.[r], `${role}: ${r} request and limit`);
    // Scrape annotations name the port /metrics is served on.
    const annotations = d.spec!.template!.metadata.annotations ?? {};
    assert.equal(Number(annotations['prometheus.io/port']), loadConfig(envOf(c)).PORT, role);
    assert.equal(annotations['prometheus.io/path'], '/metrics', role);
  }
});
