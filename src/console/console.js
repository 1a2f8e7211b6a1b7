// Switchboard's operator console: a static page over the JSON API (GET /agents, /tasks, /accounts,
// /ledger/reconcile, /agents/:id/reputation) and one task's live events (SubscribeToTask on POST /a2a, read with
// fetch and a ReadableStream, since EventSource cannot send a key). No framework, no build step. Everything the
// API returns is written with textContent, never as HTML.
'use strict';

const KEY_ITEM = 'switchboard.key';
const REFRESH_MS = 2000;
const $ = (id) => document.getElementById(id);

let refreshTimer;
let live; // { taskId, aborter }

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

async function api(path, init = {}) {
  const key = sessionStorage.getItem(KEY_ITEM);
  const res = await fetch(path, { ...init, headers: { ...init.headers, authorization: `Bearer ${key}` } });
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    throw new HttpError(res.status, body.error || `${path}: HTTP ${res.status}`);
  }
  return res.json();
}

// ---- the key ----

function signIn(event) {
  event.preventDefault();
  sessionStorage.setItem(KEY_ITEM, $('key').value.trim());
  $('key').value = '';
  start();
}

function signOut(message) {
  clearInterval(refreshTimer);
  stopLive();
  sessionStorage.removeItem(KEY_ITEM);
  $('console').hidden = true;
  $('login').hidden = false;
  $('forget').hidden = true;
  showError(message || '');
}

function start() {
  if (!sessionStorage.getItem(KEY_ITEM)) return signOut();
  $('login').hidden = true;
  $('forget').hidden = false;
  $('console').hidden = false;
  showError('');
  clearInterval(refreshTimer);
  refresh();
  refreshTimer = setInterval(refresh, REFRESH_MS);
}

// ---- the tables, refreshed every REFRESH_MS ----

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    const [agents, tasks, accounts, reconcile] = await Promise.all([
      api('/agents?pageSize=100'),
      api('/tasks?pageSize=20'),
      api('/accounts'),
      api('/ledger/reconcile'),
    ]);
    const reputations = await Promise.all(agents.agents.map((a) => api(`/agents/${encodeURIComponent(a.id)}/reputation`).catch(() => null)));
    renderAgents(agents.agents, reputations);
    renderTasks(tasks.tasks, new Map(agents.agents.map((a) => [a.id, a.name])));
    renderAccounts(accounts.accounts);
    renderReconcile(reconcile);
    $('tasks-updated').textContent = `as of ${new Date().toLocaleTimeString()}`;
    showError('');
  } catch (err) {
    if (err.status === 401) return signOut(`The key was refused: ${err.message}`);
    if (err.status === 403) return signOut(`This key cannot open the console (it needs the role operator or admin): ${err.message}`);
    showError(`Could not refresh: ${err.message}`);
  } finally {
    refreshing = false;
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

function renderTasks(tasks, agentNames) {
  const body = $('tasks').tBodies[0];
  body.replaceChildren(
    ...tasks.map((t) => {
      const pick = el('button', t.id, 'link id');
      pick.type = 'button';
      pick.title = 'Show this task\'s live events';
      pick.addEventListener('click', () => watch(t.id));
      const state = el('span', t.state, `state ${t.state}`);
      if (t.statusMessage) state.title = t.statusMessage;
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
      if (live && live.taskId === t.id) tr.className = 'selected';
      return tr;
    }),
  );
  if (!tasks.length) body.append(row([{ text: 'No tasks yet.' }]));
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
  for (const tr of $('tasks').tBodies[0].rows) tr.className = tr.dataset.taskId === taskId ? 'selected' : '';
  $('live-task').textContent = taskId;
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
      for (const a of r.task.artifacts || []) chunks.push({ seq, artifactId: a.artifactId, text: textOf(a.parts), append: false });
      note(`#${seq} task ${label(r.task.status.state)}`);
    } else if (r.statusUpdate) {
      const u = r.statusUpdate;
      const voided = u.metadata && u.metadata.switchboard && u.metadata.switchboard.void;
      if (voided) {
        for (let i = chunks.length - 1; i >= 0; i--) if (chunks[i].seq >= voided.fromSeq && chunks[i].seq <= voided.toSeq) chunks.splice(i, 1);
        note(`#${seq} attempt ${voided.attempt} voided (events ${voided.fromSeq}–${voided.toSeq}): the agent is asked again`);
      } else {
        const message = u.status.message ? textOf(u.status.message.parts) : '';
        note(`#${seq} ${label(u.status.state)}${message ? `: ${message}` : ''}`);
      }
      $('live-state').textContent = label(u.status.state);
    } else if (r.artifactUpdate) {
      const u = r.artifactUpdate;
      chunks.push({ seq, artifactId: u.artifact.artifactId, text: textOf(u.artifact.parts), append: Boolean(u.append) });
      note(`#${seq} chunk${u.lastChunk ? ' (last)' : ''}`);
    }
    render();
  };

  try {
    const res = await fetch('/a2a', {
      method: 'POST',
      signal: aborter.signal,
      headers: {
        authorization: `Bearer ${sessionStorage.getItem(KEY_ITEM)}`,
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'A2A-Version': '1.0',
        'Last-Event-ID': '0',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: taskId } }),
    });
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${(await res.json().catch(() => ({}))).error || ''}`);
    if (!(res.headers.get('content-type') || '').startsWith('text/event-stream')) {
      const body = await res.json();
      return onEvent('–', body);
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

const textOf = (parts) => (parts || []).map((p) => (typeof p.text === 'string' ? p.text : '')).join('');
const label = (state) => String(state || '').replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-');

document.addEventListener('DOMContentLoaded', () => {
  $('login').addEventListener('submit', signIn);
  $('forget').addEventListener('click', () => signOut());
  start();
});
