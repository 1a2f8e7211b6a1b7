/**
 * Which dialect an agent speaks, by asking it, for agents whose card does not say: a node that serves no card
 * (seed 001's NANDA nodes: one POST /a2a endpoint, `message/send`; seed 000's NEXUS nodes, whose card is optional;
 * seed 002's envelope-speaking agents), and a card without `protocolVersion`, which A2A 0.1 agents (seed 003) and
 * NEXUS agents (seed 000) both publish. Each question starts nothing at the agent: a method called with empty
 * params, which a JSON-RPC server refuses before doing anything (-32600/-32602) or refuses as a method it does not
 * have (-32601), so the method's presence is the answer; a `tasks/get` of a task that does not exist, whose error
 * code tells NEXUS (-32602, "bad parameters (e.g., task not found)") from A2A 0.3 (-32001, TaskNotFound) and NANDA
 * (-32601: no such method); and a Genesis QUERY `get_status` of a resource that does not exist, which an envelope
 * speaker answers with a RESPONSE envelope.
 */
import { randomUUID } from 'node:crypto';
import { authorizedFetch } from './agent-credentials';
import type { AgentLink } from './agent-client';
import { askGenesis } from './transports/genesis';
import { ERRORS } from '../../../task/errors';

export type SniffedDialect = '0.1' | '0.3' | 'nexus' | 'genesis';

/** What one JSON-RPC call told: its error code (undefined: a result), or that the URL is no JSON-RPC endpoint. */
type Answer = { code?: number } | 'no-endpoint';

const PROBE_ID = 'switchboard-dialect-probe';
/** The error code of seed 000's NEXUS for an unknown task (the A2A spec's TaskNotFound is -32001). */
const NEXUS_TASK_NOT_FOUND = ERRORS.InvalidParams.code;

/** What `url` answers to JSON-RPC `method` with `params`. */
async function ask(link: AgentLink, url: string, method: string, params: Record<string, unknown>, timeoutMs: number): Promise<Answer> {
  const fetchImpl = link.credentials ? authorizedFetch(link.fetch, link.credentials) : link.fetch;
  try {
    const res = await fetchImpl(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: PROBE_ID, method, params }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let answer: { jsonrpc?: unknown; result?: unknown; error?: { code?: unknown } } | undefined;
    try {
      answer = JSON.parse(text);
    } catch {
      return 'no-endpoint';
    }
    if (answer?.jsonrpc !== '2.0' || (answer.result === undefined && answer.error === undefined)) return 'no-endpoint';
    return { code: typeof answer.error?.code === 'number' ? answer.error.code : undefined };
  } catch {
    return 'no-endpoint';
  }
}

type Presence = 'present' | 'absent' | 'no-endpoint';

/** Whether `url` has JSON-RPC `method` (any answer but -32601 means it has the method). */
async function presenceOf(link: AgentLink, url: string, method: string, timeoutMs: number, params: Record<string, unknown> = {}): Promise<Presence> {
  const answer = await ask(link, url, method, params, timeoutMs);
  if (answer === 'no-endpoint') return answer;
  return answer.code === ERRORS.MethodNotFound.code ? 'absent' : 'present';
}

/** A method no server has: what a server answers it tells whether its refusals say anything about methods. */
const NO_SUCH_METHOD = 'switchboard/no-such-method';
/** A message with nothing in it: past a server's shape check, and too empty for any method to act on. */
const EMPTY_MESSAGE = { message: { role: 'user', parts: [] } };

/**
 * Whether `url` serves A2A 0.1, once `tasks/send` with empty params was refused as a call it has. A server that
 * checks a request's shape before its method (seed 001's NANDA nodes: -32600 "missing jsonrpc/method/message")
 * refuses every method so, one nobody has included: then both are asked again with a message in their params,
 * which gets such a server past its shape check, so that its refusal names the method it lacks (-32601).
 */
async function servesV01(link: AgentLink, url: string, timeoutMs: number): Promise<{ v01: boolean; shapeFirst: boolean }> {
  if ((await presenceOf(link, url, NO_SUCH_METHOD, timeoutMs)) === 'absent') return { v01: true, shapeFirst: false };
  const send = await presenceOf(link, url, 'tasks/send', timeoutMs, EMPTY_MESSAGE);
  const none = await presenceOf(link, url, NO_SUCH_METHOD, timeoutMs, EMPTY_MESSAGE);
  return { v01: send === 'present' && none === 'absent', shapeFirst: true };
}

/**
 * Where seed 001's NANDA node registered with `"protocol": "nanda"` serves `message/send`: the URL, else `<url>/a2a`.
 * @returns undefined when neither has it.
 */
export async function findMessageSend(link: AgentLink, url: string, timeoutMs: number): Promise<string | undefined> {
  const root = url.replace(/\/+$/, '');
  for (const candidate of root.endsWith('/a2a') ? [url] : [url, `${root}/a2a`]) {
    if ((await presenceOf(link, candidate, 'message/send', timeoutMs)) === 'present') return candidate;
  }
  return undefined;
}

/**
 * The dialect of the JSON-RPC endpoint at `url`, or at `<url>/a2a` or `<url>/rpc` (where the seeds put theirs):
 * `tasks/send` present → 0.1; else `message/send` present → NEXUS when `nexusFirst` (its card said 0.x without
 * naming the version, and NEXUS is what speaks message/send with such a card) or when a `tasks/get` of an unknown
 * task is NEXUS's -32602, else 0.3 (NANDA, and 0.3 servers without a card). No JSON-RPC endpoint at any of them:
 * Genesis when the URL answers a QUERY envelope with a RESPONSE.
 * @returns the endpoint's URL and dialect, or undefined when none of the URLs answers either way.
 */
export async function sniffDialect(
  link: AgentLink,
  url: string,
  timeoutMs: number,
  opts: { nexusFirst?: boolean } = {},
): Promise<{ url: string; dialect: SniffedDialect } | undefined> {
  const root = url.replace(/\/+$/, '');
  const urls = /\/(a2a|rpc)$/.test(root) ? [url] : [url, `${root}/a2a`, `${root}/rpc`];
  for (const candidate of urls) {
    const sends = await presenceOf(link, candidate, 'tasks/send', timeoutMs);
    if (sends === 'no-endpoint') continue;
    const { v01, shapeFirst } = sends === 'present' ? await servesV01(link, candidate, timeoutMs) : { v01: false, shapeFirst: false };
    if (v01) return { url: candidate, dialect: '0.1' };
    // A server that refuses shapes first has been found to lack tasks/send: message/send is the one it documents.
    if (!shapeFirst && (await presenceOf(link, candidate, 'message/send', timeoutMs)) !== 'present') continue;
    if (opts.nexusFirst) return { url: candidate, dialect: 'nexus' };
    const unknown = await ask(link, candidate, 'tasks/get', { id: `${PROBE_ID}-${randomUUID()}` }, timeoutMs);
    return { url: candidate, dialect: unknown !== 'no-endpoint' && unknown.code === NEXUS_TASK_NOT_FOUND ? 'nexus' : '0.3' };
  }
  if (opts.nexusFirst) return undefined;
  const fetchImpl = link.credentials ? authorizedFetch(link.fetch, link.credentials) : link.fetch;
  return (await askGenesis(fetchImpl, url, timeoutMs)).response ? { url, dialect: 'genesis' } : undefined;
}
