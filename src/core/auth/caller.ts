/**
 * Who is calling, and what each route lets them do. Every route declares its access in its Fastify config
 * (`{ config: access.operator }`); src/core/auth/plugin.ts refuses to start a server with a route that declares none.
 *
 * Roles (issue 14):
 * - `admin`: tenants, keys, deposits, and everything else, in any tenant (X-Switchboard-Tenant picks one;
 *   default `default`);
 * - `operator`: its tenant's agents, accounts (read), ledger, reconcile, audit, reading (and following) its tasks,
 *   and two actions on them: cancel one, answer one that waits for input (OPERATOR_ACTIONS);
 * - `client`: send/get/list/cancel/subscribe/push-config for its tenant's tasks, its own account (read);
 * - `agent`: a key bound to one registered agent. It calls like a client, and it is the only caller whose
 *   new tasks may name a parent task (multi-agent jobs): an agent starting work for a task it is running;
 * - `metrics` (issue 41): a Prometheus scraper's key. It reads `GET /metrics` and nothing else, so the scraper
 *   holds no credential that can change anything or read a task. Its key belongs to a tenant like every non-admin
 *   key, but /metrics is process-wide: its labels name every tenant's agents.
 */
export const ROLES = ['admin', 'operator', 'client', 'agent', 'metrics'] as const;
export type Role = (typeof ROLES)[number];
/** The roles that call the API (every role but `metrics`, which reads /metrics only). */
export const CALLER_ROLES = ['admin', 'operator', 'client', 'agent'] as const satisfies readonly Role[];

export interface Caller {
  /** The key's id (`key_…`), `env-admin` for SWITCHBOARD_ADMIN_KEY, or `jwt:<iss>:<sub>`. Never a secret. */
  keyId: string;
  role: Role;
  /** The tenant this request acts in: the key's own, or for an admin the one X-Switchboard-Tenant names. */
  tenant: string;
  /** For role `agent`: the registered agent the key speaks for (none yet for an enrollment token: `via: 'enrollment'`). */
  agentId?: string;
  /** `enrollment`: a hub enrollment token (src/core/auth/enrollment.ts; keyId is the token's id), accepted by GET /hub only. */
  via: 'key' | 'env' | 'jwt' | 'enrollment';
  /** When the credential stops being valid by itself (a key's expiresAt, a JWT's exp): what it holds open ends then. */
  expiresAt?: Date;
}

/**
 * What a route needs: `public` (no credentials; a route that can use them, like Switchboard's own card, still
 * gets `req.caller` when valid ones are sent), or the roles allowed.
 */
export type Access = { public: true } | { roles: readonly Role[]; enrollment?: true };

/** The access policies routes use; one name each, so the role × route matrix reads like the list. */
export const access = {
  public: { auth: { public: true } },
  admin: { auth: { roles: ['admin'] } },
  /** GET /metrics: an admin, or a scraper's `metrics` key. */
  metrics: { auth: { roles: ['admin', 'metrics'] } },
  /** Registry and ledger administration of a tenant. */
  operator: { auth: { roles: ['admin', 'operator'] } },
  /** Reading a tenant's agents, routes and accounts: everyone with a key of the tenant. */
  member: { auth: { roles: ['admin', 'operator', 'client', 'agent'] } },
  /** A REST route that starts A2A work (NEXUS's POST /api/v1/tasks): whoever may send a message (rpcMethodRoles). */
  sender: { auth: { roles: ['admin', 'client', 'agent'] } },
  /**
   * The WebSocket hub (GET /hub): an agent's own connection, with its agent key, or with a hub enrollment token of
   * its tenant (the agent then registers itself: src/api/hub/enroll.ts). The one route an enrollment token opens.
   */
  hub: { auth: { roles: ['agent'], enrollment: true } },
  /** The A2A endpoints: method-level rules (rpcMethodRoles) apply on top. */
  rpc: { auth: { roles: ['admin', 'operator', 'client', 'agent'] } },
  /** The same, on an A2A JSON-RPC endpoint: refusals are JSON-RPC error responses (src/api/routes/refusals.ts). */
  jsonRpc: { auth: { roles: ['admin', 'operator', 'client', 'agent'] }, binding: 'jsonrpc' },
  /** The same, on an A2A HTTP+JSON endpoint: refusals are AIP-193 errors. */
  rest: { auth: { roles: ['admin', 'operator', 'client', 'agent'] }, binding: 'rest' },
} as const satisfies Record<string, { auth: Access; binding?: A2ABinding }>;

/** The A2A binding an HTTP route serves, which decides the form of its refusals. */
export type A2ABinding = 'jsonrpc' | 'rest';

/**
 * JSON-RPC methods every caller may call: reads (operators inspect tasks; clients and agents run them).
 * Subscribing reads a task's event log and changes nothing; the console follows a task's live events with it.
 */
export const READ_METHODS: ReadonlySet<string> = new Set([
  'GetTask',
  'ListTasks',
  'tasks/get',
  'SubscribeToTask',
  'tasks/resubscribe',
  'GetExtendedAgentCard',
  'agent/getAuthenticatedExtendedCard',
]);

/**
 * What an operator may do to its tenant's tasks besides reading them (issue 41: the console's actions): cancel one,
 * and answer one as its client would. An operator's message must continue a task (`message.taskId`): operators
 * never start tasks (src/api/a2a/operator-actions.ts checks that, and writes each action to the audit trail).
 */
export const OPERATOR_ACTIONS: ReadonlySet<string> = new Set(['CancelTask', 'tasks/cancel', 'SendMessage', 'message/send']);

/** The roles that may call a JSON-RPC method on an A2A endpoint. */
export function rpcMethodRoles(method: string): readonly Role[] {
  return READ_METHODS.has(method) || OPERATOR_ACTIONS.has(method) ? CALLER_ROLES : ['admin', 'client', 'agent'];
}

/** Thrown where a caller is required but absent: a route declared public reached code that needs one. */
export class NoCallerError extends Error {}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: Access;
    /** An A2A endpoint's binding: its refusals (401, 403, 429, 413, 503, …) take that binding's form. */
    binding?: A2ABinding;
    /** Set on mutating routes whose admin/operator calls are written to the audit log, e.g. `agent.register`. */
    audit?: string;
  }
  interface FastifyRequest {
    caller?: Caller;
  }
}

/** The caller of a route that is not public. @throws NoCallerError when the route let the request in without one. */
export function callerOf(req: { caller?: Caller }): Caller {
  if (!req.caller) throw new NoCallerError('this route needs an authenticated caller');
  return req.caller;
}
