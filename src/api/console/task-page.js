// The console's task page (loaded before console.js, whose globals it shares: $, el, api, rpc, selected, live):
// one task's summary, both sides of its conversation, its artifacts, why it ended as it did, its live events, its
// own address (/console#task=<id>) and an operator's actions on it (cancel; answer while it waits for input).
'use strict';

// ---- a task's own address: /console#task=<id> ----

const linkedTaskId = () => new URLSearchParams(location.hash.slice(1)).get('task') || '';
const taskLink = (taskId) => `${location.origin}${location.pathname}#${new URLSearchParams({ task: taskId })}`;

/** Opens the task the address names, if it names one other than the task shown. */
function openLinkedTask() {
  const taskId = linkedTaskId();
  if (taskId && taskId !== selected && sessionStorage.getItem(KEY_ITEM)) openTask(taskId);
}

/** Copies the task's link; where the browser refuses (no clipboard outside https or localhost), says where it is. */
async function copyLink() {
  const link = taskLink(selected);
  try {
    await navigator.clipboard.writeText(link);
    say(`Copied: ${link}`);
  } catch {
    say(`Copy this link: ${link}`);
  }
}

// ---- a task's page: what it is, the conversation, its artifacts, why it ended as it did ----

function openTask(taskId) {
  selected = taskId;
  $('task').hidden = false;
  $('task-id').textContent = taskId;
  $('task-link').href = taskLink(taskId);
  if (linkedTaskId() !== taskId) history.replaceState(null, '', `#${new URLSearchParams({ task: taskId })}`);
  say('');
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
  if (location.hash) history.replaceState(null, '', location.pathname);
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
    $('cancel-task').hidden = true;
    $('answer').hidden = true;
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
  // What an operator can do now: cancel a task that has not ended; answer one that waits for input.
  $('cancel-task').hidden = !OPEN.has(state);
  $('answer').hidden = !WAITING.has(state);
  $('answer').dataset.contextId = task.contextId;

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
      // What a canceled task streamed before the cancel is kept, and shown as partial work (GetTask marks it).
      const partial = a.metadata && a.metadata.switchboard && a.metadata.switchboard.streamedBeforeCancel;
      const li = el('li', undefined, partial ? 'artifact partial' : 'artifact');
      li.append(el('span', a.name || a.artifactId, 'who'), el('pre', partsText(a.parts), 'text'));
      if (partial) li.append(el('span', 'streamed before the cancel: partial', 'note'));
      return li;
    }),
  );
  if (!artifacts.length) $('artifacts').append(el('li', 'No artifacts.', 'empty'));
}

// ---- an operator's actions on the task shown ----

/** The outcome of an action, under the task's title (empty: hidden). */
function say(text, bad = false) {
  $('action-result').textContent = text;
  $('action-result').className = bad ? 'bad' : '';
  $('action-result').hidden = !text;
}

async function cancelTask() {
  const taskId = selected;
  if (!taskId || !confirm(`Cancel task ${taskId}? The agent is told to stop.`)) return;
  $('cancel-task').disabled = true;
  try {
    const task = await rpc('CancelTask', { id: taskId });
    say(`Cancel asked: the task is ${label(task.status.state)}.`);
  } catch (err) {
    say(`The task was not canceled: ${err.message}`, true);
  } finally {
    $('cancel-task').disabled = false;
  }
  if (selected === taskId) await refreshTask().catch(() => undefined);
}

/** Answers the task as its client would: the next message of the same task (and context); the turn runs on its own. */
async function answerTask(event) {
  event.preventDefault();
  const taskId = selected;
  const text = $('answer-text').value.trim();
  if (!taskId || !text) return;
  const message = { messageId: newId(), role: 'ROLE_USER', taskId, contextId: $('answer').dataset.contextId, parts: [{ text }] };
  $('answer').querySelector('button').disabled = true;
  try {
    const result = await rpc('SendMessage', { message, configuration: { returnImmediately: true } });
    $('answer-text').value = '';
    const state = result.task ? label(result.task.status.state) : 'answered';
    say(`Answer sent: the task is ${state}.`);
  } catch (err) {
    say(`The answer was not sent: ${err.message}`, true);
  } finally {
    $('answer').querySelector('button').disabled = false;
  }
  if (selected === taskId) {
    watch(taskId);
    await refreshTask().catch(() => undefined);
  }
}

/** A message id: randomUUID where the page is a secure context, else 128 random bits in its form. */
function newId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
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

