// The compiled build for real: `npm run build` (scripts/build.js), then the server `npm start` runs
// (`node dist/src/main.js`, no tsx) as a process on the test's Temporal dev server and PostgreSQL schema. It
// finds its migrations and console page beside the compiled code, loads the prebuilt workflow bundle for its
// plugins (when it is fresh) instead of bundling at start, and completes a task for an @a2a-js/sdk client.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, statSync, utimesSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { SendMessageRequest, TaskState } from '@a2a-js/sdk';
import { AgentPool, startAskingAgent, startEchoAgent } from './agents';
import { clientFactory, DATABASE_URL, eventually, type Gateway, register, rememberKeys, startGateway, TEST_ADMIN_KEY } from './helpers/harness';
import { freePort, startSwitchboard } from './helpers/process';
import { prebuiltWorkflowBundle } from '../src/worker/worker';
import { generateKeySpec } from '../src/core/temporal/encryption-codec';
import { workflowIdOf } from '../task/messages';

const ROOT = path.resolve(__dirname, '..');
const DIST = path.join(ROOT, 'dist');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
let gw: Gateway;
const agents = new AgentPool();
/** What `npm run build` printed on stderr. */
let buildOutput = '';

before(async () => {
  // Only the build's own output on stderr: a failure names the file tsc or webpack stopped at.
  const shown = spawnSync(npm, ['run', '--silent', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  buildOutput = shown.stderr;
  assert.equal(shown.status, 0, buildOutput);
  // The Temporal dev server, the schema and the keys; the compiled process runs tasks on a queue of its own.
  gw = await startGateway();
});
after(async () => {
  await agents.closeAll();
  await gw?.close();
});

test('npm run build writes the compiled server, its assets and a workflow bundle per plugin set; --if-stale then does nothing', () => {
  for (const file of ['src/main.js', 'src/core/db/migrations/001_init.sql', 'src/api/console/index.html', 'workflow-bundle.js', 'workflow-bundle.OpenTelemetryPlugin.js', 'workflow-bundle.sealed-failures.js', 'workflow-bundle.OpenTelemetryPlugin.sealed-failures.js', 'bench/run.js']) {
    assert.ok(existsSync(path.join(DIST, file)), `dist/${file}`);
  }
  // Progress while it builds (not a terminal here: each step named on its line, a dot every 3 s), then the time.
  assert.match(buildOutput, /^build: compiling TypeScript \(tsc\) \.*$/m);
  assert.match(buildOutput, /^build: bundling the workflow code \(webpack\), 4 of 4 \.*$/m);
  assert.match(buildOutput, /^build: done in (\d+m)?\d+s$/m);
  const built = statSync(path.join(DIST, '.built')).mtimeMs;
  const out = execFileSync(process.execPath, ['scripts/build.js', '--if-stale'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  assert.equal(out, '');
  assert.equal(statSync(path.join(DIST, '.built')).mtimeMs, built, 'an up-to-date dist/ is not built again');
});

test('a prebuilt bundle older than the workflow code is not used: the worker bundles the sources at start instead', () => {
  const file = path.join(DIST, 'workflow-bundle.js');
  assert.deepEqual(prebuiltWorkflowBundle(), { codePath: file });
  assert.equal(prebuiltWorkflowBundle([{ name: 'SomeOtherPlugin' }]), undefined, 'no bundle was built for that plugin');
  const { atime, mtime } = statSync(file);
  utimesSync(file, atime, new Date(0)); // as if workflows/ had been edited after the build
  try {
    assert.equal(prebuiltWorkflowBundle(), undefined);
  } finally {
    utimesSync(file, atime, mtime);
  }
});

/** Starts `node dist/src/main.js` on the test's Temporal and schema, at debug level (the SDK then logs its worker options). */
async function startCompiled(env: Record<string, string> = {}) {
  const url = new URL(DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${gw.db.schema}`);
  const taskQueue = `build-${randomBytes(3).toString('hex')}`;
  const sb = await startSwitchboard(
    {
      DATABASE_URL: url.toString(),
      TEMPORAL_ADDRESS: gw.env.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true',
      SWITCHBOARD_ADMIN_KEY: TEST_ADMIN_KEY,
      LOG_LEVEL: 'debug',
      ...env,
    },
    // Debug output is long: keep all of it, to find the worker's options in it.
    { compiled: true, keepOutput: 50_000_000 },
  );
  rememberKeys(sb.url, gw.keys);
  return { sb, taskQueue };
}

/** The workflow bundle the process's task-queue worker was created with (the SDK's "Creating worker" debug line). */
function bundleOf(output: string, taskQueue: string): unknown {
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { msg?: string; options?: { taskQueue?: string; workflowBundle?: unknown; workflowsPath?: string } };
    if (entry.msg === 'Creating worker' && entry.options?.taskQueue === taskQueue) return entry.options.workflowBundle ?? { workflowsPath: entry.options.workflowsPath };
  }
  return undefined;
}

/** One blocking task through the process's gateway card for an agent (default: an echo agent), with an @a2a-js/sdk client. */
async function sendOne(sbUrl: string, text: string, agentUrl?: string) {
  const agent = agentUrl ?? (await agents.add(startEchoAgent())).url;
  const { base } = await register({ ...gw, url: sbUrl }, agent);
  const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
  const result = await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } }));
  assert.ok('status' in result, `a task: ${JSON.stringify(result)}`);
  return result;
}

/** One blocking task to an echo agent: its final state. */
async function oneTask(sbUrl: string, text: string) {
  return (await sendOne(sbUrl, text)).status?.state;
}

test('the compiled server is ready, runs the prebuilt bundle, serves the console and completes a task', async () => {
  const { sb, taskQueue } = await startCompiled();
  try {
    const ready = await fetch(`${sb.url}/readyz`);
    const body = (await ready.json()) as { ready: boolean; checks: { migrations: { pending: string[] }; worker: { running: boolean } } };
    assert.equal(ready.status, 200, JSON.stringify(body));
    assert.deepEqual(body.checks.migrations.pending, [], 'the migrations were found in dist/ and applied');
    assert.equal(body.checks.worker.running, true);
    assert.equal((await fetch(`${sb.url}/console`)).status, 200, 'the console page is served from dist/');
    assert.deepEqual(bundleOf(sb.output(), taskQueue), { codePath: path.join(DIST, 'workflow-bundle.js') });
    assert.equal(await oneTask(sb.url, 'compiled'), TaskState.TASK_STATE_COMPLETED);
  } finally {
    await sb.kill();
  }
});

test('with SWITCHBOARD_PAYLOAD_KEY, the compiled worker runs the sealed-failures bundle and completes a task', async () => {
  const { sb, taskQueue } = await startCompiled({ SWITCHBOARD_PAYLOAD_KEY: generateKeySpec('k1') });
  try {
    assert.deepEqual(bundleOf(sb.output(), taskQueue), { codePath: path.join(DIST, 'workflow-bundle.sealed-failures.js') });
    assert.equal(await oneTask(sb.url, 'sealed'), TaskState.TASK_STATE_COMPLETED);
  } finally {
    await sb.kill();
  }
});

test('with tracing on, the compiled worker runs the OpenTelemetry bundle, whose workflow interceptors export the workflow span', async () => {
  const names: string[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const doc = JSON.parse(body || '{}') as { resourceSpans?: { scopeSpans: { spans: { name: string }[] }[] }[] };
      for (const rs of doc.resourceSpans ?? []) for (const ss of rs.scopeSpans) names.push(...ss.spans.map((s) => s.name));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const { sb, taskQueue } = await startCompiled({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`, OTEL_BSP_SCHEDULE_DELAY: '200' });
  try {
    assert.deepEqual(bundleOf(sb.output(), taskQueue), { codePath: path.join(DIST, 'workflow-bundle.OpenTelemetryPlugin.js') });
    assert.equal(await oneTask(sb.url, 'traced'), TaskState.TASK_STATE_COMPLETED);
    // RunWorkflow comes from the interceptors inside the bundle (through the plugin's sink): spans export in batches.
    await eventually(() => names.includes('RunWorkflow:taskWorkflow'), 15_000, () => `the workflow span to be exported (got ${names.join(', ')})`);
    assert.ok(names.includes('RunWorkflow:taskWorkflow'), `the workflow span was exported (got ${names.join(', ')})`);
  } finally {
    await sb.kill();
    receiver.close();
  }
});

test('SWITCHBOARD_WORKFLOW_STACK_TRACES=true: the worker bundles workflows/ at start without the sandbox, and Stack Trace names where a paused task waits', async () => {
  const { sb, taskQueue } = await startCompiled({ SWITCHBOARD_WORKFLOW_STACK_TRACES: 'true' });
  try {
    assert.deepEqual(bundleOf(sb.output(), taskQueue), { workflowsPath: path.join(DIST, 'workflows/index.js') });
    const asking = await agents.add(startAskingAgent());
    const task = await sendOne(sb.url, 'greet me', asking.url);
    assert.equal(task.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
    // The SDK's stack-trace query, as Temporal UI's Stack Trace tab asks it (the default's two frames name no workflow line: tasks.test.ts).
    const stack = await gw.env.client.workflow.getHandle(workflowIdOf('default', task.id)).query<string>('__stack_trace');
    assert.match(stack, /at TaskMachine\.converse \(.*task-workflow\.js:\d+:\d+\)/);
  } finally {
    await sb.kill();
  }
});
