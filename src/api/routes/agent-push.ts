/**
 * POST /agent-push/:id: the webhook agents push to about a task Switchboard follows (src/core/push/agent-push.ts).
 * The caller is an agent with no Switchboard key: the route is public to the key check, and its own owner check
 * is the follow's token (X-A2A-Notification-Token, as the SDKs send `token`, or `Authorization: Bearer`), which
 * only Switchboard can make and which is valid for that one turn of one tenant's task. A push that reports a
 * settled state wakes the follower (NOTIFY, so another process's activity hears it); progress does not (the
 * follower reads the task only when it may be over). Either way the follower reads the task from the agent:
 * nothing in the body is taken as the task's state.
 */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { access } from '../../core/auth/caller';
import type { EventHub } from '../../core/events/hub';
import { agentPushes } from '../../core/metrics';
import { AGENT_PUSH_CHANNEL, type AgentPushNotice } from '../../core/events/hub';
import { type AgentPushTokens, PushBodyError, pushHint, wakes } from '../../core/push/agent-push';
import { answer, describeOnly, errorBody } from './openapi';
import { JsonLimitError, MAX_AGENT_JSON_DEPTH, parseJson } from '../../core/http/json-guard';

export interface AgentPushRouteDeps {
  pool: Pool;
  hub: EventHub;
  tokens: AgentPushTokens;
}

/** The largest push body read: an agent's answer is capped at this size too (src/core/http/outbound.ts). */
export const AGENT_PUSH_BODY_LIMIT = 4 * 1024 * 1024;

export async function agentPushRoutes(app: FastifyInstance, { pool, hub, tokens }: AgentPushRouteDeps): Promise<void> {
  describeOnly(app);
  // 1.0 pushes are application/a2a+json, 0.3 ones application/json; any type is read as bytes and checked and
  // parsed here (json-guard: UTF-8, depth), so a bad body is a 400 with a message.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return reply.code(413).send({ error: `The push body is larger than ${AGENT_PUSH_BODY_LIMIT} bytes` });
    if (err.statusCode && err.statusCode < 500) return reply.code(err.statusCode).send({ error: err.message });
    throw err; // the app's handler: a dependency's outage is a 503
  });

  const schema = {
    tags: ['push'],
    summary: 'An agent\'s push notification about a task Switchboard follows (the URL and token Switchboard gave it with the message)',
    description:
      'The body is what the agent pushes: an A2A 1.0 StreamResponse (`{"statusUpdate": …}`, `{"task": …}`…) or a 0.3 event ' +
      '(`kind` task / status-update / artifact-update). The token comes as `X-A2A-Notification-Token` or `Authorization: Bearer`. ' +
      'A push reporting a settled state wakes the follower, which reads the task from the agent (the push itself is only a hint).',
    params: { type: 'object', properties: { id: { type: 'string', description: 'The follow id in the URL Switchboard gave the agent' } }, required: ['id'] },
    response: {
      200: answer('{accepted: true, wake: boolean}: wake says whether the follower was woken to read the task'),
      400: errorBody('The body is not JSON, or not an A2A push (no task named, an unknown state)'),
      401: errorBody('No token, or not the token issued for this id (or expired)'),
      413: errorBody('The body is larger than 4 MiB'),
    },
  };
  app.post<{ Params: { id: string } }>('/agent-push/:id', { config: access.public, schema, bodyLimit: AGENT_PUSH_BODY_LIMIT }, async (req, reply) => {
    const { id } = req.params;
    const token = tokenOf(req.headers);
    if (!token || !tokens.verify(id, token)) {
      agentPushes.inc({ outcome: 'refused' });
      reply.header('www-authenticate', 'Bearer realm="switchboard", error="invalid_token"');
      const why = token ? 'is not the token issued for this push URL (or it expired)' : 'is missing: send the push config\'s token as X-A2A-Notification-Token';
      return reply.code(401).send({ error: `The push token ${why}` });
    }
    let hint;
    try {
      if (!Buffer.isBuffer(req.body) || req.body.length === 0) throw new PushBodyError('the push has no body');
      let body: unknown;
      try {
        body = parseJson(req.body, { maxDepth: MAX_AGENT_JSON_DEPTH });
      } catch (err) {
        throw new PushBodyError(err instanceof JsonLimitError ? `the push body is not read: ${err.message}` : 'the push body is not JSON');
      }
      hint = pushHint(body);
    } catch (err) {
      if (!(err instanceof PushBodyError)) throw err;
      agentPushes.inc({ outcome: 'malformed' });
      return reply.code(400).send({ error: `Invalid push: ${err.message}` });
    }
    const wake = wakes(hint);
    if (wake) {
      const notice: AgentPushNotice = { id, taskId: hint.taskId };
      const payload = JSON.stringify(notice);
      await pool.query('SELECT pg_notify($1, $2)', [AGENT_PUSH_CHANNEL, payload]);
      // A hub that LISTENs hears its own NOTIFY; one whose LISTEN connection is down (or an in-process hub of a
      // test) is told here, for a follower in this process.
      if (!hub.listening) hub.agentPushed(payload);
    }
    agentPushes.inc({ outcome: wake ? 'woke' : 'progress' });
    return { accepted: true, wake };
  });
}

function tokenOf(headers: Record<string, string | string[] | undefined>): string | undefined {
  const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  const given = first(headers['x-a2a-notification-token']);
  if (given) return given;
  const m = /^Bearer\s+(\S+)$/i.exec(first(headers.authorization) ?? '');
  return m?.[1];
}
