/**
 * GET /openapi.json: a valid OpenAPI 3 document that describes every route the app has (a route added without a
 * schema, summary and tag fails here), says how each is secured, and whose request schemas say what the routes
 * really accept and refuse. Against a real gateway (Temporal dev server, PostgreSQL, an A2A agent), reached through
 * Fastify's inject: these are calls to Switchboard's own routes, which need no socket.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import SwaggerParser from '@apidevtools/swagger-parser';
import { AgentPool, startEchoAgent } from './agents';
import { type Gateway, startGateway } from './helpers/harness';
import { TAGS } from '../src/api/routes/openapi';

let gw: Gateway;
const agents = new AgentPool();
let doc: any;

type Operation = {
  summary?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; schema: Record<string, any> }[];
  requestBody?: { content: Record<string, { schema: Record<string, any> }> };
};
const operation = (method: string, path: string): Operation | undefined => doc.paths[path]?.[method.toLowerCase()];
/** Fastify's `/agents/:id` is OpenAPI's `/agents/{id}`. */
const openApiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, '{*}');

const call = (method: string, path: string, body?: unknown) => gw.inject({ method, url: path, body, as: 'admin' });

before(async () => {
  gw = await startGateway({ hub: {}, listen: false }); // GET /hub is described too
  const res = await gw.inject({ url: '/openapi.json', as: 'none' }); // no credentials: the document is public
  assert.equal(res.status, 200);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  doc = res.json;
});

after(async () => {
  await gw?.close();
  await agents.closeAll();
});

describe('GET /openapi.json', () => {
  test('is a valid OpenAPI 3 document', async () => {
    assert.match(doc.openapi, /^3\.1\./);
    assert.equal(doc.info.title, 'Switchboard');
    // The validator checks the whole document against the OpenAPI 3.1 schema (it dereferences a copy).
    await SwaggerParser.validate(structuredClone(doc));
  });

  test('every route of the app is described (summary, a known tag), and every described operation is a route', () => {
    const known = new Set<string>(TAGS.map((t) => t.name));
    assert.deepEqual(doc.tags.map((t: { name: string }) => t.name).sort(), [...known].sort());
    const routes = gw.app.accessTable.map((r) => `${r.method} ${openApiPath(r.url)}`).sort();
    const described: string[] = [];
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
      for (const method of Object.keys(item)) described.push(`${method.toUpperCase()} ${path}`);
    }
    assert.deepEqual(described.sort(), routes, 'a route without a description, or a description without a route');
    for (const r of gw.app.accessTable) {
      const op = operation(r.method, openApiPath(r.url))!;
      assert.ok(op.summary, `${r.method} ${r.url} has no summary: give the route a schema`);
      assert.ok(op.tags?.length && op.tags.every((t) => known.has(t)), `${r.method} ${r.url} needs a tag of ${[...known]}, has ${op.tags}`);
      for (const name of [...r.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1])) {
        assert.ok(op.parameters?.some((p) => p.in === 'path' && p.name === name), `${r.method} ${r.url} documents its path parameter ${name}`);
      }
    }
  });

  test('security: bearer and X-API-Key for every route with roles, none for the public ones', () => {
    assert.deepEqual(doc.components.securitySchemes.bearer, { type: 'http', scheme: 'bearer', description: doc.components.securitySchemes.bearer.description });
    assert.equal(doc.components.securitySchemes.apiKey.type, 'apiKey');
    assert.equal(doc.components.securitySchemes.apiKey.in, 'header');
    assert.equal(doc.components.securitySchemes.apiKey.name, 'X-API-Key');
    for (const r of gw.app.accessTable) {
      const op = operation(r.method, openApiPath(r.url))!;
      if ('public' in r.access) {
        assert.deepEqual(op.security, [], `${r.method} ${r.url} is public`);
      } else {
        assert.deepEqual(op.security, [{ bearer: [] }, { apiKey: [] }], `${r.method} ${r.url} needs credentials`);
        for (const role of r.access.roles) assert.match((op as { description: string }).description, new RegExp(`\\b${role}\\b`));
      }
    }
    assert.deepEqual(operation('GET', '/openapi.json')!.security, []);
  });

  test('POST /agents: a body of the documented required fields is accepted; without one, or out of its documented shape, 400 naming it', async () => {
    const schema = operation('POST', '/agents')!.requestBody!.content['application/json'].schema;
    assert.deepEqual(schema.required, ['url']);
    assert.equal(schema.properties.url.format, 'uri');
    assert.equal(schema.properties.priceMinor.type, 'integer');

    const missing = await call('POST', '/agents', {});
    assert.equal(missing.status, 400);
    assert.match(missing.json.error, /^Invalid registration: .*url/s);
    assert.equal((await call('POST', '/agents', { url: 'not a url' })).status, 400);
    const priced = await call('POST', '/agents', { url: 'http://127.0.0.1:1', priceMinor: 1.5 });
    assert.equal(priced.status, 400);
    assert.match(priced.json.error, /priceMinor/);

    const echo = await agents.add(startEchoAgent());
    const created = await call('POST', '/agents', { url: echo.url });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    // The response is not reshaped by the documentation: every field of the agent view is there.
    for (const field of ['id', 'name', 'url', 'status', 'gateway', 'card', 'credentials']) assert.ok(field in created.json, field);
  });

  test('every documented JSON body: its required fields are required and, where closed, undocumented fields refused, with the route\'s own 400', async () => {
    const sample: Record<string, string> = { id: 'default', keyId: 'key_none', account: 'requester:default' };
    let checked = 0;
    for (const r of gw.app.accessTable) {
      const op = operation(r.method, openApiPath(r.url))!;
      const schema = op.requestBody?.content['application/json']?.schema;
      if (!schema || op.tags?.includes('a2a')) continue; // JSON-RPC answers envelopes, tested elsewhere
      const path = r.url.replace(/:([A-Za-z0-9_]+)/g, (_m, name: string) => (r.url.startsWith('/agents') ? 'no-such-agent' : sample[name]));
      if (schema.required?.length) {
        const res = await call(r.method, path, {});
        assert.equal(res.status, 400, `${r.method} ${r.url} with {}`);
        for (const field of schema.required) assert.match(res.json.error, new RegExp(field), `${r.method} ${r.url} names missing ${field}`);
        checked++;
      }
      if (schema.additionalProperties === false) {
        const res = await call(r.method, path, { undocumentedField: 1 });
        assert.equal(res.status, 400, `${r.method} ${r.url} refuses an undocumented field`);
        assert.match(res.json.error, /undocumentedField/);
      }
    }
    assert.ok(checked >= 5, `checked ${checked} bodies`);
  });

  test('an error Fastify answers itself keeps Fastify\'s body on a documented route (the docs do not reshape it)', async () => {
    const res = await gw.inject({ method: 'POST', url: '/agents', as: 'admin', headers: { 'content-type': 'application/json' }, body: '{"url": ' });
    assert.equal(res.status, 400);
    const body = res.json as Record<string, unknown>;
    assert.deepEqual(Object.keys(body), ['statusCode', 'code', 'error', 'message']);
    assert.deepEqual({ ...body, message: undefined }, { statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY', error: 'Bad Request', message: undefined });
    assert.match(String(body.message), /JSON/);
  });

  test('GET /agents query: the documented bounds are the enforced ones, and an undocumented parameter is refused', async () => {
    const pageSize = operation('GET', '/agents')!.parameters!.find((p) => p.in === 'query' && p.name === 'pageSize')!.schema;
    assert.equal((await call('GET', `/agents?pageSize=${pageSize.maximum}`)).status, 200);
    const over = await call('GET', `/agents?pageSize=${pageSize.maximum + 1}`);
    assert.equal(over.status, 400);
    assert.match(over.json.error, /^Invalid query: .*pageSize/s);
    assert.equal((await call('GET', `/agents?pageSize=${pageSize.minimum - 1}`)).status, 400);
    assert.equal((await call('GET', '/agents?pages=2')).status, 400);
  });
});
