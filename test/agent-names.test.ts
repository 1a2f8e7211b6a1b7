/**
 * Agent names and URLs, each once in a tenant (issue 46 point 3), on a real gateway with its WebSocket hub, real
 * agents and real hub clients: a name asked for that another agent has, or one that only looks like it (other
 * case, white space, a zero-width space, a Cyrillic or Greek letter), is a 409 naming the holder on every path
 * (POST /agents, a hub enrollment, a hub agent's rename), races included; a URL registered again is a 409 naming
 * the agent registered there; a name taken from a card becomes a free variant ("Echo (2)"); and migration 034 runs
 * on a database whose agents already share names.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { AgentPool, startEchoAgent, type TestAgent } from './agents';
import { agentKey, createTestDb, type Gateway, startGateway } from './helpers/harness';
import { migrate } from '../src/core/db/migrate';

let gw: Gateway;
const agents = new AgentPool();
const sockets: WebSocket[] = [];

before(async () => {
  gw = await startGateway({ hub: { pingMs: 60_000, heartbeatTimeoutMs: 120_000 } });
});

after(async () => {
  for (const ws of sockets) ws.terminate();
  await agents.closeAll();
  await gw?.close();
});

const echo = (): Promise<TestAgent> => agents.add(startEchoAgent());
const post = (body: Record<string, unknown>) => gw.inject({ method: 'POST', url: '/agents', as: 'operator', body });

/** The 409 of a name or URL taken: names the agent that has it, by id in the body and in the message. */
function assertConflict(res: { status: number; json: any }, field: 'name' | 'url', holder: string, what: string): void {
  assert.equal(res.status, 409, `${what}: ${JSON.stringify(res.json)}`);
  assert.equal(res.json.conflict, field, what);
  assert.equal(res.json.agentId, holder, what);
  assert.match(res.json.error, new RegExp(holder), what);
}

/** Agents of tenant default whose name compares equal to `name` (by the database's own key). */
async function holdersOf(name: string): Promise<string[]> {
  const { rows } = await gw.db.pool.query<{ id: string }>(
    "SELECT id FROM agents WHERE tenant = 'default' AND switchboard_agent_name_key(name) = switchboard_agent_name_key($1)",
    [name],
  );
  return rows.map((r) => r.id);
}

type Frame = { id?: number; result?: any; error?: { code: number; message: string } };

/** A hub agent's socket (GET /hub with an agent key or an enrollment token) that makes JSON-RPC calls. */
class HubClient {
  private nextId = 1;
  private readonly waiting = new Map<number, (f: Frame) => void>();
  private constructor(private readonly ws: WebSocket) {
    sockets.push(ws);
    ws.on('message', (data) => {
      const f = JSON.parse(data.toString()) as Frame;
      if (typeof f.id === 'number') this.waiting.get(f.id)?.(f);
    });
  }

  static connect(key: string): Promise<HubClient> {
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/hub`, { headers: { authorization: `Bearer ${key}` } });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new HubClient(ws)));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
      ws.once('error', reject);
    });
  }

  call(method: string, params: unknown): Promise<Frame> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }
}

const card = (name: string) => ({ name, description: 'a hub agent', version: '1.0.0', capabilities: {}, skills: [] });

async function enrollmentToken(uses: number): Promise<string> {
  const res = await gw.inject({ method: 'POST', url: '/tenants/default/enrollment-tokens', as: 'operator', body: { name: 'names test', uses, expiresIn: '1h' } });
  assert.equal(res.status, 201, JSON.stringify(res.json));
  return res.json.token;
}

/** A hub agent registered by the operator, connected with its own agent key. */
async function connectedHubAgent(name: string): Promise<{ id: string; socket: HubClient }> {
  const reg = await post({ url: 'ws-agent://', name });
  assert.equal(reg.status, 201, JSON.stringify(reg.json));
  return { id: reg.json.id, socket: await HubClient.connect(await agentKey(gw, reg.json.id)) };
}

describe('names are unique in a tenant', () => {
  test('a name asked for again is a 409 naming the agent that has it, and no second agent is made', async () => {
    const [first, second] = await Promise.all([echo(), echo()]);
    const held = await post({ url: first.url, name: 'Billing' });
    assert.equal(held.status, 201, JSON.stringify(held.json));
    assertConflict(await post({ url: second.url, name: 'Billing' }), 'name', held.json.id, 'the same name');
    assertConflict(await post({ url: 'ws-agent://', name: 'Billing' }), 'name', held.json.id, 'the same name for a hub agent');
    assert.deepEqual(await holdersOf('Billing'), [held.json.id]);
  });

  test('look-alike names are the same name: white space, case, invisible characters, Cyrillic and Greek letters, fullwidth', async () => {
    const [first, second] = await Promise.all([echo(), echo()]);
    const held = await post({ url: first.url, name: 'Atlas Pay' });
    assert.equal(held.status, 201, JSON.stringify(held.json));
    const alike = {
      'a trailing space': 'Atlas Pay ',
      'a leading tab and a doubled space': '\tAtlas  Pay',
      'lower case': 'atlas pay',
      'upper case': 'ATLAS PAY',
      'a zero-width space': 'At\u200Blas Pay',
      'a soft hyphen and a right-to-left mark': 'Atl\u00ADas\u200F Pay',
      'a Cyrillic А': '\u0410tlas Pay',
      'a Cyrillic а and р': 'Atl\u0430s \u0420ay',
      'a Greek Α': '\u0391tlas Pay',
      'fullwidth letters': '\uFF21tlas \uFF30ay',
      'a no-break space': 'Atlas\u00A0Pay',
    };
    for (const [what, name] of Object.entries(alike)) assertConflict(await post({ url: second.url, name }), 'name', held.json.id, what);
    assert.deepEqual(await holdersOf('atlas pay'), [held.json.id]);
    // A different name is free (the key is not too coarse).
    const other = await post({ url: second.url, name: 'Atlas Payroll' });
    assert.equal(other.status, 201, JSON.stringify(other.json));
    // Nothing visible is no name.
    const blank = await post({ url: (await echo()).url, name: '\u200B\u200D' });
    assert.equal(blank.status, 400, JSON.stringify(blank.json));
    assert.match(blank.json.error, /name/);
  });

  test('an enrolled agent holds its name against the operator, and an operator\'s against an enrollment', async () => {
    const token = await enrollmentToken(2);
    const squatter = await HubClient.connect(token);
    const enrolled = await squatter.call('agent.register', card('Payroll'));
    assert.ok(enrolled.result?.agentId, JSON.stringify(enrolled));
    const agent = await echo();
    assertConflict(await post({ url: agent.url, name: 'Payroll' }), 'name', enrolled.result.agentId, 'the operator after the enrollment');
    assertConflict(await post({ url: agent.url, name: 'payroll ' }), 'name', enrolled.result.agentId, 'a look-alike after the enrollment');

    const mine = await post({ url: agent.url, name: 'Ledger' });
    assert.equal(mine.status, 201, JSON.stringify(mine.json));
    const late = await HubClient.connect(token);
    const refused = await late.call('agent.register', card('L\u0435dger'));
    assert.equal(refused.error?.code, -32602, JSON.stringify(refused));
    assert.match(refused.error!.message, new RegExp(`taken .*${mine.json.id}`));
    assert.deepEqual(await holdersOf('Ledger'), [mine.json.id]);
  });

  test('a hub agent renaming itself races an enrollment of the same name: one holder every time (8 tries)', async () => {
    const token = await enrollmentToken(8);
    for (let i = 0; i < 8; i++) {
      const renaming = await connectedHubAgent(`Hub ${i}`);
      const enrolling = await HubClient.connect(token);
      const [renamed, enrolled] = await Promise.all([
        renaming.socket.call('agent.register', card(`Race ${i}`)),
        enrolling.call('agent.register', card(i % 2 ? `Race ${i}` : `race ${i} `)),
      ]);
      assert.equal([renamed, enrolled].filter((f) => f.result).length, 1, `try ${i}: one of the two takes the name: ${JSON.stringify({ renamed, enrolled })}`);
      const holders = await holdersOf(`Race ${i}`);
      assert.equal(holders.length, 1, `try ${i}: ${JSON.stringify({ renamed, enrolled, holders })}`);
      const winner = renamed.result ? renaming.id : enrolled.result?.agentId;
      assert.equal(holders[0], winner, `try ${i}`);
      const loser = renamed.result ? enrolled : renamed;
      assert.equal(loser.error?.code, -32602, `try ${i}: ${JSON.stringify(loser)}`);
      assert.match(loser.error!.message, new RegExp(`taken .*${winner}`), `try ${i}`);
    }
  });

  test('two operators registering one name at once: one 201 and one 409, every time (8 tries)', async () => {
    for (let i = 0; i < 8; i++) {
      const answers = await Promise.all([post({ url: 'ws-agent://', name: `Twin ${i}` }), post({ url: 'ws-agent://', name: `twin ${i}` })]);
      const made = answers.filter((r) => r.status === 201);
      assert.equal(made.length, 1, `try ${i}: ${JSON.stringify(answers.map((r) => r.json))}`);
      assertConflict(answers.find((r) => r.status !== 201)!, 'name', made[0]!.json.id, `try ${i}`);
      assert.deepEqual(await holdersOf(`Twin ${i}`), [made[0]!.json.id]);
    }
  });

  test('agents whose cards share a name all register: a name not asked for becomes a free variant', async () => {
    const cards = await Promise.all(Array.from({ length: 9 }, () => echo()));
    const first = await post({ url: cards[0]!.url });
    assert.equal(first.status, 201, JSON.stringify(first.json));
    // The rest at once, more of them than a registration has tries: they wait for each other on the name's lock.
    const rest = await Promise.all(cards.slice(1).map((a) => post({ url: a.url })));
    for (const r of rest) assert.equal(r.status, 201, JSON.stringify(r.json));
    const names = [first, ...rest].map((r) => r.json.name as string);
    for (const name of names) assert.match(name, /^Echo( \(\d+\))?$/);
    assert.equal(new Set(names.map((n) => n.toLowerCase())).size, names.length, `distinct names: ${names.join(', ')}`);
    // A name asked for is never varied: it is the caller's claim.
    assertConflict(await post({ url: (await echo()).url, name: names[1]! }), 'name', rest[0]!.json.id, 'a variant asked for');
  });
});

describe('an agent URL is registered once in a tenant', () => {
  test('the same URL again, or written another way, is a 409 naming the agent registered there', async () => {
    const agent = await echo();
    const held = await post({ url: agent.url });
    assert.equal(held.status, 201, JSON.stringify(held.json));
    const port = new URL(agent.url).port;
    const variants = {
      'the same URL': agent.url,
      'a trailing slash': `${agent.url}/`,
      'an upper-case scheme': `HTTP://127.0.0.1:${port}/`,
      'its card URL': `${agent.url}/.well-known/agent-card.json`,
      'its 0.1 card URL': `${agent.url}/.well-known/agent.json`,
      'a fragment': `${agent.url}/#card`,
    };
    for (const [what, url] of Object.entries(variants)) {
      assertConflict(await post({ url }), 'url', held.json.id, what);
      assertConflict(await post({ url, name: `Another name ${what}` }), 'url', held.json.id, `${what}, under another name`);
    }
    // Registered again at once: one agent, however the race goes.
    const racing = await echo();
    const answers = await Promise.all([post({ url: racing.url }), post({ url: `${racing.url}/` }), post({ url: racing.url, name: 'Racer' })]);
    assert.equal(answers.filter((r) => r.status === 201).length, 1, JSON.stringify(answers.map((r) => r.json)));
    const { rows } = await gw.db.pool.query("SELECT id FROM agents WHERE tenant = 'default' AND source_url LIKE $1", [`${racing.url}%`]);
    assert.equal(rows.length, 1);
  });

  test('the URL key: host case, default ports, card paths and trailing slashes fold; paths and queries do not', async () => {
    const key = async (url: string) => (await gw.db.pool.query<{ k: string }>('SELECT switchboard_agent_url_key($1) AS k', [url])).rows[0]!.k;
    assert.equal(await key('https://Agent.Example.COM:443/a/'), 'https://agent.example.com/a');
    assert.equal(await key('HTTP://agent.example.com:80/.well-known/agent-card.json'), 'http://agent.example.com');
    assert.notEqual(await key('https://agent.example.com/a'), await key('https://agent.example.com/A'));
    assert.notEqual(await key('https://agent.example.com/?team=a'), await key('https://agent.example.com/?team=b'));
    assert.notEqual(await key('https://agent.example.com:8443'), await key('https://agent.example.com'));
    // The operator's registration answers before any request to the agent: this URL's host does not exist.
    await gw.db.pool.query(
      `INSERT INTO agents (tenant, id, name, source_url, card_url, card, endpoint_url, protocol_version)
       VALUES ('default', 'fixture-url-1', 'URL fixture', 'https://agent.invalid/', 'https://agent.invalid/.well-known/agent-card.json', '{}', 'https://agent.invalid/rpc', '1.0')`,
    );
    assertConflict(await post({ url: 'https://AGENT.INVALID:443' }), 'url', 'fixture-url-1', 'an upper-case host and its default port');
  });
});

describe('migration 034 on agents that already share names', () => {
  test('the oldest keeps its name, later ones get a free variant, ids and other tenants untouched, and the index holds', async () => {
    const db = await createTestDb();
    try {
      // The database as it was before 034: its index and functions gone, its row in schema_migrations too.
      const { rows: mine } = await db.pool.query<{ version: number }>("SELECT version FROM schema_migrations WHERE name LIKE '%agent_name_and_url_keys%'");
      assert.equal(mine.length, 1);
      await db.pool.query(`DROP INDEX agents_name_key; DROP INDEX agents_url_key;
        DROP FUNCTION switchboard_free_agent_name; DROP FUNCTION switchboard_agent_name_key; DROP FUNCTION switchboard_agent_url_key`);
      await db.pool.query('DELETE FROM schema_migrations WHERE version = $1', [mine[0]!.version]);
      await db.pool.query("INSERT INTO tenants (id, name) VALUES ('other', 'Other') ON CONFLICT DO NOTHING");
      const rows: [string, string, string][] = [
        ['default', 'a1', 'Billing'],
        ['default', 'a2', 'billing '],
        ['default', 'a3', 'Bill\u200Bing'],
        ['default', 'a4', 'Billing (2)'],
        ['default', 'a5', '\u0412illing'],
        ['default', 'a6', 'Echo'],
        ['default', 'a7', 'Echo'],
        ['other', 'b1', 'Billing'],
      ];
      for (const [i, [tenant, id, name]] of rows.entries()) {
        await db.pool.query(
          `INSERT INTO agents (tenant, id, name, source_url, card_url, card, endpoint_url, protocol_version, created_at)
           VALUES ($1, $2, $3, 'http://x', 'http://x/card', '{}', 'http://x/rpc', '1.0', now() - make_interval(mins => $4))`,
          [tenant, id, name, rows.length - i],
        );
      }
      assert.deepEqual(await migrate(db.pool), [mine[0]!.version]);
      const { rows: after } = await db.pool.query<{ tenant: string; id: string; name: string }>('SELECT tenant, id, name FROM agents ORDER BY tenant, id');
      const named = Object.fromEntries(after.map((r) => [`${r.tenant}/${r.id}`, r.name]));
      assert.deepEqual(named, {
        'default/a1': 'Billing',
        'default/a2': 'billing (3)', // "billing (2)" compares equal to a4's "Billing (2)"
        'default/a3': 'Bill\u200Bing (4)',
        'default/a4': 'Billing (2)',
        'default/a5': '\u0412illing (5)',
        'default/a6': 'Echo',
        'default/a7': 'Echo (2)',
        'other/b1': 'Billing',
      });
      await assert.rejects(
        db.pool.query("INSERT INTO agents (tenant, id, name, source_url, card_url, card, endpoint_url, protocol_version) VALUES ('default', 'a8', 'ECHO', 'http://y', 'http://y/card', '{}', 'http://y/rpc', '1.0')"),
        { code: '23505', constraint: 'agents_name_key' },
      );
    } finally {
      await db.drop();
    }
  });
});
