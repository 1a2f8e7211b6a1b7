// Switchboard's operator console: a static page over the JSON API (GET /agents, /tasks, /accounts,
// /ledger/reconcile, /agents/:id/reputation, /tenants for admins), a task's page (GetTask on POST /a2a: both sides
// of the conversation, the artifacts, why it failed) and its live events (SubscribeToTask, read with fetch and a
// ReadableStream, since EventSource cannot send a key). An operator acts on a task from its page: cancels it
// (CancelTask) or answers it while it waits for input (SendMessage on the task, as its client would); both are in the
// audit trail. `/console#task=<id>` opens one task's page. No framework, no build step. Everything the API returns
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
/** States of a task that has not ended (it can be canceled), and those in which it waits for its client. */
const OPEN = new Set(['submitted', 'working', 'input-required', 'auth-required']);
const WAITING = new Set(['input-required', 'auth-required']);
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

/** A JSON-RPC call on the front door (what an operator may call: the reads, CancelTask, SendMessage on a task). */
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
  openLinkedTask();
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
      const tr = row([pick, state, agentCell(t.agentId), num(t.costMinor), time(t.updatedAt), temporal]);
      tr.dataset.taskId = t.id;
      if (selected === t.id) tr.className = 'selected';
      return tr;
    }),
  );
  if (!tasks.length) body.append(row([{ text: view.state || view.agentId ? 'No tasks match these filters.' : 'No tasks yet.' }]));
}

/** An agent by its name with its id under it: names are unique in a tenant, ids everywhere (and outlive a rename). */
function agentCell(agentId) {
  const cell = el('span');
  const name = agentNames.get(agentId);
  if (name) cell.append(el('span', name), el('br'));
  cell.append(el('span', agentId, 'id'));
  return cell;
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

document.addEventListener('DOMContentLoaded', () => {
  $('login').addEventListener('submit', signIn);
  $('forget').addEventListener('click', () => signOut());
  $('tenant').addEventListener('change', switchTenant);
  $('cancel-task').addEventListener('click', cancelTask);
  $('answer').addEventListener('submit', answerTask);
  $('copy-link').addEventListener('click', copyLink);
  window.addEventListener('hashchange', openLinkedTask);
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
