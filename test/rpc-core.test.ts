// The RPC core (src/api/a2a/rpc-handler.ts) called directly, after the JSON-RPC route's reading of the body (readEnvelope), with no HTTP server, no Temporal and no database: every
// answer it gives before a call reaches a task. A bad request never gets as far as the dependencies, so none
// are given (any use of one would throw here), and the resolver records what a valid call would run with.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RpcCore, type RpcAnswer, type RpcCall, type RpcCoreDeps, type RpcRequest } from '../src/api/a2a/rpc-handler';
import { readEnvelope } from '../src/api/a2a/rpc-errors';
import type { Caller } from '../src/core/auth/caller';

const client: Caller = { keyId: 'key_test', role: 'client', tenant: 'default', via: 'key' };
const core = new RpcCore({} as RpcCoreDeps);

type Answered = { answer: RpcAnswer; id: string | number | null; calls: RpcCall[] };

/** Reads `body` as the JSON-RPC route does, then answers it as `caller`; the resolver refuses every valid call, recording what it was given. */
async function answer(body: unknown, opts: { caller?: Caller; version?: string } = {}): Promise<Answered> {
  const calls: RpcCall[] = [];
  const rpc = readEnvelope(typeof body === 'string' ? body : JSON.stringify(body));
  if ('error' in rpc) return { answer: { error: rpc.error }, id: rpc.id, calls };
  const req: RpcRequest = {
    method: rpc.method,
    params: rpc.params,
    caller: opts.caller ?? client,
    headers: {},
    version: opts.version,
    base: 'http://gateway.test',
    signal: new AbortController().signal,
  };
  const result = await core.answer(req, async (call) => {
    calls.push(call);
    return { refuse: { error: { code: -32600, message: 'resolved' }, refused: 'no-endpoint' } };
  });
  return { answer: result, id: rpc.id, calls };
}

/** The answer as a JSON-RPC response, and why it was refused (the route shows that as an HTTP status). */
function json(a: Answered): { refused: string | undefined; body: any } {
  assert.ok(!('stream' in a.answer), 'a JSON answer');
  const { refused, retryAfterS: _r, ...rest } = a.answer as { refused?: string; retryAfterS?: number };
  return { refused, body: { jsonrpc: '2.0', id: a.id, ...rest } };
}

const message = { messageId: 'm-1', role: 'ROLE_USER', parts: [{ text: 'hi' }] };

describe('RPC core, before any work', () => {
  test('unparseable JSON is -32700 with a null id', async () => {
    const a = await answer('{"jsonrpc":"2.0",');
    const { refused, body } = json(a);
    assert.equal(refused, undefined);
    const { calls } = a;
    assert.equal(body.id, null);
    assert.equal(body.error.code, -32700);
    assert.equal(calls.length, 0);
  });

  test('a bad envelope is -32600 and echoes a readable id', async () => {
    const { body } = json(await answer({ jsonrpc: '1.0', id: 7, method: 'GetTask' }));
    assert.deepEqual([body.id, body.error.code], [7, -32600]);
    const scalarParams = json(await answer({ jsonrpc: '2.0', id: 'x', method: 'GetTask', params: 3 })).body;
    assert.deepEqual([scalarParams.id, scalarParams.error.code], ['x', -32600]);
  });

  test('an unknown method is -32601', async () => {
    // tasks/send is a method since the 0.1 dialect (dialects/v01.ts); no dialect has this one.
    const { body } = json(await answer({ jsonrpc: '2.0', id: 1, method: 'tasks/frobnicate', params: {} }));
    assert.equal(body.error.code, -32601);
    assert.match(body.error.message, /tasks\/frobnicate/);
  });

  test('bad params are -32602 naming the field, in each dialect its own way', async () => {
    const v1 = json(await answer({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { ...message, parts: [] } } })).body;
    assert.equal(v1.error.code, -32602);
    const badRequest = v1.error.data.find((d: { '@type': string }) => d['@type'] === 'type.googleapis.com/google.rpc.BadRequest');
    assert.deepEqual(badRequest.fieldViolations.map((v: { field: string }) => v.field), ['message.parts']);

    const legacy = json(await answer({ jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: '' } })).body;
    assert.equal(legacy.error.code, -32602);
    assert.deepEqual(legacy.error.data.map((v: { field: string }) => v.field), ['id']);
  });

  test('U+0000 anywhere in params is refused before anything stores it', async () => {
    const a = await answer({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'a\u0000b' } });
    const { calls } = a;
    assert.equal(json(a).body.error.code, -32602);
    assert.match(json(a).body.error.message, /U\+0000/);
    assert.equal(calls.length, 0);
  });

  test('an A2A-Version it does not speak is -32009; 1.0 and 0.3 (with patch levels) are spoken', async () => {
    assert.equal(json(await answer({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 't' } }, { version: '2.0' })).body.error.code, -32009);
    for (const version of ['1.0', '0.3', '0.3.0']) {
      const { calls } = await answer({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 't' } }, { version });
      assert.equal(calls.length, 1, version);
    }
  });

  test('a method the role may not call is refused for permission (HTTP 403) naming the roles it needs', async () => {
    const operator: Caller = { ...client, role: 'operator' };
    const a = await answer({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } }, { caller: operator });
    const { calls } = a;
    const { refused, body } = json(a);
    assert.equal(refused, 'permission');
    assert.equal(body.error.code, -32056, 'a JSON-RPC error, on a JSON-RPC endpoint');
    assert.match(body.error.data[0].metadata.requiredRoles, /client/);
    assert.equal(calls.length, 0);
    // Reads are every role's.
    assert.equal((await answer({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 't' } }, { caller: operator })).calls.length, 1);
  });

  test('the extended card is UnsupportedOperation in both dialects', async () => {
    for (const method of ['GetExtendedAgentCard', 'agent/getAuthenticatedExtendedCard']) {
      const { body } = json(await answer({ jsonrpc: '2.0', id: 1, method, params: {} }));
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

  test('a refusal by the resolver is its error, with why it was refused', async () => {
    const { refused, body } = json(await answer({ jsonrpc: '2.0', id: 'r', method: 'GetTask', params: { id: 't' } }));
    assert.equal(refused, 'no-endpoint');
    assert.deepEqual(body, { jsonrpc: '2.0', id: 'r', error: { code: -32600, message: 'resolved' } });
  });
});
