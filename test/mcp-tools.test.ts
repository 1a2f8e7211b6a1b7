// How an A2A task reads as an MCP tool result (src/api/mcp/tools.ts): every part kind, every state, and the arguments check.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readArgs, resultOf } from '../src/api/mcp/tools';
import type { WirePart, WireTask } from '../task/wire';

const task = (state: WireTask['status']['state'], parts: WirePart[], inArtifact = true): WireTask => ({
  id: 't1',
  contextId: 'c1',
  status: { state, ...(inArtifact ? {} : { message: { messageId: 'm', role: 'ROLE_AGENT', parts } }) },
  ...(inArtifact ? { artifacts: [{ artifactId: 'a1', parts }] } : {}),
});

test('text, data and file parts become text, structured content, resource links and embedded resources', () => {
  const r = resultOf(
    task('TASK_STATE_COMPLETED', [
      { text: 'hello' },
      { data: { answer: 42 } },
      { url: 'https://files.example/report.pdf', mediaType: 'application/pdf', filename: 'report.pdf' },
      { raw: Buffer.from('abc').toString('base64'), mediaType: 'text/csv', filename: 'rows.csv' },
      { raw: 'iVBORw0KGgo=', mediaType: 'image/png' },
    ]),
    'agent-1',
    'https://sb.example',
  );
  assert.deepEqual(r.content[0], { type: 'text', text: 'hello' });
  assert.deepEqual(r.structuredContent, { answer: 42 });
  assert.deepEqual(r.content[1], { type: 'resource_link', uri: 'https://files.example/report.pdf', name: 'report.pdf', mimeType: 'application/pdf' });
  assert.deepEqual(r.content[2], { type: 'resource', resource: { uri: 'https://sb.example/tasks/t1/parts/3/rows.csv', mimeType: 'text/csv', blob: 'YWJj' } });
  assert.deepEqual(r.content[3], { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' });
  assert.ok(r.content.some((c) => c.type === 'text' && c.text === '{"answer":42}'), 'data also as text, for clients that read only content');
  assert.deepEqual(r._meta, { taskId: 't1', contextId: 'c1', state: 'TASK_STATE_COMPLETED' });
  assert.equal(r.isError, undefined);
});

test('several data parts are structured content under `data`', () => {
  const r = resultOf(task('TASK_STATE_COMPLETED', [{ data: [1, 2] }, { data: 'x' }]), 'agent-1', 'https://sb.example');
  assert.deepEqual(r.structuredContent, { data: [[1, 2], 'x'] });
});

test('a failed, rejected or canceled task is a tool error; waiting and working tasks say how to go on', () => {
  for (const s of ['TASK_STATE_FAILED', 'TASK_STATE_REJECTED', 'TASK_STATE_CANCELED'] as const) {
    assert.equal(resultOf(task(s, [{ text: 'why' }], false), 'agent-1', '').isError, true, s);
  }
  const waiting = resultOf(task('TASK_STATE_INPUT_REQUIRED', [{ text: 'Which city?' }], false), 'agent-1', '');
  assert.equal(waiting.isError, undefined);
  assert.match(JSON.stringify(waiting.content), /Which city\?/);
  assert.match(JSON.stringify(waiting.content), /call agent-1 again with/);
  const working = resultOf(task('TASK_STATE_WORKING', [], false), 'agent-1', '');
  assert.match(JSON.stringify(working.content), /still working/);
});

test('arguments: a string message is required; contextId, taskId and skill are non-empty strings; nothing else', () => {
  assert.deepEqual(readArgs({ message: 'hi', taskId: 't' }), { message: 'hi', contextId: undefined, taskId: 't', skill: undefined });
  assert.ok('invalid' in readArgs({}));
  assert.ok('invalid' in readArgs({ message: 3 }));
  assert.ok('invalid' in readArgs({ message: 'hi', taskId: '' }));
  assert.ok('invalid' in readArgs({ message: 'hi', extra: 1 }));
  assert.ok('invalid' in readArgs(['hi']));
});
