// The Temporal SDK's logs through pino (src/core/log.ts temporalLogger): one JSON stream, redacted like the rest, every
// line about a task's workflow carrying its tenant and task id, failures kept with their message and stack.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger, temporalLogger } from '../src/core/log';

function capture() {
  const lines: Record<string, any>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return { log: createLogger('info', sink), lines };
}

test('a line about a task carries its tenant and task id; an error keeps its message, type and stack', () => {
  const { log, lines } = capture();
  temporalLogger(log).warn('Activity failed', { workflowId: 'a2a:team-a:0f3c-task', activityType: 'forwardMessage', error: new TypeError('boom') });
  assert.equal(lines.length, 1);
  const [line] = lines;
  assert.equal(line.level, 40);
  assert.equal(line.msg, 'Activity failed');
  assert.deepEqual([line.tenant, line.taskId, line.activityType], ['team-a', '0f3c-task', 'forwardMessage']);
  assert.equal(line.err.message, 'boom');
  assert.equal(line.err.type, 'TypeError');
  assert.match(line.err.stack, /boom/);
});

test('every SDK level maps to pino, lines of other workflows carry no task id, and credentials are redacted', () => {
  const { log, lines } = capture();
  const sdk = temporalLogger(log);
  sdk.log('ERROR', 'e', { workflowId: 'agent-refresh:default:x' });
  sdk.info('i', { headers: { authorization: 'Bearer sb_secret' } });
  sdk.debug('d'); // below the logger's level
  assert.deepEqual(lines.map((l) => [l.level, l.msg]), [[50, 'e'], [30, 'i']]);
  assert.equal(lines[0].taskId, undefined);
  assert.equal(lines[1].headers.authorization, '[redacted]');
});

/** What a process writes to its stdout (a pipe here) through createLogger with LOG_FORMAT as given. */
function loggedBy(format: string | undefined): string {
  const script = `const { createLogger } = require('./src/core/log'); createLogger('info', undefined, ${JSON.stringify(format)}).info({ taskId: 't-1', headers: { authorization: 'Bearer sb_secret' } }, 'turn ended');`;
  return execFileSync(process.execPath, ['--import', 'tsx', '-e', script], { cwd: join(__dirname, '..'), encoding: 'utf8' });
}

test('LOG_FORMAT pretty: readable lines (as on a terminal), redacted; json, or no terminal: one JSON object a line', () => {
  const readable = loggedBy('pretty');
  assert.match(readable, /INFO: turn ended/);
  assert.match(readable, /taskId: "t-1"/);
  assert.doesNotMatch(readable, /sb_secret/);
  assert.throws(() => JSON.parse(readable.split('\n')[0]!), 'not JSON');
  for (const format of ['json', undefined]) {
    const line = JSON.parse(loggedBy(format).trim());
    assert.deepEqual([line.msg, line.taskId, line.headers.authorization], ['turn ended', 't-1', '[redacted]'], String(format));
  }
});
