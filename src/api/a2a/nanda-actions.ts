/**
 * NANDA actions (issue 12; seed 001): one `POST /a2a`, routed by action. A `message/send` (or 1.0 `SendMessage`)
 * whose first text part parses as a JSON object with an `action` string is an action request, at the routing front
 * door of any binding (endpoints.ts answers it before the RPC core). The action goes
 * to Switchboard's own services (the table below), or to a registered agent that declares it (a skill whose id
 * is the action or one of its `prefix.*`), as a task the front door routes to that skill. Answers are the seed's
 * bare message (`{role: "agent", parts: [{text: "<JSON>"}]}`); errors carry the seed's codes: -32601 for an
 * unknown action, -32602 naming a missing or bad field.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { A2A_ERRORS } from './errors';
import type { RpcEnvelope } from './rpc-errors';
import { pathOfNul } from '../../core/http/json-guard';
import { type JsonLimitError, checkJson } from '../../core/http/json-guard';
import type { RpcAnswer, RpcFailure, RpcRequest } from './rpc-handler';
import type { AgentRegistry } from '../../core/agents/registry';
import type { Caller, Role } from '../../core/auth/caller';
import type { Health } from '../../core/health';
import type { CertificationGateway } from '../../core/temporal/certification-gateway';
import { ActionError, invalidField } from '../../core/nanda/action-error';
import { checkCertificate, evaluation, issueCredential, revokeCertificate, startEvaluation } from '../../core/nanda/certificates';
import { auditReconcile, auditSettlement, latency, liveness, reputation } from '../../core/nanda/observer';
import { auditFund, auditIntent, auditIntents, auditWallet } from '../../core/nanda/wallets';
import type { UnfundedPolicy } from '../../core/ledger/postings';
import { type EnforcedPolicies, PolicyConflict, PolicyRules, createPolicy, evaluatePolicies, getPolicy, listPolicies, setEnforced } from '../../core/nanda/policies';

export interface ActionDeps {
  pool: Pool;
  registry: AgentRegistry;
  /** A policy action's change applies to this process's very next task (other processes hear the trigger). */
  policies: EnforcedPolicies;
  certifications: CertificationGateway;
  health: Health;
  /** How a never-funded requester wallet reads (SWITCHBOARD_UNFUNDED_ACCOUNTS). */
  unfundedAccounts: UnfundedPolicy;
}

type FieldType = 'string' | 'object' | 'boolean' | 'number';

interface ActionContext {
  caller: Caller;
  tenant: string;
  base: string;
  /** The action request's fields, each checked against the action's `fields` before `run`. */
  f: Record<string, unknown>;
}

interface ActionSpec {
  roles: readonly Role[];
  /** Each field the action reads: its type, and whether it is required. */
  fields?: Record<string, { type: FieldType; required?: boolean }>;
  run(d: ActionDeps, c: ActionContext): Promise<unknown>;
}

const EVERYONE: readonly Role[] = ['admin', 'operator', 'client', 'agent'];
/** Issuing and revoking certificates, evaluations (they call the agent), policies and the ledger: the tenant's operators. */
const OPERATORS: readonly Role[] = ['admin', 'operator'];
/** Money in: the tenant's admins, as `POST /accounts/:account/deposits`. */
const ADMINS: readonly Role[] = ['admin'];

/** The longest string field an action takes (ids, names, reasons). */
const MAX_STRING = 1024;

const req = (type: FieldType) => ({ type, required: true });
const opt = (type: FieldType) => ({ type });
const str = (v: unknown) => v as string;

/** Switchboard's own actions. The "Actions (NANDA)" table of docs/dialects.md lists the same names and roles. */
export const ACTIONS: Record<string, ActionSpec> = {
  'certificate.start': {
    roles: OPERATORS,
    fields: { agent_id: req('string') },
    run: (d, c) => startEvaluation(d, c.tenant, c.caller.keyId, str(c.f.agent_id)),
  },
  'certificate.status': {
    roles: EVERYONE,
    fields: { certification_id: req('string') },
    run: async (d, c) => (await evaluation(d.pool, c.tenant, str(c.f.certification_id))) ?? notFound('certificate.status', 'certification_id', 'evaluation', c.f.certification_id),
  },
  'certificate.certificate': {
    roles: OPERATORS,
    fields: { certification_id: req('string') },
    run: (d, c) => issueCredential(d, c.tenant, c.base, str(c.f.certification_id)),
  },
  'certificate.revoke': {
    roles: OPERATORS,
    fields: { cert_id: req('string'), reason: opt('string') },
    run: (d, c) => revokeCertificate(d.pool, c.tenant, str(c.f.cert_id), c.f.reason as string | undefined),
  },
  'certificate.check': {
    roles: EVERYONE,
    fields: { cert_id: req('string') },
    run: (d, c) => checkCertificate(d.pool, c.tenant, str(c.f.cert_id)),
  },
  'policy.create': {
    roles: OPERATORS,
    fields: { name: req('string'), rules: req('object'), enforce: opt('boolean') },
    run: async (d, c) => {
      const rules = PolicyRules.safeParse(c.f.rules);
      if (!rules.success) throw invalidField('policy.create', 'rules', `is not a valid rule set: ${rules.error.issues.map((i) => `${i.path.join('.') || 'rules'}: ${i.message}`).join('; ')}`);
      try {
        const policy = await createPolicy(d.pool, c.tenant, c.caller.keyId, { name: str(c.f.name), rules: rules.data, enforced: c.f.enforce === true });
        d.policies.forget(c.tenant);
        return policy;
      } catch (err) {
        if (err instanceof PolicyConflict) throw invalidField('policy.create', 'name', `is taken: ${err.message}`);
        throw err;
      }
    },
  },
  'policy.list': {
    roles: EVERYONE,
    run: async (d, c) => ({ policies: await listPolicies(d.pool, c.tenant) }),
  },
  'policy.evaluate': {
    roles: EVERYONE,
    fields: { agent_id: req('string'), policy_id: opt('string') },
    run: async (d, c) => {
      const agent = await d.registry.get(c.tenant, str(c.f.agent_id));
      if (!agent) return notFound('policy.evaluate', 'agent_id', 'agent', c.f.agent_id);
      const policies = c.f.policy_id ? [(await getPolicy(d.pool, c.tenant, str(c.f.policy_id))) ?? notFound('policy.evaluate', 'policy_id', 'policy', c.f.policy_id)] : await listPolicies(d.pool, c.tenant);
      const verdicts = await evaluatePolicies(d.pool, c.tenant, agent, policies);
      return { agent_id: agent.id, allowed: verdicts.every((v) => v.allowed || !v.enforced), verdicts };
    },
  },
  'policy.enforce': {
    roles: OPERATORS,
    fields: { policy_id: req('string'), enforced: opt('boolean') },
    run: async (d, c) => {
      const policy = await setEnforced(d.pool, c.tenant, str(c.f.policy_id), c.f.enforced !== false);
      d.policies.forget(c.tenant);
      return policy ?? notFound('policy.enforce', 'policy_id', 'policy', c.f.policy_id);
    },
  },
  'observer.status': {
    roles: EVERYONE,
    fields: { agent_id: opt('string') },
    run: async (d, c) => {
      if (c.f.agent_id === undefined) return { agents: await liveness(d.pool, c.tenant, await d.registry.list(c.tenant)) };
      const agent = (await d.registry.get(c.tenant, str(c.f.agent_id))) ?? notFound('observer.status', 'agent_id', 'agent', c.f.agent_id);
      return (await liveness(d.pool, c.tenant, [agent]))[0];
    },
  },
  'observer.probe': {
    roles: OPERATORS,
    fields: { agent_id: req('string') },
    run: async (d, c) => {
      const agent = (await d.registry.refreshNow(c.tenant, str(c.f.agent_id))) ?? notFound('observer.probe', 'agent_id', 'agent', c.f.agent_id);
      return (await liveness(d.pool, c.tenant, [agent]))[0];
    },
  },
  'telemetry.latency': {
    roles: EVERYONE,
    fields: { agent_id: req('string') },
    run: async (d, c) => {
      await requireAgent(d, c, 'telemetry.latency');
      return latency(d.pool, d.registry, c.tenant, str(c.f.agent_id));
    },
  },
  reputation: {
    roles: EVERYONE,
    fields: { agent_id: req('string') },
    run: async (d, c) => {
      await requireAgent(d, c, 'reputation');
      return reputation(d.pool, c.tenant, str(c.f.agent_id));
    },
  },
  'audit.reconcile': {
    roles: OPERATORS,
    fields: { agent_id: opt('string'), task_id: opt('string') },
    run: (d, c) => auditReconcile(d.pool, c.tenant, { agentId: c.f.agent_id as string | undefined, taskId: c.f.task_id as string | undefined }),
  },
  'audit.settlement': {
    roles: OPERATORS,
    fields: { task_id: req('string') },
    run: async (d, c) => (await auditSettlement(d.pool, c.tenant, str(c.f.task_id))) ?? notFound('audit.settlement', 'task_id', 'task', c.f.task_id),
  },
  'audit.wallet': {
    roles: EVERYONE,
    fields: { account: opt('string') },
    run: (d, c) => auditWallet(d.pool, c.caller, c.f.account as string | undefined, d.unfundedAccounts),
  },
  'audit.fund': {
    roles: ADMINS,
    fields: { account: opt('string'), amount_minor: req('number'), idempotency_key: req('string') },
    run: (d, c) => auditFund(d.pool, c.caller, c.f as { account?: string; amount_minor: number; idempotency_key: string }, d.unfundedAccounts),
  },
  'audit.intent': {
    roles: EVERYONE,
    fields: { task_id: req('string') },
    run: async (d, c) => (await auditIntent(d.pool, c.caller, str(c.f.task_id))) ?? notFound('audit.intent', 'task_id', 'payment intent', c.f.task_id),
  },
  'audit.intents': {
    roles: OPERATORS,
    fields: { state: opt('string'), agent_id: opt('string'), stale: opt('boolean') },
    run: (d, c) => auditIntents(d.pool, c.tenant, c.f as { state?: string; agent_id?: string; stale?: boolean }),
  },
};

/** The seed lists the certifier's lifecycle as bare `start · status · certificate`: the same actions. */
const ALIASES: Record<string, string> = { start: 'certificate.start', status: 'certificate.status', certificate: 'certificate.certificate' };

const SEND_METHODS: Record<string, '0.3' | '1.0'> = { 'message/send': '0.3', SendMessage: '1.0' };

/** An action request found in a JSON-RPC body. */
export interface ActionRequest {
  id: string | number | null;
  dialect: '0.3' | '1.0';
  action: string;
  fields: Record<string, unknown>;
  /** Why the action's JSON is not read (the peer-input guard's message): answered -32602. */
  refused?: string;
  envelope: { method: string; params: { message: Record<string, unknown> & { parts: Record<string, unknown>[] } } & Record<string, unknown> };
}

/**
 * The action request of a JSON-RPC request (as the route read it), or undefined when it is anything else (it then
 * goes to the RPC core, which answers every malformed request as it always has).
 */
export function actionRequestOf(rpc: RpcEnvelope): ActionRequest | undefined {
  if (!Object.hasOwn(SEND_METHODS, rpc.method)) return undefined;
  const parts = (rpc.params as { message?: { parts?: unknown } } | undefined)?.message?.parts;
  if (!Array.isArray(parts)) return undefined;
  const first = parts.find((p): p is { text: string } => typeof (p as { text?: unknown } | null)?.text === 'string');
  if (!first || !first.text.trimStart().startsWith('{')) return undefined;
  const request = { id: rpc.id, dialect: SEND_METHODS[rpc.method]!, envelope: rpc as unknown as ActionRequest['envelope'] };
  let fields: unknown;
  try {
    // V8's JSON.parse is not recursive: safe at any depth. Only an action's fields are read further (checked below);
    // other text, however deep, is a message's text and goes on as such.
    fields = JSON.parse(first.text);
  } catch {
    return undefined;
  }
  if (!fields || typeof fields !== 'object' || Array.isArray(fields) || typeof (fields as { action?: unknown }).action !== 'string') return undefined;
  const { action, ...rest } = fields as { action: string } & Record<string, unknown>;
  try {
    checkJson(first.text);
  } catch (err) {
    return { ...request, action, fields: {}, refused: (err as JsonLimitError).message };
  }
  return { ...request, action, fields: rest };
}

export class Actions {
  constructor(private readonly d: ActionDeps) {}

  /**
   * Answers `rpc` when it is an action request; undefined otherwise.
   * @param forward sends a rewritten call through the RPC core and the routing front door (an agent's action).
   */
  async answer(rpc: RpcEnvelope, req: RpcRequest, forward: (call: { method: string; params: unknown }) => Promise<RpcAnswer>): Promise<RpcAnswer | undefined> {
    const ar = actionRequestOf(rpc);
    if (!ar) return undefined;
    const fail = (code: number, message: string, data?: unknown, refused?: RpcFailure['refused']): RpcAnswer => ({
      error: { code, message, ...(data !== undefined ? { data } : {}) },
      ...(refused && { refused }),
    });
    if (ar.refused) return fail(A2A_ERRORS.InvalidParams.code, `Invalid params for ${ar.action}: the action's JSON is not read: ${ar.refused}`);
    const name = ALIASES[ar.action] ?? ar.action;
    try {
      const spec = Object.hasOwn(ACTIONS, name) ? ACTIONS[name] : undefined;
      if (!spec) {
        const skill = await this.declaredBy(req.caller.tenant, ar.action);
        if (skill) return toAgentAnswer(await forward(routedTo(ar, skill)), ar.dialect);
        return fail(A2A_ERRORS.MethodNotFound.code, `Method not found: no action ${ar.action} (Switchboard's own actions: ${Object.keys(ACTIONS).join(', ')}; or a registered agent's skill named ${ar.action} or ${prefixes(ar.action).join(' or ') || 'prefix.*'})`);
      }
      if (!spec.roles.includes(req.caller.role)) {
        const message = `${name} needs the role ${spec.roles.join(' or ')}; this key's role is ${req.caller.role}`;
        return fail(A2A_ERRORS.InvalidRequest.code, message, { requiredRoles: spec.roles }, 'permission');
      }
      for (const [field, f] of Object.entries(spec.fields ?? {})) {
        const v = ar.fields[field];
        if (v === undefined || v === null) {
          if (f.required) throw invalidField(name, field, `is required (${f.type})`);
          continue;
        }
        const type = Array.isArray(v) ? 'array' : typeof v;
        if (type !== f.type || (f.type === 'string' && (v as string).length === 0)) throw invalidField(name, field, `must be a non-empty ${f.type}`);
        if (f.type === 'string' && (v as string).length > MAX_STRING) throw invalidField(name, field, `is longer than ${MAX_STRING} characters`);
        // PostgreSQL cannot store U+0000 in text or jsonb: refused here, as the RPC core refuses it in params.
        const nul = pathOfNul(v, field);
        if (nul !== undefined) throw invalidField(name, nul, 'contains a NUL character (U+0000)');
      }
      const result = await spec.run(this.d, { caller: req.caller, tenant: req.caller.tenant, base: req.base, f: ar.fields });
      return { result: bareMessage(result, ar.dialect) };
    } catch (err) {
      if (err instanceof ActionError) return fail(err.code, err.message, err.data);
      const down = this.d.health.unavailable(err);
      if (down) return { error: { code: A2A_ERRORS.Unavailable.code, message: down.message }, refused: 'unavailable', retryAfterS: down.retryAfterS };
      throw err;
    }
  }

  /** The skill id of a live agent of the tenant that declares `action` (exactly, or as one of its `prefix.*`). */
  private async declaredBy(tenant: string, action: string): Promise<string | undefined> {
    for (const skill of [action, ...prefixes(action)]) {
      const { agents } = await this.d.registry.search(tenant, { skills: [skill], statuses: ['healthy', 'degraded'], pageSize: 1 });
      if (agents.length) return skill;
    }
    return undefined;
  }
}

/** `a.b.c` → `a.b.*`, `a.*`: the wildcard skill ids that declare it, most specific first. */
function prefixes(action: string): string[] {
  const segments = action.split('.');
  return segments.slice(1).map((_, i) => `${segments.slice(0, segments.length - 1 - i).join('.')}.*`);
}

/** A result as the seed's bare agent message: its JSON in the one text part (0.3 adds the kinds its clients need). */
function bareMessage(result: unknown, dialect: '0.3' | '1.0'): Record<string, unknown> {
  const text = JSON.stringify(result ?? null);
  if (dialect === '1.0') return { message: { messageId: randomUUID(), role: 'ROLE_AGENT', parts: [{ text }] } };
  return { kind: 'message', messageId: randomUUID(), role: 'agent', parts: [{ kind: 'text', text }] };
}

/**
 * The request as a task for the agent declaring the action: the same message (a messageId minted when the seed's
 * shape has none), with `metadata.skillId` naming the declared skill, so the front door routes it (policies,
 * health and reputation included) and the agent gets the action's JSON as it was sent.
 */
function routedTo(ar: ActionRequest, skillId: string): { method: string; params: unknown } {
  const m = ar.envelope.params.message;
  const message = ar.dialect === '0.3' ? withKinds(m) : { ...m, messageId: typeof m.messageId === 'string' && m.messageId ? m.messageId : randomUUID(), role: 'ROLE_USER' };
  return { method: ar.envelope.method, params: { ...ar.envelope.params, message: { ...message, metadata: { ...(m.metadata as Record<string, unknown> | undefined), skillId } } } };
}

/** Seed 001's kind-less message as 0.3's: `kind`s from the parts' shapes, a messageId minted when it has none. */
function withKinds(m: Record<string, unknown> & { parts: Record<string, unknown>[] }): Record<string, unknown> {
  const kindOf = (p: Record<string, unknown>) => (p.kind ?? (p.text !== undefined ? 'text' : p.data !== undefined ? 'data' : 'file'));
  return {
    ...m,
    kind: 'message',
    messageId: typeof m.messageId === 'string' && m.messageId ? m.messageId : randomUUID(),
    role: m.role === 'agent' ? 'agent' : 'user',
    parts: m.parts.map((p) => ({ kind: kindOf(p), ...p })),
  };
}

/**
 * Whether a `message/send` is in seed 001's shape (its message and parts without `kind`; not NEXUS's `type`
 * parts or `params.id`, which NEXUS's dialect reads), which 0.3 refuses.
 */
function seedShaped(rpc: RpcEnvelope): boolean {
  // `params.id` on message/send is NEXUS's (a client-chosen task id): that dialect reads it.
  if (rpc.method !== 'message/send' || (rpc.params as { id?: unknown } | undefined)?.id !== undefined) return false;
  const m = (rpc.params as { message?: unknown } | undefined)?.message as { kind?: unknown; role?: unknown; parts?: unknown } | undefined;
  if (!m || typeof m !== 'object' || m.kind !== undefined || !Array.isArray(m.parts) || !m.parts.length) return false;
  // A 1.0 message (`ROLE_USER`) sent as 0.3's is the client's mistake, refused as such (-32602); the seed says `user`.
  if (typeof m.role === 'string' && /^ROLE_/.test(m.role)) return false;
  return m.parts.every((p: unknown) => !!p && typeof p === 'object' && (p as { kind?: unknown }).kind === undefined && (p as { type?: unknown }).type === undefined);
}

/**
 * Seed 001's message shape (`{"role": "user", "parts": [{"text": …}]}`, no `kind`, no `messageId`) at any
 * JSON-RPC endpoint, an agent's own (`/agents/<id>/a2a`) included: the message goes on as 0.3's, and a completed
 * task is answered as the seed's bare message, as a routed action is. Undefined for any other request.
 */
export async function answerSeedShaped(rpc: RpcEnvelope, forward: (call: { method: string; params: unknown }) => Promise<RpcAnswer>): Promise<RpcAnswer | undefined> {
  if (!seedShaped(rpc)) return undefined;
  const params = rpc.params as { message: Record<string, unknown> & { parts: Record<string, unknown>[] } };
  return toAgentAnswer(await forward({ method: rpc.method, params: { ...params, message: withKinds(params.message) } }), '0.3');
}

/**
 * The agent's answer as a bare message when its task completed (the agent's reply message, else its artifacts'
 * parts), with the task named in its metadata; any other outcome (an error, a task that is not done) as it came.
 */
function toAgentAnswer(answer: RpcAnswer, dialect: '0.3' | '1.0'): RpcAnswer {
  if (!('result' in answer)) return answer;
  const result = answer.result as Record<string, unknown> | undefined;
  const task = (dialect === '1.0' ? result?.task : result?.kind === 'task' ? result : undefined) as
    | { id: string; status: { state: string; message?: { parts?: unknown[] } }; artifacts?: { parts?: unknown[] }[]; metadata?: Record<string, unknown> }
    | undefined;
  const done = dialect === '1.0' ? 'TASK_STATE_COMPLETED' : 'completed';
  if (!task || task.status.state !== done) return answer;
  const parts = task.status.message?.parts?.length ? task.status.message.parts : (task.artifacts ?? []).flatMap((a) => a.parts ?? []);
  const routing = (task.metadata?.switchboard as { routing?: { agentId?: string; skillId?: string } } | undefined)?.routing;
  const metadata = { switchboard: { taskId: task.id, agentId: routing?.agentId, skillId: routing?.skillId } };
  const message =
    dialect === '1.0'
      ? { message: { messageId: randomUUID(), role: 'ROLE_AGENT', parts, metadata } }
      : { kind: 'message', messageId: randomUUID(), role: 'agent', parts, metadata };
  return { result: message };
}

/** @throws -32602 naming the field: the tenant has no such thing (another tenant's is not found either). */
function notFound(action: string, field: string, what: string, value: unknown): never {
  throw invalidField(action, field, `names no ${what} of this tenant (${String(value)})`);
}

async function requireAgent(d: ActionDeps, c: ActionContext, action: string): Promise<void> {
  if (!(await d.registry.get(c.tenant, str(c.f.agent_id)))) notFound(action, 'agent_id', 'agent', c.f.agent_id);
}
