/**
 * Which dialect an agent speaks, by asking it, for agents whose card does not say: a node that serves no card
 * (seed 001's NANDA nodes: one POST /a2a endpoint, `message/send`), and a card without `protocolVersion`, which
 * A2A 0.1 agents (seed 003) and NEXUS agents (seed 000) both publish. Each question is a call with empty params,
 * which a JSON-RPC server refuses before doing anything (-32600/-32602), or refuses as a method it does not have
 * (-32601): so nothing is started at the agent, and the method's presence is the answer.
 */
import { authorizedFetch } from './agent-credentials';
import type { AgentLink } from './agent-client';

export type SniffedDialect = '0.1' | '0.3' | 'nexus';

/** What one method call with empty params told: the method exists, it does not, or the URL is no JSON-RPC endpoint. */
type Presence = 'present' | 'absent' | 'no-endpoint';

/** Whether `url` answers JSON-RPC `method` (any answer but -32601 means it has the method). */
async function presenceOf(link: AgentLink, url: string, method: string, timeoutMs: number): Promise<Presence> {
  const fetchImpl = link.credentials ? authorizedFetch(link.fetch, link.credentials) : link.fetch;
  try {
    const res = await fetchImpl(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'switchboard-dialect-probe', method, params: {} }),
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
    return answer.error?.code === -32601 ? 'absent' : 'present';
  } catch {
    return 'no-endpoint';
  }
}

/**
 * The dialect of the JSON-RPC endpoint at `url`, or at `<url>/a2a` or `<url>/rpc` (where the seeds put theirs):
 * `tasks/send` present → 0.1; else `message/send` present → 0.3 (NANDA), or NEXUS when `nexusFirst` (its card
 * said 0.x without naming the version, and NEXUS is what speaks message/send with such a card).
 * @returns the endpoint's URL and dialect, or undefined when none of the URLs answers either method.
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
    const v01 = await presenceOf(link, candidate, 'tasks/send', timeoutMs);
    if (v01 === 'no-endpoint') continue;
    if (v01 === 'present') return { url: candidate, dialect: '0.1' };
    if ((await presenceOf(link, candidate, 'message/send', timeoutMs)) === 'present') return { url: candidate, dialect: opts.nexusFirst ? 'nexus' : '0.3' };
  }
  return undefined;
}
