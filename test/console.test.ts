/**
 * The operator console (GET /console) in a real browser: Debian's Chromium, headless, driven by puppeteer-core,
 * against a gateway on real Temporal and PostgreSQL with @a2a-js/sdk agents and clients. The assertions are what a
 * person would see: the agent with its status and price, a task that appears as completed with its agent and
 * cost, a streaming task whose text grows on screen while it works, the accounts and the reconcile verdict.
 * A screenshot is saved to test-output/console.png. Also GET /tasks and GET /accounts, the JSON the page reads.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import { AgentPool, chunkedText, startChunkyAgent, startEchoAgent } from './agents';
import { type Gateway, clientFactory, register, startGateway } from './helpers/harness';
import { CONSOLE_CSP } from '../src/routes/console';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const OUTPUT = resolve(__dirname, '..', 'test-output');
const TEMPORAL_UI = { url: 'http://temporal-ui.test:8233', namespace: 'default' };
/** Upper bounds for what the page shows next (it refreshes every 2 s); nothing here asserts on time. */
const SEEN = { timeout: 30_000 };
const CHUNKS = 12;

let gw: Gateway;
const agents = new AgentPool();
let echoId: string;
let chunkyId: string;
let browser: Browser;
let userDataDir: string;

/** The chunky agent sends chunk i only once the test has let `i + 1` chunks go: the test paces the stream. */
let allowed = 0;
const waiting: { i: number; go: () => void }[] = [];
function letGo(n: number) {
  allowed += n;
  for (const w of waiting.splice(0)) if (w.i < allowed) w.go();
  else waiting.push(w);
}
const gate = (i: number) => (i < allowed ? Promise.resolve() : new Promise<void>((go) => waiting.push({ i, go })));

const userMessage = (text: string) => SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });

async function api(path: string, key = gw.keys.operator) {
  const res = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, json: (await res.json()) as any };
}

before(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not at ${CHROMIUM}: the console test drives a real browser. Install it with ` +
        '`apt-get install -y --no-install-recommends chromium` (Debian), or set CHROMIUM_PATH to a Chromium binary.',
    );
  }
  gw = await startGateway({ temporalUi: TEMPORAL_UI });
  const echo = await agents.add(startEchoAgent({ cost: 3 }));
  echoId = (await register(gw, echo.url, { priceMinor: 5 })).id;
  const chunky = await agents.add(startChunkyAgent({ chunks: CHUNKS, gate }));
  chunkyId = (await register(gw, chunky.url)).id;
  const funded = await fetch(`${gw.url}/accounts/requester:default/deposits`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.keys.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ amountMinor: 1000, idempotencyKey: 'console-test' }),
  });
  assert.equal(funded.status, 201);
  userDataDir = mkdtempSync(join(tmpdir(), 'sb-chromium-'));
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir,
    // Without the background-networking flags Chromium phones home at start, which a closed network refuses.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  letGo(CHUNKS); // an agent still waiting at its gate lets its server close
  await browser?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  await gw?.close();
  await agents.closeAll();
});

/** The few browser globals the checks use (this project compiles without the DOM library). */
interface Browserish {
  document: { querySelector(selector: string): { textContent: string | null } | null };
  sessionStorage: { getItem(key: string): string | null };
}

/** What the console should come to show in an element: exactly a text, or some texts in it. */
type Want = { equals: string } | { includes: string[] };

/**
 * The text of the first element matching `selector` once it shows `want`. (The check is data, not code: the page's
 * Content-Security-Policy forbids eval, rightly, so a predicate cannot be built from a string in the page.)
 */
async function shows(page: Page, selector: string, want: Want, what: string): Promise<string> {
  const handle = await page
    .waitForFunction(
      (sel: string, w: Want) => {
        const text = (globalThis as unknown as Browserish).document.querySelector(sel)?.textContent ?? undefined;
        if (text === undefined) return false;
        return ('equals' in w ? text === w.equals : w.includes.every((part) => text.includes(part))) ? text : false;
      },
      SEEN,
      selector,
      want,
    )
    .catch(async (err: Error) => {
      const seen = await page.$eval(selector, (e) => e.textContent).catch(() => '(no such element)');
      throw new Error(`the console never showed ${what} (${selector} ${JSON.stringify(want)}); it shows ${JSON.stringify(seen)}: ${err.message}`);
    });
  return (await handle.jsonValue()) as string;
}

const cellTexts = (page: Page, rowSelector: string) =>
  page.$$eval(`${rowSelector} td`, (tds) => tds.map((td) => td.textContent?.trim() ?? ''));

describe('GET /console in Chromium', () => {
  let page: Page;
  const pageErrors: string[] = [];

  test('the page is static and strict: no data in it, a Content-Security-Policy without inline script', async () => {
    page = await browser.newPage();
    page.on('pageerror', (err) => pageErrors.push(String(err)));
    const res = await page.goto(`${gw.url}/console`);
    assert.equal(res?.status(), 200);
    assert.equal(res?.headers()['content-security-policy'], CONSOLE_CSP);
    assert.match(CONSOLE_CSP, /script-src 'self'(;|$)/);
    assert.equal(await page.$eval('#login', (e) => (e as unknown as { hidden: boolean }).hidden), false, 'the key form is shown');
    assert.equal(await page.$eval('#console', (e) => (e as unknown as { hidden: boolean }).hidden), true, 'nothing is shown before a key');
  });

  test('a client key is refused with a reason a person can act on', async () => {
    await page.type('#key', gw.keys.client);
    await page.click('#login button[type=submit]');
    const error = await shows(page, '#error', { includes: ['role'] }, 'an error');
    assert.match(error, /needs the role operator or admin/);
    assert.equal(await page.$eval('#login', (e) => (e as unknown as { hidden: boolean }).hidden), false, 'back at the key form');
  });

  test('with an operator key: the agents with status, reputation and price', async () => {
    await page.type('#key', gw.keys.operator);
    await page.click('#login button[type=submit]');
    await shows(page, '#agents tbody', { includes: [echoId, chunkyId] }, 'both agents');
    const echoRow = await page.$$eval('#agents tbody tr', (trs, id) => trs.find((tr) => tr.textContent?.includes(id as string))?.innerText ?? '', echoId);
    assert.match(echoRow, /Echo/);
    assert.match(echoRow, /healthy/);
    assert.match(echoRow, /no tasks yet/);
    assert.match(echoRow, /\b5$/, 'its price');
    assert.equal(await page.evaluate(() => (globalThis as unknown as Browserish).sessionStorage.getItem('switchboard.key')), gw.keys.operator, 'the key is kept in this tab only');
  });

  test('a task run by an SDK client appears as completed, with its agent, its cost and a link to its workflow', async () => {
    const client = await clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${echoId}/.well-known/agent-card.json`, '');
    const task = Task.toJSON((await client.sendMessage(userMessage('hello console'))) as Task) as any;
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    const row = `#tasks tr[data-task-id="${task.id}"]`;
    await shows(page, row, { includes: ['completed'] }, 'the completed task');
    const [id, state, agent, cost] = await cellTexts(page, row);
    assert.deepEqual([id, state, agent, cost], [task.id, 'completed', 'Echo', '3']);
    const link = await page.$eval(`${row} a`, (a) => (a as unknown as { href: string }).href);
    assert.equal(link, `${TEMPORAL_UI.url}/namespaces/default/workflows/${encodeURIComponent(`a2a:default:${task.id}`)}`);
    await shows(page, '#agents tbody', { includes: ['100% of 1 tasks'] }, 'the reputation after one completed task');
  });

  test("a streaming task's live text grows on screen as the agent sends it", async () => {
    const client = await clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${chunkyId}/.well-known/agent-card.json`, '');
    const stream = client.sendMessageStream(userMessage('stream for the console'));
    const first = await stream.next();
    const payload = first.done ? undefined : first.value.payload;
    assert.ok(payload?.$case === 'task', `the stream starts with the task: ${JSON.stringify(payload)}`);
    const taskId = payload.value.id;
    const drained = (async () => {
      for await (const e of stream) void e;
    })();

    const row = `#tasks tr[data-task-id="${taskId}"]`;
    await shows(page, row, { includes: [taskId] }, 'the streaming task in the list');
    await page.click(`${row} button`);
    await shows(page, '#live-state', { equals: 'working' }, 'the selected task working');
    assert.equal(await page.$eval('#live-text', (e) => e.textContent), '', 'nothing streamed yet: the agent waits at its gate');

    letGo(3);
    await shows(page, '#live-text', { equals: chunkedText(3) }, 'the first three chunks');
    assert.equal(await page.$eval('#live-state', (e) => e.textContent), 'working', 'shown while the task still works');
    letGo(4);
    await shows(page, '#live-text', { equals: chunkedText(7) }, 'the text grown by four chunks');
    assert.equal(await page.$eval('#live-state', (e) => e.textContent), 'working');
    letGo(CHUNKS);
    await shows(page, '#live-state', { equals: 'completed' }, 'the end of the stream');
    assert.equal(await page.$eval('#live-text', (e) => e.textContent), chunkedText(CHUNKS));
    await drained;
    await shows(page, row, { includes: ['completed'] }, 'the streamed task completed in the list');
  });

  test('the accounts and the reconcile verdict; a screenshot for people', async () => {
    await shows(page, '#accounts tbody', { includes: [`agent:${echoId}`] }, "the agent's account");
    const requester = await cellTexts(page, '#accounts tbody tr:first-child');
    assert.deepEqual(requester, ['requester:default', '997', '0', '997'], 'funded 1000, charged 3');
    const agentRow = await page.$$eval('#accounts tbody tr', (trs, id) => trs.find((tr) => tr.textContent?.includes(`agent:${id}`))?.innerText ?? '', echoId);
    assert.match(agentRow, /\b3\b/);
    await shows(page, '#reconcile-ok', { equals: 'ok: every invariant holds' }, 'the reconcile verdict');
    assert.ok((await page.$$('#reconcile li')).length > 5, 'each invariant is listed');
    mkdirSync(OUTPUT, { recursive: true });
    await page.setViewport({ width: 1200, height: 900 });
    await page.screenshot({ path: join(OUTPUT, 'console.png'), fullPage: true });
    assert.ok(existsSync(join(OUTPUT, 'console.png')));
  });

  test('what the API returns is shown as text, never run as markup', async () => {
    const hostile = '<img src=x onerror="window.pwned=1"><b>bold</b>';
    const echo = await agents.add(startEchoAgent());
    await register(gw, echo.url, { name: hostile });
    await shows(page, '#agents tbody', { includes: [hostile] }, 'the hostile name as text');
    assert.equal(await page.$$eval('#agents tbody img, #agents tbody b', (es) => es.length), 0);
    assert.equal(await page.evaluate(() => (globalThis as unknown as { pwned?: number }).pwned), undefined);
  });

  test('Forget key clears the key and the data', async () => {
    await page.click('#forget');
    assert.equal(await page.evaluate(() => (globalThis as unknown as Browserish).sessionStorage.getItem('switchboard.key')), null);
    assert.equal(await page.$eval('#console', (e) => (e as unknown as { hidden: boolean }).hidden), true);
    assert.deepEqual(pageErrors, [], 'the page threw no error');
  });
});

describe('GET /tasks and GET /accounts: what the console reads', () => {
  test('tasks newest first with agent, state, cost, workflow and Temporal UI link; filters and pages', async () => {
    const all = await api('/tasks');
    assert.equal(all.status, 200);
    const [streamed, echoed] = all.json.tasks;
    assert.equal(streamed.agentId, chunkyId);
    assert.equal(streamed.state, 'completed');
    assert.equal(streamed.costMinor, 0);
    assert.equal(echoed.agentId, echoId);
    assert.equal(echoed.costMinor, 3);
    assert.equal(echoed.workflowId, `a2a:default:${echoed.id}`);
    assert.equal(echoed.temporalUiUrl, `${TEMPORAL_UI.url}/namespaces/default/workflows/${encodeURIComponent(echoed.workflowId)}`);
    assert.deepEqual((await api(`/tasks?agentId=${echoId}`)).json.tasks.map((t: { id: string }) => t.id), [echoed.id]);
    assert.equal((await api('/tasks?state=working')).json.tasks.length, 0);
    const page1 = await api('/tasks?pageSize=1');
    assert.deepEqual(page1.json.tasks.map((t: { id: string }) => t.id), [streamed.id]);
    const page2 = await api(`/tasks?pageSize=1&pageToken=${page1.json.nextPageToken}`);
    assert.deepEqual(page2.json.tasks.map((t: { id: string }) => t.id), [echoed.id]);
    assert.equal(page2.json.nextPageToken, '');
  });

  test('bad parameters are a 400 naming them', async () => {
    for (const [query, named] of [
      ['state=done', /state/],
      ['pageSize=0', /pageSize/],
      ['pageToken=nope', /pageToken/],
      ['states=completed', /states/],
    ] as const) {
      const res = await api(`/tasks?${query}`);
      assert.equal(res.status, 400, query);
      assert.match(res.json.error, named, query);
    }
  });

  test("another tenant's operator sees none of these tasks or accounts", async () => {
    const admin = { authorization: `Bearer ${gw.keys.admin}`, 'content-type': 'application/json' };
    assert.equal((await fetch(`${gw.url}/tenants`, { method: 'POST', headers: admin, body: JSON.stringify({ id: 'other', name: 'Other' }) })).status, 201);
    const made = await fetch(`${gw.url}/tenants/other/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ role: 'operator', name: 'ops' }) });
    const key = ((await made.json()) as { key: string }).key;
    assert.deepEqual((await api('/tasks', key)).json, { tasks: [], nextPageToken: '' });
    assert.deepEqual((await api('/accounts', key)).json, { accounts: [] });
    const ours = (await api('/accounts')).json.accounts.map((a: { account: string }) => a.account);
    assert.deepEqual(ours.slice(0, 1), ['requester:default']);
    assert.ok(ours.includes(`agent:${echoId}`));
  });
});
