/** The process logger (pino). Credentials never reach it: whatever logs a request or an error carrying one is redacted. */
import pino, { type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';

export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'headers.authorization',
  'headers["x-api-key"]',
  '*.credentials',
  '*.clientSecret',
  '*.token',
  '*.access_token',
];

/**
 * The logger. Without a destination it writes to stdout: as readable lines (pino-pretty, synchronous, so nothing is
 * lost at exit) when `format` is `pretty`, or by default when stdout is a terminal; as JSON lines otherwise, for a
 * log collector.
 */
export function createLogger(level: string, destination?: DestinationStream, format?: 'json' | 'pretty'): Logger {
  const options = { level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } };
  if (destination) return pino(options, destination);
  if (format === 'pretty' || (format === undefined && process.stdout.isTTY)) {
    return pino(options, pretty({ sync: true, colorize: process.stdout.isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
  }
  return pino(options);
}

const SDK_LEVELS = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' } as const;
/**
 * SDK warnings about what Switchboard does on purpose, logged at debug: a warning on every normal start would train
 * operators to skip warnings. The hub worker runs activities only (src/worker/worker.ts, createHubWorker).
 */
const EXPECTED_WARNINGS = new Set(['No workflows registered, not polling for workflow tasks']);
const TASK_WORKFLOW_ID = /^a2a:([^:]+):(.+)$/;

/**
 * The Temporal SDK's logger (Runtime.install) writing through pino: one log stream, the same redaction, and every
 * line about a task's workflow or activity carries `tenant` and `taskId` (from its workflow id `a2a:<tenant>:<taskId>`).
 * `error` metadata goes to pino's `err` serializer, so failures keep their message, type and stack.
 */
export function temporalLogger(log: Logger): import('@temporalio/common').Logger {
  const write = (level: keyof typeof SDK_LEVELS, message: string, meta: Record<string | symbol, unknown> = {}) => {
    if (level === 'WARN' && EXPECTED_WARNINGS.has(message)) level = 'DEBUG';
    const { error, ...rest } = meta as Record<string, unknown>;
    const task = typeof rest.workflowId === 'string' ? TASK_WORKFLOW_ID.exec(rest.workflowId) : null;
    const fields = { ...rest, ...(task ? { tenant: task[1], taskId: task[2] } : {}), ...(error !== undefined ? { err: error } : {}) };
    log[SDK_LEVELS[level]](fields, message);
  };
  return {
    log: write,
    trace: (m, meta) => write('TRACE', m, meta),
    debug: (m, meta) => write('DEBUG', m, meta),
    info: (m, meta) => write('INFO', m, meta),
    warn: (m, meta) => write('WARN', m, meta),
    error: (m, meta) => write('ERROR', m, meta),
  };
}
