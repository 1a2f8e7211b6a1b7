// OpenTelemetry traces on a real gateway (Temporal dev server, PostgreSQL, an SDK agent, an SDK client): one trace
// per request from the client's traceparent through the front door, the workflow and the activity to the agent's
// HTTP call, which receives traceparent itself. Spans are read from an in-memory exporter.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { type Message, SendMessageRequest, type Task, TaskState } from '@a2a-js/sdk';
import { AgentPool, startAskingAgent, startEchoAgent } from './agents';
import { clientFactory, DATABASE_URL, eventually, type Gateway, register, rememberKeys, startGateway, TEST_ADMIN_KEY } from './helpers/harness';
import { freePort, startSwitchboard } from './helpers/process';
import { bindingFactory } from './helpers/binding-scenarios';
import { startTracing, type Tracing } from '../src/core/tracing-sdk';

const exporter = new InMemorySpanExporter();
let tracing: Tracing;
let gw: Gateway;
const agents = new AgentPool();

before(async () => {
  tracing = startTracing({ spanProcessor: new SimpleSpanProcessor(exporter), serviceName: 'switchboard-test' });
  gw = await startGateway({ tracing, grpc: true });
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
  await tracing?.shutdown();
});

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const request = (text: string) => SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });
const asTask = (r: Message | Task): Task => {
  assert.ok('status' in r, `expected a Task, got ${JSON.stringify(r)}`);
  return r;
};

/** The spans of one trace, once `done` holds for them (spans arrive as they end; the workflow's ends last). */
async function traceOf(traceId: string, done: (spans: ReadableSpan[]) => boolean): Promise<ReadableSpan[]> {
  const spans = () => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
  return eventually(() => {
    const got = spans();
    return done(got) ? got : undefined;
  }, 15_000, () => `trace ${traceId} to complete (got ${spans().map((s) => s.name).join(', ')})`);
}

/** Span names from `span` up to the trace's root, e.g. ['POST 127.0.0.1:…', 'RunActivity:forwardMessage', …]. */
function ancestry(spans: ReadableSpan[], span: ReadableSpan): ReadableSpan[] {
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
  const chain = [span];
  for (let s = span; s.parentSpanId && byId.has(s.parentSpanId); ) chain.push((s = byId.get(s.parentSpanId)!));
  return chain;
}

/** The gateway forwards a turn by SendMessage, or by SendStreamingMessage to an agent that streams. */
const isSend = (c: { method: string }) => /^(SendMessage|SendStreamingMessage|message\/send|message\/stream)$/.test(c.method);

const traceparentOf = (headers: Record<string, string | string[] | undefined>) => {
  const v = headers.traceparent;
  const m = typeof v === 'string' ? /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(v) : null;
  return m ? { traceId: m[1], parentId: m[2] } : undefined;
};

test("a task is one trace from the client's traceparent through workflow and activity to the agent's HTTP call", async () => {
  const echo = await agents.add(startEchoAgent());
  const { base } = await register(gw, echo.url);
  const traceId = hex(16);
  const clientSpanId = hex(8);
  const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
  const sent = asTask(await client.sendMessage(request('trace me'), { serviceParameters: { traceparent: `00-${traceId}-${clientSpanId}-01` } }));
  assert.equal(sent.status?.state, TaskState.TASK_STATE_COMPLETED);

  // The agent got the same trace, parented on one of Switchboard's spans.
  const call = echo.calls.find(isSend);
  assert.ok(call, 'the agent was called');
  const received = traceparentOf(call.headers);
  assert.ok(received, `the agent received a W3C traceparent (got ${String(call.headers.traceparent)})`);
  assert.equal(received.traceId, traceId);

  const spans = await traceOf(traceId, (s) => s.some((x) => x.spanContext().spanId === received.parentId) && s.some((x) => x.name.startsWith('RunWorkflow')));
  const server = spans.find((s) => s.kind === SpanKind.SERVER);
  assert.ok(server, 'a server span for the request');
  assert.equal(server.name, 'POST /agents/:id/a2a');
  assert.equal(server.parentSpanId, clientSpanId, "the request's span is the client's span's child");
  assert.equal(server.attributes['rpc.method'], 'SendMessage');
  assert.equal(server.attributes['http.response.status_code'], 200);

  // From the agent's call up to the request: the HTTP client span, the activity, the workflow, the request.
  const outbound = spans.find((s) => s.spanContext().spanId === received.parentId)!;
  assert.equal(outbound.kind, SpanKind.CLIENT);
  assert.equal(outbound.attributes['http.response.status_code'], 200);
  const chain = ancestry(spans, outbound).map((s) => s.name);
  assert.equal(chain.at(-1), server.name, `the chain reaches the request: ${chain.join(' ← ')}`);
  assert.ok(chain.some((n) => /^RunActivity/.test(n) && n.includes('forward')), `an activity span on the way: ${chain.join(' ← ')}`);
  assert.ok(chain.some((n) => /^(StartWorkflow|UpdateWithStart|StartUpdate|RunWorkflow|HandleUpdate)/.test(n)), `a workflow span on the way: ${chain.join(' ← ')}`);
  for (const s of spans) assert.equal(s.resource.attributes['service.name'], 'switchboard-test');

  console.log(`# trace: ${chain.join(' ← ')}`);
});

test("GetTask of a waiting task is a workflow query in the request's trace", async () => {
  const asking = await agents.add(startAskingAgent());
  const { base } = await register(gw, asking.url);
  const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
  const waiting = asTask(await client.sendMessage(request('hello')));
  assert.equal(waiting.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  const traceId = hex(16);
  const got = await client.getTask({ tenant: '', id: waiting.id, historyLength: undefined }, { serviceParameters: { traceparent: `00-${traceId}-${hex(8)}-01` } });
  assert.equal(got.id, waiting.id);
  const spans = await traceOf(traceId, (s) => s.some((x) => x.kind === SpanKind.SERVER) && s.some((x) => x.name.startsWith('QueryWorkflow')));
  const server = spans.find((s) => s.kind === SpanKind.SERVER)!;
  const query = spans.find((s) => s.name.startsWith('QueryWorkflow'))!;
  assert.equal(query.parentSpanId, server.spanContext().spanId, 'the query is the request span\'s child');
  assert.equal(server.attributes['rpc.method'], 'GetTask');
});

test('a gRPC agent receives the trace context as metadata', async () => {
  const echo = await agents.add(startEchoAgent({ bindings: ['GRPC'] }));
  const { base } = await register(gw, echo.url);
  const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
  const traceId = hex(16);
  asTask(await client.sendMessage(request('over grpc'), { serviceParameters: { traceparent: `00-${traceId}-${hex(8)}-01` } }));
  const call = echo.calls.find(isSend);
  assert.ok(call, 'the agent was called');
  const value = call.headers.traceparent;
  const received = traceparentOf({ traceparent: Array.isArray(value) ? String(value[0]) : value === undefined ? undefined : String(value) });
  assert.ok(received, `traceparent in the gRPC metadata (got ${String(value)})`);
  assert.equal(received.traceId, traceId);
});

test("a gRPC request to the gateway joins the traceparent of its metadata, through to the agent", async () => {
  const echo = await agents.add(startEchoAgent());
  const { id } = await register(gw, echo.url);
  const client = await bindingFactory('GRPC', gw.keys.client).createFromUrl(`${gw.url}/agents/${id}/`);
  assert.equal(client.transport.protocolName, 'GRPC');
  const traceId = hex(16);
  const clientSpanId = hex(8);
  asTask(await client.sendMessage(request('grpc in'), { serviceParameters: { traceparent: `00-${traceId}-${clientSpanId}-01` } }));
  const received = traceparentOf(echo.calls.find(isSend)!.headers);
  assert.equal(received?.traceId, traceId, 'the agent got the same trace');
  // The workflow's span ends with its run, which can be after the client's answer (the task settles in a later
  // workflow task): wait until the agent call's chain of spans is whole.
  const outbound = (s: ReadableSpan[]) => s.find((x) => x.spanContext().spanId === received!.parentId);
  const spans = await traceOf(traceId, (s) => s.some((x) => x.name === 'grpc SendMessage') && !!outbound(s) && ancestry(s, outbound(s)!).at(-1)?.name === 'grpc SendMessage');
  const server = spans.find((s) => s.name === 'grpc SendMessage')!;
  assert.equal(server.kind, SpanKind.SERVER);
  assert.equal(server.parentSpanId, clientSpanId, "the call's span is the client's span's child");
  assert.equal(server.attributes['rpc.grpc.status_code'], 0);
  const chain = ancestry(spans, spans.find((s) => s.spanContext().spanId === received!.parentId)!).map((s) => s.name);
  assert.equal(chain.at(-1), 'grpc SendMessage', `the chain reaches the gRPC call: ${chain.join(' ← ')}`);
});

test('a request without traceparent starts a trace of its own, and the agent still receives it', async () => {
  const echo = await agents.add(startEchoAgent());
  const { base } = await register(gw, echo.url);
  const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
  await client.sendMessage(request('no parent'));
  const received = traceparentOf(echo.calls.find(isSend)!.headers);
  assert.ok(received, 'the agent received a traceparent');
  const spans = await traceOf(received.traceId, (s) => s.some((x) => x.kind === SpanKind.SERVER));
  const server = spans.find((s) => s.kind === SpanKind.SERVER)!;
  assert.equal(server.parentSpanId, undefined, 'the request is the root');
});

test('npm start with OTEL_EXPORTER_OTLP_ENDPOINT exports the same trace over OTLP/HTTP', async () => {
  // An OTLP/HTTP receiver: the exporter POSTs JSON to /v1/traces.
  const received: { name: string; traceId: string; parentSpanId?: string; spanId: string }[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const doc = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: { name: string; traceId: string; spanId: string; parentSpanId?: string }[] }[] }[] };
        for (const rs of doc.resourceSpans) for (const ss of rs.scopeSpans) received.push(...ss.spans);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const url = new URL(DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${gw.db.schema}`);
  const sb = await startSwitchboard({
    DATABASE_URL: url.toString(),
    TEMPORAL_ADDRESS: gw.env.address,
    TEMPORAL_TASK_QUEUE: `otlp-${hex(3)}`,
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true',
    SWITCHBOARD_ADMIN_KEY: TEST_ADMIN_KEY,
    LOG_LEVEL: 'warn',
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`,
    OTEL_BSP_SCHEDULE_DELAY: '200',
  });
  try {
    rememberKeys(sb.url, gw.keys);
    const echo = await agents.add(startEchoAgent());
    const { base } = await register({ ...gw, url: sb.url }, echo.url);
    const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
    const traceId = hex(16);
    asTask(await client.sendMessage(request('export me'), { serviceParameters: { traceparent: `00-${traceId}-${hex(8)}-01` } }));
    // Spans end in different threads and are exported in batches: wait for all of them.
    const expected = ['POST /agents/:id/a2a', 'UpdateWithStartWorkflow:sendMessage', 'RunWorkflow:taskWorkflow', 'RunActivity:forwardFirstExchange'];
    const names = () => received.filter((s) => s.traceId === traceId).map((s) => s.name);
    await eventually(() => expected.every((n) => names().includes(n)), 15_000, () => `${expected.join(', ')} exported over OTLP (got ${names().join(', ')})`);
    for (const name of expected) assert.ok(names().includes(name), `${name} exported over OTLP (got ${names().join(', ')})`);
  } finally {
    await sb.kill();
    receiver.close();
  }
});
