// Switchboard's operator console: a static page over the JSON API (GET /agents, /tasks, /accounts,
// /ledger/reconcile, /agents/:id/reputation, /tenants for admins), a task's page (GetTask on POST /a2a: both sides
// of the conversation, the artifacts, why it failed) and its live events (SubscribeToTask, read with fetch and a
// ReadableStream, since EventSource cannot send a key). No framework, no build step. Everything the API returns
// is written with textContent, never as HTML.
'use strict';

const KEY_ITEM = 'switchboard.key';
/** An admin's tenant (X-Switchboard-Tenant on every call); other keys act in their own. */
const TENANT_ITEM = 'switchboard.tenant';
const REFRESH_MS = 2000;
const PAGE_SIZE = 20;
const STATES = ['submitted', 'working', 'input-required', 'auth-required', 'completed', 'failed', 'canceled', 'rejected'];
/** States whose status message says why the task did not complete. */
const ENDED_BADLY = new Set(['failed', 'rejected', 'canceled']);
const $ = (id) => document.getElementById(id);

let refreshTimer;
let live; // { taskId, aborter }
/** The task list's filters and where it is: the page tokens that led to each page shown so far. */
const view = { state: '', agentId: '', tokens: [''], next: '' };
let selected; // the task shown on the task page
let agentNames = new Map(); // agent id -> name, as of the last refresh

/** An element with text (never HTML) and optional class names. */
function el(tag, text, className) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (className) e.className = className;
  return e;
}

function row(cells) {
  const tr = document.createElement('tr');
  for (const c of cells) {
    const td = document.createElement('td');
    if (c instanceof Node) td.append(c);
    else if (c && typeof c === 'object') {
      td.textContent = String(c.text);
      if (c.className) td.className = c.className;
    } else td.textContent = c === undefined || c === null ? '–' : String(c);
    tr.append(td);
  }
  return tr;
}

const num = (n) => ({ text: n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US'), className: 'num' });
const time = (iso) => (iso ? new Date(iso).toLocaleTimeString() : '–');

function showError(message) {
  $('error').textContent = message;
  $('error').hidden = !message;
}

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(extra = {}) {
  const tenant = sessionStorage.getItem(TENANT_ITEM);
  return { ...extra, authorization: `Bearer ${sessionStorage.getItem(KEY_ITEM)}`, ...(tenant ? { 'x-switchboard-tenant': tenant } : {}) };
}

/** The server's reason in any of its error forms: `{"error": "…"}`, a JSON-RPC error, AIP-193's `{"error": {…}}`. */
const reasonOf = (body, fallback) => (typeof body?.error === 'string' ? body.error : body?.error?.message) || fallback;

async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: headers(init.headers) });
  if (!res.ok) throw new HttpError(res.status, reasonOf(await res.json().catch(() => ({})), `${path}: HTTP ${res.status}`));
  return res.json();
}

/** A JSON-RPC call on the front door (the read methods an operator may call: GetTask). */
async function rpc(method, params) {
  const res = await fetch('/a2a', {
    method: 'POST',
    headers: headers({ 'content-type': 'application/json', 'A2A-Version': '1.0' }),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok || body.error) throw Object.assign(new HttpError(res.status, reasonOf(body, `${method}: HTTP ${res.status}`)), { code: body.error?.code });
  return body.result;
}

// ---- the key and the tenant ----

function signIn(event) {
  event.preventDefault();
  sessionStorage.setItem(KEY_ITEM, $('key').value.trim());
  sessionStorage.removeItem(TENANT_ITEM);
  $('key').value = '';
  start();
}

function signOut(message) {
  clearInterval(refreshTimer);
  stopLive();
  sessionStorage.removeItem(KEY_ITEM);
  sessionStorage.removeItem(TENANT_ITEM);
  selected = undefined;
  $('task').hidden = true;
  $('tenant-pick').hidden = true;
  $('console').hidden = true;
  $('login').hidden = false;
  $('forget').hidden = true;
  showError(message || '');
}

async function start() {
  if (!sessionStorage.getItem(KEY_ITEM)) return signOut();
  $('login').hidden = true;
  $('forget').hidden = false;
  $('console').hidden = false;
  showError('');
  resetPaging();
  clearInterval(refreshTimer);
  await loadTenants();
  refresh();
  refreshTimer = setInterval(refresh, REFRESH_MS);
}

/** An admin key may read every tenant (GET /tenants answers): the page offers them; any other key has one. */
async function loadTenants() {
  let tenants;
  try {
    tenants = (await api('/tenants')).tenants;
  } catch {
    $('tenant-pick').hidden = true;
    return;
  }
  const current = sessionStorage.getItem(TENANT_ITEM) || 'default';
  $('tenant').replaceChildren(
    ...tenants.map((t) => {
      const o = el('option', t.name && t.name !== t.id ? `${t.id} (${t.name})` : t.id);
      o.value = t.id;
      o.selected = t.id === current;
      return o;
    }),
  );
  $('tenant-pick').hidden = false;
}

function switchTenant() {
  sessionStorage.setItem(TENANT_ITEM, $('tenant').value);
  closeTask();
  view.state = '';
  view.agentId = '';
  $('filter-state').value = '';
  $('filter-agent').value = '';
  resetPaging();
  refresh();
}

// ---- the tables, refreshed every REFRESH_MS ----

function resetPaging() {
  view.tokens = [''];
  view.next = '';
}

function tasksPath() {
  const q = new URLSearchParams({ pageSize: String(PAGE_SIZE) });
  if (view.state) q.set('state', view.state);
  if (view.agentId) q.set('agentId', view.agentId);
  const token = view.tokens[view.tokens.length - 1];
  if (token) q.set('pageToken', token);
  return `/tasks?${q}`;
}

let refreshing = false;
let again = false;
async function refresh() {
  // One at a time; asked for meanwhile (a filter changed, a page turned), it runs again at once after.
  if (refreshing) {
    again = true;
    return;
  }
  refreshing = true;
  again = false;
  const tenant = sessionStorage.getItem(TENANT_ITEM);
  try {
    const [agents, tasks, accounts, reconcile] = await Promise.all([api('/agents?pageSize=100'), api(tasksPath()), api('/accounts'), api('/ledger/reconcile')]);
    if (again || tenant !== sessionStorage.getItem(TENANT_ITEM)) return; // read for a view no longer shown
    const reputations = await Promise.all(agents.agents.map((a) => api(`/agents/${encodeURIComponent(a.id)}/reputation`).catch(() => null)));
    agentNames = new Map(agents.agents.map((a) => [a.id, a.name]));
    renderAgents(agents.agents, reputations);
    renderAgentFilter(agents.agents);
    renderTasks(tasks.tasks);
    view.next = tasks.nextPageToken || '';
    renderPaging();
    renderAccounts(accounts.accounts);
    renderReconcile(reconcile);
    if (selected) await refreshTask();
    $('tasks-updated').textContent = `as of ${new Date().toLocaleTimeString()}`;
    showError('');
  } catch (err) {
    if (err.status === 401) return signOut(`The key was refused: ${err.message}`);
    if (err.status === 403) return signOut(`This key cannot open the console (it needs the role operator or admin): ${err.message}`);
    showError(`Could not refresh: ${err.message}`);
  } finally {
    refreshing = false;
    if (again) refresh();
  }
}

function renderAgents(agents, reputations) {
  const body = $('agents').tBodies[0];
  body.replaceChildren(
    ...agents.map((a, i) => {
      const name = el('span');
      name.append(el('strong', a.name), el('br'), el('span', a.id, 'id'));
      const status = el('span', a.status, `status ${a.status}`);
      if (a.statusReason) status.title = a.statusReason;
      const r = reputations[i];
      const reputation = r && r.tasks > 0 ? `${r.successRate === null ? '–' : `${Math.round(r.successRate * 100)}%`} of ${r.tasks} tasks` : 'no tasks yet';
      return row([name, status, reputation, num(a.priceMinor)]);
    }),
  );
  if (!agents.length) body.append(row([{ text: 'No agents registered.' }]));
}

function renderAgentFilter(agents) {
  const select = $('filter-agent');
  const want = [{ id: '', name: 'any' }, ...agents];
  // Rebuilt only when the agents change, so an open drop-down is not reset under the mouse every 2 s.
  const key = want.map((a) => `${a.id}\u0000${a.name}`).join('\u0001');
  if (select.dataset.key === key) return;
  select.dataset.key = key;
  select.replaceChildren(
    ...want.map((a) => {
      const o = el('option', a.id ? `${a.name} (${a.id})` : a.name);
      o.value = a.id;
      o.selected = a.id === view.agentId;
      return o;
    }),
  );
}

function renderTasks(tasks) {
  const body = $('tasks').tBodies[0];
  body.replaceChildren(
    ...tasks.map((t) => {
      const pick = el('button', t.id, 'link id');
      pick.type = 'button';
      pick.title = "Open this task's page";
      pick.addEventListener('click', () => openTask(t.id));
      const state = el('span');
      state.append(el('span', t.state, `state ${t.state}`));
      // Why a task failed, was rejected or canceled, or what it asks: written out, not only in a tooltip.
      if (t.statusMessage && (ENDED_BADLY.has(t.state) || t.state === 'input-required' || t.state === 'auth-required')) {
        state.append(el('span', t.statusMessage, 'reason-inline'));
      }
      let temporal = el('span', t.workflowId, 'id');
      if (t.temporalUiUrl) {
        temporal = el('a', 'workflow', '');
        temporal.href = t.temporalUiUrl;
        temporal.target = '_blank';
        temporal.rel = 'noopener noreferrer';
        temporal.title = t.workflowId;
      }
      const tr = row([pick, state, agentNames.get(t.agentId) || t.agentId, num(t.costMinor), time(t.updatedAt), temporal]);
      tr.dataset.taskId = t.id;
      if (selected === t.id) tr.className = 'selected';
      return tr;
    }),
  );
  if (!tasks.length) body.append(row([{ text: view.state || view.agentId ? 'No tasks match these filters.' : 'No tasks yet.' }]));
}

function renderPaging() {
  $('prev').disabled = view.tokens.length <= 1;
  $('next').disabled = !view.next;
  $('page').textContent = `page ${view.tokens.length}`;
}

function renderAccounts(accounts) {
  $('accounts').tBodies[0].replaceChildren(
    ...accounts.map((a) => row([el('span', a.account, 'id'), num(a.balanceMinor), num(a.heldMinor), num(a.availableMinor)])),
  );
}

function renderReconcile(report) {
  const verdict = $('reconcile-ok');
  verdict.textContent = report.ok ? 'ok: every invariant holds' : 'NOT ok: see the violations below';
  verdict.className = `status ${report.ok ? 'ok' : 'bad'}`;
  $('reconcile-at').textContent = `checked ${time(report.checkedAt)}`;
  $('reconcile').replaceChildren(
    ...report.invariants.map((i) => {
      const li = el('li', `${i.ok ? '✓' : '✗'} ${i.name} (${i.checked} checked${i.ok ? '' : `, ${i.violations.length} violations`})`);
      li.title = i.description;
      if (!i.ok) li.className = 'bad';
      return li;
    }),
  );
}

// ---- a task's page: what it is, the conversation, its artifacts, why it ended as it did ----

function openTask(taskId) {
  selected = taskId;
  $('task').hidden = false;
  $('task-id').textContent = taskId;
  $('task-missing').hidden = true;
  for (const tr of $('tasks').tBodies[0].rows) tr.className = tr.dataset.taskId === taskId ? 'selected' : '';
  $('task').scrollIntoView({ block: 'start' });
  watch(taskId);
  refreshTask().catch((err) => showError(`Could not read task ${taskId}: ${err.message}`));
}

function closeTask() {
  stopLive();
  selected = undefined;
  $('task').hidden = true;
}

/** The task's row (agent, cost, workflow) from GET /tasks and the task itself (history, artifacts) from GetTask. */
async function refreshTask() {
  const taskId = selected;
  const [listed, task] = await Promise.all([
    api(`/tasks?taskId=${encodeURIComponent(taskId)}&pageSize=1`),
    rpc('GetTask', { id: taskId }).catch((err) => {
      if (err.code === -32001) return null; // TaskNotFound: said on the page, not as a refresh error
      throw err;
    }),
  ]);
  if (selected !== taskId) return;
  const summary = listed.tasks[0];
  if (!task) {
    $('task-missing').textContent = `No task ${taskId} in this tenant.`;
    $('task-missing').hidden = false;
    for (const id of ['task-summary', 'conversation', 'artifacts']) $(id).replaceChildren();
    $('task-reason').hidden = true;
    return;
  }
  $('task-missing').hidden = true;
  renderTask(task, summary);
}

function renderTask(task, summary) {
  const state = label(task.status.state);
  const facts = [
    ['State', el('span', state, `state ${state}`)],
    ['Agent', summary ? `${agentNames.get(summary.agentId) || summary.agentId} (${summary.agentId})` : '–'],
    ['Context', el('span', task.contextId, 'id')],
    ['Cost (minor units)', summary && summary.costMinor !== null ? String(summary.costMinor) : '–'],
    ['Created', summary ? new Date(summary.createdAt).toLocaleString() : '–'],
    ['Updated', task.status.timestamp ? new Date(task.status.timestamp).toLocaleString() : '–'],
  ];
  if (summary && summary.temporalUiUrl) {
    const a = el('a', summary.workflowId);
    a.href = summary.temporalUiUrl;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    facts.push(['Workflow', a]);
  } else if (summary) facts.push(['Workflow', el('span', summary.workflowId, 'id')]);
  $('task-summary').replaceChildren(...facts.flatMap(([k, v]) => [el('dt', k), v instanceof Node ? wrap('dd', v) : el('dd', v)]));

  const why = task.status.message ? partsText(task.status.message.parts) : '';
  const reason = $('task-reason');
  reason.hidden = !why || !(ENDED_BADLY.has(state) || state === 'input-required' || state === 'auth-required');
  reason.className = `reason ${state}`;
  $('task-reason-title').textContent = state === 'failed' ? 'Why it failed' : state === 'rejected' ? 'Why it was rejected' : state === 'canceled' ? 'Why it was canceled' : 'What it asks';
  $('task-reason-text').textContent = why;

  // Both sides, in order: the client's messages (ROLE_USER) and the agent's (ROLE_AGENT), as the task's history has them.
  const history = task.history || [];
  $('conversation').replaceChildren(
    ...history.map((m) => {
      const who = m.role === 'ROLE_USER' ? 'client' : 'agent';
      const li = el('li', undefined, `message ${who}`);
      li.append(el('span', who, 'who'), el('span', partsText(m.parts), 'text'));
      return li;
    }),
  );
  if (!history.length) $('conversation').append(el('li', 'No messages recorded.', 'empty'));
  const artifacts = task.artifacts || [];
  $('artifacts').replaceChildren(
    ...artifacts.map((a) => {
      const li = el('li', undefined, 'artifact');
      li.append(el('span', a.name || a.artifactId, 'who'), el('pre', partsText(a.parts), 'text'));
      return li;
    }),
  );
  if (!artifacts.length) $('artifacts').append(el('li', 'No artifacts.', 'empty'));
}

function wrap(tag, child) {
  const e = el(tag);
  e.append(child);
  return e;
}

/** A message's or artifact's parts as text: text as it is, data as JSON, files by name or URL. */
function partsText(parts) {
  return (parts || [])
    .map((p) => {
      if (typeof p.text === 'string') return p.text;
      if (p.data !== undefined) return JSON.stringify(p.data);
      if (p.url || p.raw !== undefined) return `[file ${p.filename || p.url || ''}${p.mediaType ? `, ${p.mediaType}` : ''}]`;
      return '';
    })
    .join('');
}

// ---- one task's live events ----

function stopLive() {
  if (live) live.aborter.abort();
  live = undefined;
}

/**
 * Follows a task's events from the start of its log (Last-Event-ID: 0), so a finished task shows its whole story
 * and a running one keeps growing until its turn ends. Artifact chunks are joined per artifact (append or
 * replace, as A2A says); a retried agent call voids the events of the failed attempt, which are dropped.
 */
async function watch(taskId) {
  stopLive();
  const aborter = new AbortController();
  live = { taskId, aborter };
  $('live-state').textContent = '…';
  $('live-count').textContent = '0';
  $('live-text').textContent = '';
  $('live-events').replaceChildren();

  const chunks = []; // { seq, artifactId, text, append }
  const render = () => {
    const texts = new Map();
    for (const c of chunks) texts.set(c.artifactId, (c.append ? texts.get(c.artifactId) || '' : '') + c.text);
    $('live-text').textContent = [...texts.values()].join('\n');
  };
  const note = (text) => {
    const list = $('live-events');
    list.append(el('li', text));
    list.scrollTop = list.scrollHeight;
  };
  let count = 0;
  const onEvent = (seq, data) => {
    if (live?.aborter !== aborter) return;
    $('live-count').textContent = String(++count);
    if (data.error) return note(`error ${data.error.code}: ${data.error.message}`);
    const r = data.result || {};
    if (r.task) {
      $('live-state').textContent = label(r.task.status.state);
      for (const a of r.task.artifacts || []) chunks.push({ seq, artifactId: a.artifactId, text: partsText(a.parts), append: false });
      note(`#${seq} task ${label(r.task.status.state)}`);
    } else if (r.statusUpdate) {
      const u = r.statusUpdate;
      const voided = u.metadata && u.metadata.switchboard && u.metadata.switchboard.void;
      if (voided) {
        for (let i = chunks.length - 1; i >= 0; i--) if (chunks[i].seq >= voided.fromSeq && chunks[i].seq <= voided.toSeq) chunks.splice(i, 1);
        note(`#${seq} attempt ${voided.attempt} voided (events ${voided.fromSeq}–${voided.toSeq}): the agent is asked again`);
      } else {
        const message = u.status.message ? partsText(u.status.message.parts) : '';
        note(`#${seq} ${label(u.status.state)}${message ? `: ${message}` : ''}`);
      }
      $('live-state').textContent = label(u.status.state);
    } else if (r.artifactUpdate) {
      const u = r.artifactUpdate;
      chunks.push({ seq, artifactId: u.artifact.artifactId, text: partsText(u.artifact.parts), append: Boolean(u.append) });
      note(`#${seq} chunk${u.lastChunk ? ' (last)' : ''}`);
    }
    render();
  };

  try {
    const res = await fetch('/a2a', {
      method: 'POST',
      signal: aborter.signal,
      headers: headers({ 'content-type': 'application/json', accept: 'text/event-stream', 'A2A-Version': '1.0', 'Last-Event-ID': '0' }),
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: taskId } }),
    });
    if (!(res.headers.get('content-type') || '').startsWith('text/event-stream')) {
      const body = await res.json().catch(() => ({}));
      return onEvent('–', body.error ? body : { error: { code: res.status, message: reasonOf(body, `HTTP ${res.status}`) } });
    }
    await readSse(res.body, onEvent);
    if (live?.aborter === aborter) note('stream ended');
  } catch (err) {
    if (err.name !== 'AbortError') note(`stream failed: ${err.message}`);
  }
}

/** Calls onEvent(id, data) for each `data:` event of a text/event-stream body (comments are skipped). */
async function readSse(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id = '';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('id:')) id = line.slice(3).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length) onEvent(Number(id), JSON.parse(data.join('\n')));
    }
  }
}

const label = (state) => String(state || '').replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-');

document.addEventListener('DOMContentLoaded', () => {
  $('login').addEventListener('submit', signIn);
  $('forget').addEventListener('click', () => signOut());
  $('tenant').addEventListener('change', switchTenant);
  $('filter-state').append(
    ...STATES.map((s) => {
      const o = el('option', s);
      o.value = s;
      return o;
    }),
  );
  const refilter = () => {
    view.state = $('filter-state').value;
    view.agentId = $('filter-agent').value;
    resetPaging();
    refresh();
  };
  $('filter-state').addEventListener('change', refilter);
  $('filter-agent').addEventListener('change', refilter);
  $('filters').addEventListener('submit', (event) => {
    event.preventDefault();
    const id = $('find-id').value.trim();
    if (id) openTask(id);
  });
  $('next').addEventListener('click', () => {
    if (!view.next) return;
    view.tokens.push(view.next);
    refresh();
  });
  $('prev').addEventListener('click', () => {
    if (view.tokens.length > 1) view.tokens.pop();
    refresh();
  });
  start();
});
