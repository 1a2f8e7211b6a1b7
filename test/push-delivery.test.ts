/**
 * Push notifications end to end: configs given inline with SendMessage or created with the config methods,
 * every task event delivered by the workflow's durable delivery activity to a real webhook that fails at
 * first, each delivery signed (HMAC and a JWT checked against the gateway's JWKS) and received once by id.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startAskingAgent, startChunkyAgent, type TestAgent } from './agents';
import { type Gateway, eventually, register, rpc, startGateway } from './helpers/harness';
import { verifyDelivery, type Jwks } from '../src/core/push/signing';
import { workflowIdOf } from '../task/messages';

let gw: Gateway;
const agents: TestAgent[] = [];
const SECRET = 'a-webhook-secret-of-at-least-32-characters';

interface Delivery {
  id: string;
  body: any;
  verified: boolean;
  token?: string;
}

/** A webhook that answers 500 to its first `failFirst` requests, then 200; it checks every signature. */
async function startReceiver(failFirst: number) {
  const received: Delivery[] = [];
  let requests = 0;
  let jwks: Jwks | undefined;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', async () => {
      requests++;
      if (requests <= failFirst) {
        res.writeHead(500).end('not yet');
        return;
      }
      jwks ??= (await (await fetch(`${gw.url}/.well-known/jwks.json`)).json()) as Jwks;
      let verified = false;
      try {
        await verifyDelivery(req.headers, { body, jwks, secret: req.headers['x-switchboard-signature'] ? SECRET : undefined });
        verified = true;
      } catch {
        verified = false;
      }
      received.push({ id: String(req.headers['x-switchboard-delivery-id']), body: JSON.parse(body), verified, token: req.headers['x-a2a-notification-token'] as string });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    requests: () => requests,
    close: () => new Promise<void>((r) => (server.close(() => r()), server.closeAllConnections())),
  };
}

before(async () => {
  gw = await startGateway({ pushRetryInitialMs: 100 });
});
after(async () => {
  await gw?.close();
  await Promise.all(agents.map((a) => a.close()));
});

const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });
const v1 = { 'A2A-Version': '1.0' };

describe('push notifications', () => {
  test('every event reaches a webhook that fails at first: once each by delivery id, in order, signed', async () => {
    const chunky = await startChunkyAgent({ chunks: 30 });
    agents.push(chunky);
    const receiver = await startReceiver(2);
    try {
      const { rpc: url } = await register(gw, chunky.url);
      const sent = await rpc(url, {
        jsonrpc: '2.0',
        id: 1,
        method: 'SendMessage',
        params: {
          message: userMessage('go'),
          configuration: { taskPushNotificationConfig: { url: receiver.url, token: 'tok-1', authentication: { scheme: 'HMAC-SHA256', credentials: SECRET } } },
        },
      }, v1);
      const task = sent.json.result.task;
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
      // The workflow ends only once every delivery loop has delivered the task's last event: after that,
      // nothing more can come.
      await gw.env.client.workflow.getHandle(workflowIdOf('default', task.id)).result();
      const { rows } = await gw.db.pool.query('SELECT count(*)::int AS n FROM task_events WHERE task_id = $1', [task.id]);
      const logged = rows[0].n;
      const ids = receiver.received.map((d) => d.id);
      assert.equal(new Set(ids).size, ids.length, 'no delivery id twice');
      assert.equal(ids.length, logged);
      const seqs = ids.map((id) => Number(id.split(':').at(-1)));
      assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'in log order');
      assert.ok(receiver.received.every((d) => d.verified), 'every signature checks out');
      assert.ok(receiver.received.every((d) => d.token === 'tok-1'));
      assert.ok(receiver.received[0].body.task, '1.0 bodies are StreamResponses');
      assert.equal(receiver.received.at(-1)!.body.statusUpdate.status.state, 'TASK_STATE_COMPLETED');
      assert.equal(receiver.requests(), logged + 2, 'the two failures were retried, nothing else resent');

      // The config's delivery status, through the Get method.
      const list = await rpc(url, { jsonrpc: '2.0', id: 2, method: 'ListTaskPushNotificationConfigs', params: { taskId: task.id } }, v1);
      const [config] = list.json.result.configs;
      assert.equal(config.url, receiver.url);
      const got = await rpc(url, { jsonrpc: '2.0', id: 3, method: 'GetTaskPushNotificationConfig', params: { taskId: task.id, id: config.id } }, v1);
      const status = got.json.result.deliveryStatus;
      assert.equal(status.deliveries, logged);
      assert.equal(status.failures, 2);
      assert.ok(status.lastSuccessAt);
      assert.equal(JSON.stringify(got.json.result).includes(SECRET), false, 'the secret is never shown');
    } finally {
      await receiver.close();
    }
  });

  test('a config created on a waiting task (0.3 set) gets the next turn\'s events as 0.3 bodies; delete is idempotent', async () => {
    const asker = await startAskingAgent();
    agents.push(asker);
    const receiver = await startReceiver(0);
    try {
      const { rpc: url } = await register(gw, asker.url);
      const first = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('hi') } }, v1);
      const taskId = first.json.result.task.id;
      const set = await rpc(url, { jsonrpc: '2.0', id: 2, method: 'tasks/pushNotificationConfig/set', params: { taskId, pushNotificationConfig: { url: receiver.url } } });
      assert.equal(set.json.result.pushNotificationConfig.url, receiver.url, JSON.stringify(set.json));
      await rpc(url, { jsonrpc: '2.0', id: 3, method: 'SendMessage', params: { message: userMessage('Ada', { taskId }) } }, v1);
      await eventually(() => receiver.received.some((d) => d.body.kind === 'status-update' && d.body.final) || undefined, 30_000, 'the final event');
      assert.equal(receiver.received[0].body.kind, 'task', 'starts with the new turn, nothing from before the config');
      assert.ok(receiver.received.every((d) => d.verified));
      const configId = set.json.result.pushNotificationConfig.id;
      for (let i = 0; i < 2; i++) {
        const del = await rpc(url, { jsonrpc: '2.0', id: 4, method: 'tasks/pushNotificationConfig/delete', params: { id: taskId, pushNotificationConfigId: configId } });
        assert.equal(del.json.error, undefined);
      }
      // A finished task's config is stored and listed (§3.1.7 names no error; the TCK creates one), and receives nothing.
      const before = receiver.received.length;
      const terminal = await rpc(url, { jsonrpc: '2.0', id: 5, method: 'CreateTaskPushNotificationConfig', params: { taskId, url: receiver.url } }, v1);
      assert.equal(terminal.json.error, undefined, JSON.stringify(terminal.json));
      const listed = await rpc(url, { jsonrpc: '2.0', id: 7, method: 'ListTaskPushNotificationConfigs', params: { taskId } }, v1);
      assert.ok(JSON.stringify(listed.json.result).includes(terminal.json.result.id), JSON.stringify(listed.json));
      assert.equal(receiver.received.length, before, 'a finished task sends nothing more');
      const missing = await rpc(url, { jsonrpc: '2.0', id: 6, method: 'CreateTaskPushNotificationConfig', params: { taskId: randomUUID(), url: receiver.url } }, v1);
      assert.equal(missing.json.error.code, -32001);
    } finally {
      await receiver.close();
    }
  });

  test('a webhook URL on a private or metadata address is refused (SSRF) unless private URLs are allowed', async () => {
    const strict = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false, allowPrivate: false });
    try {
      const asker = await startAskingAgent();
      agents.push(asker);
      const { id } = await register(gw, asker.url);
      const first = await rpc(`${gw.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('hi') } }, v1);
      const taskId = first.json.result.task.id;
      for (const url of ['http://169.254.169.254/latest/meta-data', 'http://127.0.0.1:1/hook', 'http://10.0.0.1/hook']) {
        const res = await rpc(`${strict.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 2, method: 'CreateTaskPushNotificationConfig', params: { taskId, url } }, v1);
        assert.equal(res.json.error?.code, -32602, `${url}: ${JSON.stringify(res.json)}`);
      }
      const inline = await rpc(`${strict.url}/agents/${id}/a2a`, {
        jsonrpc: '2.0',
        id: 3,
        method: 'SendMessage',
        params: { message: userMessage('x'), configuration: { taskPushNotificationConfig: { url: 'http://169.254.169.254/' } } },
      }, v1);
      assert.equal(inline.json.error?.code, -32602, JSON.stringify(inline.json));
    } finally {
      await strict.close();
    }
  });
});
