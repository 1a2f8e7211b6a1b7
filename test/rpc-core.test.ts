// The RPC core (src/a2a/rpc-handler.ts) called directly, with no HTTP server, no Temporal and no database: every
// answer it gives before a call reaches a task. A bad request never gets as far as the dependencies, so none
// are given (any use of one would throw here), and the resolver records what a valid call would run with.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RpcCore, type RpcAnswer, type RpcCall, type RpcCoreDeps, type RpcRequest } from '../src/a2a/rpc-handler';
import type { Caller } from '../src/auth/caller';

const client: Caller = { keyId: 'key_test', role: 'client', tenant: 'default', via: 'key' };
const core = new RpcCore({} as RpcCoreDeps);

/** Answers `body` as `caller`; the resolver refuses every valid call, recording what it was given. */
async function answer(body: unknown, opts: { caller?: Caller; version?: string } = {}): Promise<{ answer: RpcAnswer; calls: RpcCall[] }> {
  const calls: RpcCall[] = [];
  const req: RpcRequest = {
    body: typeof body === 'string' ? body : JSON.stringify(body),
    caller: opts.caller ?? client,
    headers: {},
    version: opts.version,
    base: 'http://gateway.test',
    signal: new AbortController().signal,
  };
  const result = await core.answer(req, async (call) => {
    calls.push(call);
    return { refuse: { httpStatus: 404, code: -32600, message: 'resolved' } };
  });
  return { answer: result, calls };
}

function json(a: RpcAnswer): { status: number; body: any } {
  assert.ok(!('stream' in a), 'a JSON answer');
  return { status: a.status, body: a.body };
}

const message = { messageId: 'm-1', role: 'ROLE_USER', parts: [{ text: 'hi' }] };

describe('RPC core, before any work', () => {
  test('unparseable JSON is -32700 with a null id', async () => {
    const { answer: a, calls } = await answer('{"jsonrpc":"2.0",');
    const { status, body } = json(a);
    assert.equal(status, 200);
    assert.equal(body.id, null);
    assert.equal(body.error.code, -32700);
    assert.equal(calls.length, 0);
  });

  test('a bad envelope is -32600 and echoes a readable id', async () => {
    const { body } = json((await answer({ jsonrpc: '1.0', id: 7, method: 'GetTask' })).answer);
    assert.deepEqual([body.id, body.error.code], [7, -32600]);
    const scalarParams = json((await answer({ jsonrpc: '2.0', id: 'x', method: 'GetTask', params: 3 })).answer).body;
    assert.deepEqual([scalarParams.id, scalarParams.error.code], ['x', -32600]);
  });

  test('an unknown method is -32601', async () => {
    // tasks/send is a method since the 0.1 dialect (dialects/v01.ts); no dialect has this one.
    const { body } = json((await answer({ jsonrpc: '2.0', id: 1, method: 'tasks/frobnicate', params: {} })).answer);
    assert.equal(body.error.code, -32601);
    assert.match(body.error.message, /tasks\/frobnicate/);
  });

  test('bad params are -32602 naming the field, in each dialect its own way', async () => {
    const v1 = json((await answer({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { ...message, parts: [] } } })).answer).body;
    assert.equal(v1.error.code, -32602);
    const badRequest = v1.error.data.find((d: { '@type': string }) => d['@type'] === 'type.googleapis.com/google.rpc.BadRequest');
    assert.deepEqual(badRequest.fieldViolations.map((v: { field: string }) => v.field), ['message.parts']);

    const legacy = json((await answer({ jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: '' } })).answer).body;
    assert.equal(legacy.error.code, -32602);
    assert.deepEqual(legacy.error.data.map((v: { field: string }) => v.field), ['id']);
  });

  test('U+0000 anywhere in params is refused before anything stores it', async () => {
    const { answer: a, calls } = await answer({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'a\u0000b' } });
    assert.equal(json(a).body.error.code, -32602);
    assert.match(json(a).body.error.message, /U\+0000/);
    assert.equal(calls.length, 0);
  });

  test('an A2A-Version it does not speak is -32009; 1.0 and 0.3 (with patch levels) are spoken', async () => {
    assert.equal(json((await answer({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 't' } }, { version: '2.0' })).answer).body.error.code, -32009);
    for (const version of ['1.0', '0.3', '0.3.0']) {
      const { calls } = await answer({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 't' } }, { version });
      assert.equal(calls.length, 1, version);
    }
  });

  test('a method the role may not call is HTTP 403 naming the roles it needs', async () => {
    const operator: Caller = { ...client, role: 'operator' };
    const { answer: a, calls } = await answer({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } }, { caller: operator });
    const { status, body } = json(a);
    assert.equal(status, 403);
    assert.equal(body.error.code, -32056, 'a JSON-RPC error, on a JSON-RPC endpoint');
    assert.match(body.error.data[0].metadata.requiredRoles, /client/);
    assert.equal(calls.length, 0);
    // Reads are every role's.
    assert.equal((await answer({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 't' } }, { caller: operator })).calls.length, 1);
  });

  test('the extended card is UnsupportedOperation in both dialects', async () => {
    for (const method of ['GetExtendedAgentCard', 'agent/getAuthenticatedExtendedCard']) {
      const { body } = json((await answer({ jsonrpc: '2.0', id: 1, method, params: {} })).answer);
      assert.equal(body.error.code, -32004, method);
    }
  });

  test('what is validated is what runs: the resolver gets the checked params, the dialect and the stream position', async () => {
    const { calls } = await answer({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 't-1', historyLength: 2, smuggled: { x: 1 } } });
    assert.deepEqual(calls[0].params, { id: 't-1', historyLength: 2 });
    assert.equal(calls[0].dialect, '1.0');
    const legacy = await answer({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: 't-2' } });
    assert.equal(legacy.calls[0].dialect, '0.3');
  });

  test('a refusal by the resolver is its envelope with its HTTP status', async () => {
    const { status, body } = json((await answer({ jsonrpc: '2.0', id: 'r', method: 'GetTask', params: { id: 't' } })).answer);
    assert.equal(status, 404);
    assert.deepEqual(body, { jsonrpc: '2.0', id: 'r', error: { code: -32600, message: 'resolved' } });
  });
});
