/**
 * The operator console (GET /console) in a real browser: Debian's Chromium, headless, driven by puppeteer-core,
 * against a gateway on real Temporal and PostgreSQL with @a2a-js/sdk agents and clients. The assertions are what a
 * person would see: the agent with its status and price, a task that appears as completed with its agent and
 * cost, a streaming task whose text grows on screen while it works, the accounts and the reconcile verdict; the
 * task list filtered by state and agent and paged, a task found by its id, a task's page with both sides of the
 * conversation, its artifacts and why it failed, and an admin switching tenants.
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
import { AgentPool, chunkedText, startAskingAgent, startChunkyAgent, startEchoAgent, startSlowAgent } from './agents';
import { startFaultyAgent } from './agents/faulty';
import { type Gateway, clientFactory, register, rpc, startGateway } from './helpers/harness';
import { CONSOLE_CSP } from '../src/api/routes/console';

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
/** The first tasks the page shows (an echo and a streamed one), for the checks of GET /tasks at the end. */
let echoTaskId: string;
let streamedTaskId: string;

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
  document: { querySelector(selector: string): { textContent: string | null } | null; querySelectorAll(selector: string): { length: number } };
  sessionStorage: { getItem(key: string): string | null };
}

/** What the console should come to show in an element: exactly a text, or some texts in it. */
type Want = { equals: string } | { includes: string[] };

/**
 * Clicks a button through the DOM, as its click handler sees a person's click: a coordinate click can land on the
 * row that the task list's refresh moved under it (the list refreshes on its own under a loaded machine).
 */
async function press(page: Page, selector: string): Promise<void> {
  await page.$eval(selector, (e) => (e as unknown as { click(): void }).click());
}

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
    echoTaskId = task.id;
    const row = `#tasks tr[data-task-id="${task.id}"]`;
    await shows(page, row, { includes: ['completed'] }, 'the completed task');
    const [id, state, agent, cost] = await cellTexts(page, row);
    assert.deepEqual([id, state, agent, cost], [task.id, 'completed', `Echo${echoId}`, '3'], 'the agent by its name, its id under it');
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
    streamedTaskId = taskId;
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

  test('the task list filters by state and by agent, and pages 20 at a time', async () => {
    // 21 more tasks of the echo agent: with the two before, two pages of 20 and a third of 3.
    let newest = '';
    for (let i = 0; i < 21; i++) newest = (await sendTo(echoId, `page filler ${i}`, gw.keys.client)).id;
    await page.select('#filter-agent', echoId);
    await shows(page, '#page', { equals: 'page 1' }, 'the first page');
    // The first page as rendered after the filter and the fillers (an earlier refresh's list may still be shown).
    await page.waitForFunction(
      (id: string) => {
        const d = (globalThis as unknown as Browserish).document;
        return d.querySelector('#next:not([disabled])') !== null && d.querySelector(`#tasks tr[data-task-id="${id}"]`) !== null && d.querySelectorAll('#tasks tr[data-task-id]').length === 20;
      },
      SEEN,
      newest,
    );
    const first = await taskIdsShown(page);
    assert.equal(first.length, 20);
    await press(page, '#next');
    await shows(page, '#page', { equals: 'page 2' }, 'the second page');
    await page.waitForFunction((ids: string[]) => ![...(globalThis as any).document.querySelectorAll('#tasks tr[data-task-id]')].some((tr: any) => ids.includes(tr.dataset.taskId)), SEEN, first);
    const second = await taskIdsShown(page);
    assert.ok(second.length >= 2 && second.length <= 20, `page 2: ${second.length}`);
    await press(page, '#prev');
    await shows(page, '#page', { equals: 'page 1' }, 'back on the first page');
    // Every row of an agent's filter is that agent's; the state filter shows only that state.
    const agents = await page.$$eval('#tasks tbody tr[data-task-id] td:nth-child(3)', (tds) => [...new Set(tds.map((td) => td.textContent))]);
    assert.deepEqual(agents, [`Echo${echoId}`]);
    await page.select('#filter-agent', '');
    await page.select('#filter-state', 'working');
    await shows(page, '#tasks tbody', { equals: 'No tasks match these filters.' }, 'no working task');
    await page.select('#filter-state', '');
  });

  test("a task found by its id: its page shows both sides of the conversation, the artifacts and, when it failed, why", async () => {
    const asker = await agents.add(startAskingAgent());
    const askerId = (await register(gw, asker.url)).id;
    const asked = await sendTo(askerId, 'hi there', gw.keys.client);
    assert.equal(asked.status.state, 'TASK_STATE_INPUT_REQUIRED');
    const answered = await sendTo(askerId, 'Ada Lovelace', gw.keys.client, asked.id);
    assert.equal(answered.status.state, 'TASK_STATE_COMPLETED');

    await page.type('#find-id', asked.id);
    await press(page, '#find');
    await shows(page, '#task-id', { equals: asked.id }, 'the task page');
    const conversation = await shows(page, '#conversation', { includes: ['hi there', 'What is your name?', 'Ada Lovelace'] }, 'both sides of the conversation');
    const turns = await page.$$eval('#conversation li', (lis) => lis.map((li) => [li.querySelector('.who')?.textContent, li.querySelector('.text')?.textContent]));
    const said = turns.filter(([, text]) => ['hi there', 'What is your name?', 'Ada Lovelace'].includes(text ?? ''));
    assert.deepEqual(said, [['client', 'hi there'], ['agent', 'What is your name?'], ['client', 'Ada Lovelace']], conversation);
    await shows(page, '#artifacts', { includes: ['Hello, Ada Lovelace!'] }, 'the artifact');
    await shows(page, '#task-summary', { includes: ['completed', 'Asker'] }, "the task's state and agent");
    assert.equal(await page.$eval('#task-reason', (e) => (e as unknown as { hidden: boolean }).hidden), true, 'no reason for a completed task');

    const faulty = await agents.add(startFaultyAgent({ mode: 'invalid-json', times: 10 }));
    const faultyId = (await register(gw, faulty.url, { name: 'Broken' })).id;
    const failed = await sendTo(faultyId, 'will fail', gw.keys.client);
    assert.equal(failed.status.state, 'TASK_STATE_FAILED');
    // In the list, the reason is written under the state, not only a tooltip.
    await shows(page, `#tasks tr[data-task-id="${failed.id}"]`, { includes: ['failed', 'The agent could not complete the task'] }, 'the reason in the list');
    await page.$eval('#find-id', (e) => ((e as unknown as { value: string }).value = ''));
    await page.type('#find-id', failed.id);
    await press(page, '#find');
    await shows(page, '#task-reason', { includes: ['Why it failed', 'The agent could not complete the task'] }, 'why it failed');
    assert.equal(await page.$eval('#task-reason', (e) => (e as unknown as { hidden: boolean }).hidden), false);
    await shows(page, '#conversation', { includes: ['will fail'] }, "the client's message");
    await page.screenshot({ path: join(OUTPUT, 'console-task.png'), fullPage: true });

    await page.$eval('#find-id', (e) => ((e as unknown as { value: string }).value = ''));
    await page.type('#find-id', 'no-such-task');
    await press(page, '#find');
    await shows(page, '#task-missing', { equals: 'No task no-such-task in this tenant.' }, 'a task that is not there');
  });

  test("an operator acts from a task's page: its link opens it, an answer continues it, a cancel ends it at the agent (a streamed part kept); audited", async () => {
    const asker = await agents.add(startAskingAgent());
    const askerId = (await register(gw, asker.url)).id;
    const asked = await sendTo(askerId, 'who is it?', gw.keys.client);
    assert.equal(asked.status.state, 'TASK_STATE_INPUT_REQUIRED');

    // The task's own address opens its page (the key is this tab's).
    await page.goto(`${gw.url}/console#task=${encodeURIComponent(asked.id)}`);
    await shows(page, '#task-id', { equals: asked.id }, 'the linked task');
    await shows(page, '#task-reason', { includes: ['What it asks', 'What is your name?'] }, 'what the task asks');
    assert.equal(await page.$eval('#answer', (e) => (e as unknown as { hidden: boolean }).hidden), false, 'the answer form is shown');
    assert.equal(await page.$eval('#task-link', (e) => (e as unknown as { href: string }).href), `${gw.url}/console#task=${asked.id}`);
    await page.click('#copy-link');
    await shows(page, '#action-result', { includes: [`${gw.url}/console#task=${asked.id}`] }, 'the link, copied or to copy');
    // The agent's id is written under its name in the list.
    await shows(page, `#tasks tr[data-task-id="${asked.id}"]`, { includes: ['Asker', askerId] }, "the task's agent by name and id");

    await page.type('#answer-text', 'Grace Hopper');
    await page.click('#answer button[type=submit]');
    await shows(page, '#action-result', { includes: ['Answer sent'] }, 'the answer sent');
    await shows(page, '#artifacts', { includes: ['Hello, Grace Hopper!'] }, "the agent's answer to the operator's message");
    await shows(page, '#task-summary', { includes: ['completed'] }, 'the task completed');
    const continued = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: asked.id } }, { authorization: `Bearer ${gw.keys.client}`, 'A2A-Version': '1.0' });
    assert.equal(continued.json.result.status.state, 'TASK_STATE_COMPLETED', 'the same task, continued');

    const slow = await agents.add(startSlowAgent());
    const slowId = (await register(gw, slow.url)).id;
    const started = await rpc(
      `${gw.url}/agents/${slowId}/a2a`,
      { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'take all day' }] }, configuration: { returnImmediately: true } } },
      { authorization: `Bearer ${gw.keys.client}`, 'A2A-Version': '1.0' },
    );
    const working = started.json.result.task;
    await page.goto(`${gw.url}/console#task=${encodeURIComponent(working.id)}`);
    await shows(page, '#task-summary', { includes: ['working'] }, 'the slow task working');
    assert.equal(await page.$eval('#answer', (e) => (e as unknown as { hidden: boolean }).hidden), true, 'no answer form for a working task');
    page.once('dialog', (dialog) => void dialog.accept());
    await page.click('#cancel-task');
    await shows(page, '#action-result', { includes: ['Cancel asked'] }, 'the cancel asked');
    await shows(page, '#task-summary', { includes: ['canceled'] }, 'the task canceled');
    assert.ok(slow.calls.some((c) => c.method === 'CancelTask'), `the agent was told: ${JSON.stringify(slow.calls.map((c) => c.method))}`);


    const audit = (await api('/audit?pageSize=50')).json.entries as { action: string; target: string; status: number; role: string }[];
    const actions = audit.filter((e) => e.action.startsWith('task.')).map((e) => ({ action: e.action, target: e.target, status: e.status, role: e.role }));
    assert.deepEqual(actions, [
      { action: 'task.cancel', target: working.id, status: 200, role: 'operator' },
      { action: 'task.answer', target: asked.id, status: 200, role: 'operator' },
    ]);
    // An operator's message never starts a task.
    const refused = await rpc(
      `${gw.url}/agents/${askerId}/a2a`,
      { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'new' }] } } },
      { authorization: `Bearer ${gw.keys.operator}`, 'A2A-Version': '1.0' },
    );
    assert.equal(refused.status, 403, refused.text);
    assert.match(refused.json.error.message, /may answer a task .* but not start one/);

    // A streaming task canceled mid-stream: what it streamed stays on its page, shown as partial.
    let streamGo: () => void = () => undefined;
    const held = new Promise<void>((go) => (streamGo = go));
    const halting = await agents.add(startChunkyAgent({ chunks: 6, gate: (i) => (i < 2 ? Promise.resolve() : held) }));
    const haltingId = (await register(gw, halting.url)).id;
    try {
      const streaming = (await rpc(
        `${gw.url}/agents/${haltingId}/a2a`,
        { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'stream' }] }, configuration: { returnImmediately: true } } },
        { authorization: `Bearer ${gw.keys.client}`, 'A2A-Version': '1.0' },
      )).json.result.task;
      await page.goto(`${gw.url}/console#task=${encodeURIComponent(streaming.id)}`);
      await shows(page, '#live-text', { equals: chunkedText(2) }, 'two chunks streamed');
      page.once('dialog', (dialog) => void dialog.accept());
      await page.click('#cancel-task');
      await shows(page, '#task-summary', { includes: ['canceled'] }, 'the streaming task canceled');
      await shows(page, '#artifacts', { includes: [chunkedText(2), 'streamed before the cancel'] }, 'the partial artifact, marked');
    } finally {
      streamGo();
    }
  });

  test('Forget key clears the key and the data', async () => {
    await page.click('#forget');
    assert.equal(await page.evaluate(() => (globalThis as unknown as Browserish).sessionStorage.getItem('switchboard.key')), null);
    assert.equal(await page.$eval('#console', (e) => (e as unknown as { hidden: boolean }).hidden), true);
    assert.deepEqual(pageErrors, [], 'the page threw no error');
  });

  test("an admin switches tenants: each tenant's tasks, agents and accounts; an operator has no switch", async () => {
    const admin = { authorization: `Bearer ${gw.keys.admin}`, 'content-type': 'application/json' };
    assert.equal((await fetch(`${gw.url}/tenants`, { method: 'POST', headers: admin, body: JSON.stringify({ id: 'second', name: 'Second team' }) })).status, 201);
    const inSecond = { ...admin, 'x-switchboard-tenant': 'second' };
    const echo = await agents.add(startEchoAgent());
    const made = await fetch(`${gw.url}/agents`, { method: 'POST', headers: inSecond, body: JSON.stringify({ url: echo.url, name: 'Second echo' }) });
    assert.equal(made.status, 201);
    const secondAgent = ((await made.json()) as { id: string }).id;
    const theirs = await sendTo(secondAgent, 'in the second tenant', gw.keys.admin, undefined, { 'x-switchboard-tenant': 'second' });
    assert.equal(theirs.status.state, 'TASK_STATE_COMPLETED');

    await page.type('#key', gw.keys.admin);
    await page.click('#login button[type=submit]');
    await shows(page, '#tenant', { includes: ['default', 'second (Second team)'] }, 'the tenants an admin may pick');
    await shows(page, '#agents tbody', { includes: [echoId] }, "tenant default's agents first");
    await page.select('#tenant', 'second');
    await shows(page, '#agents tbody', { includes: ['Second echo'] }, "the second tenant's agents");
    await shows(page, `#tasks tr[data-task-id="${theirs.id}"]`, { includes: ['completed', 'Second echo'] }, "the second tenant's task");
    assert.equal(await page.$$eval('#tasks tbody tr[data-task-id]', (trs) => trs.length), 1, 'only that tenant\'s tasks');
    assert.ok(!(await page.$eval('#agents tbody', (e) => e.textContent ?? '')).includes(echoId), "no agent of tenant default");
    await page.click(`#tasks tr[data-task-id="${theirs.id}"] button`);
    await shows(page, '#conversation', { includes: ['in the second tenant'] }, "the task's page, read in that tenant");
    await page.select('#tenant', 'default');
    await shows(page, '#agents tbody', { includes: [echoId] }, 'back in tenant default');

    // An operator's key has one tenant: no switch.
    await page.click('#forget');
    await page.type('#key', gw.keys.operator);
    await page.click('#login button[type=submit]');
    await shows(page, '#agents tbody', { includes: [echoId] }, 'the operator in its tenant');
    assert.equal(await page.$eval('#tenant-pick', (e) => (e as unknown as { hidden: boolean }).hidden), true);
    assert.deepEqual(pageErrors, [], 'the page threw no error');
  });
});

/** A blocking SendMessage through the agent's JSON-RPC endpoint (a follow-up with `taskId`); the task, as 1.0 JSON. */
async function sendTo(agentId: string, text: string, key: string, taskId?: string, headers: Record<string, string> = {}): Promise<any> {
  const r = await rpc(
    `${gw.url}/agents/${agentId}/a2a`,
    { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(taskId ? { taskId } : {}) } } },
    { authorization: `Bearer ${key}`, 'A2A-Version': '1.0', ...headers },
  );
  assert.ok(r.json?.result?.task, r.text);
  return r.json.result.task;
}

const taskIdsShown = (page: Page) => page.$$eval('#tasks tbody tr[data-task-id]', (trs) => trs.map((tr) => (tr as unknown as { dataset: { taskId: string } }).dataset.taskId));

describe('GET /tasks and GET /accounts: what the console reads', () => {
  test('tasks newest first with agent, state, cost, workflow and Temporal UI link; filters, one by id, and pages', async () => {
    const all = await api('/tasks?pageSize=100');
    assert.equal(all.status, 200);
    const ids = all.json.tasks.map((t: { id: string }) => t.id);
    assert.ok(ids.indexOf(streamedTaskId) < ids.indexOf(echoTaskId), 'newest first');
    const [streamed] = (await api(`/tasks?agentId=${chunkyId}`)).json.tasks;
    assert.equal(streamed.id, streamedTaskId);
    assert.equal(streamed.state, 'completed');
    assert.equal(streamed.costMinor, 0);
    const echoes = (await api(`/tasks?agentId=${echoId}&pageSize=100`)).json.tasks as { id: string; agentId: string }[];
    assert.ok(echoes.length > 20 && echoes.every((t) => t.agentId === echoId));
    const echoed = (await api(`/tasks?taskId=${echoTaskId}`)).json.tasks;
    assert.equal(echoed.length, 1, 'one task by its id');
    assert.equal(echoed[0].agentId, echoId);
    assert.equal(echoed[0].costMinor, 3);
    assert.equal(echoed[0].workflowId, `a2a:default:${echoTaskId}`);
    assert.equal(echoed[0].temporalUiUrl, `${TEMPORAL_UI.url}/namespaces/default/workflows/${encodeURIComponent(echoed[0].workflowId)}`);
    assert.deepEqual((await api('/tasks?taskId=no-such-task')).json.tasks, []);
    assert.equal((await api('/tasks?state=working')).json.tasks.length, 0);
    // Pages of 7 give the same tasks, in the same order, as one page of 100.
    const paged: string[] = [];
    let token = '';
    do {
      const page = await api(`/tasks?agentId=${echoId}&pageSize=7${token ? `&pageToken=${token}` : ''}`);
      paged.push(...page.json.tasks.map((t: { id: string }) => t.id));
      token = page.json.nextPageToken;
    } while (token);
    assert.deepEqual(paged, echoes.map((t) => t.id));
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
