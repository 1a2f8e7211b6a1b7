/**
 * Errors as data: what went wrong, by kind, with a message for people and, for bad input, the fields at fault.
 * Storage, auth, routing and the task gateway raise these; they know no protocol.
 *
 * ERRORS is the one table of every error a client can see, one row each (A2A 1.0 §5.4, §9.5, §10.6, §11.6): its
 * JSON-RPC code, HTTP status, gRPC status and google.rpc.ErrorInfo reason. Every code is written here and nowhere
 * else; the protocol layer renders a row for a binding and a dialect (src/api/a2a/error-forms.ts). It imports nothing,
 * so the workflows, the activities and every room of src/ may read it.
 */

export const A2A_DOMAIN = 'a2a-protocol.org';
/** ErrorInfo domain of Switchboard's own errors (authentication, quotas, outages, …). */
export const SWITCHBOARD_DOMAIN = 'switchboard';

/** The gRPC status codes the table uses (grpc-js `status` names; error-forms.ts turns them into numbers). */
export type GrpcStatusName =
  | 'INVALID_ARGUMENT'
  | 'UNIMPLEMENTED'
  | 'INTERNAL'
  | 'NOT_FOUND'
  | 'FAILED_PRECONDITION'
  | 'RESOURCE_EXHAUSTED'
  | 'UNAVAILABLE'
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED';

export interface ErrorRow {
  /** The JSON-RPC error code. */
  code: number;
  http: number;
  grpc: GrpcStatusName;
  /** google.rpc.ErrorInfo.reason (UPPER_SNAKE). */
  reason: string;
  domain: typeof A2A_DOMAIN | typeof SWITCHBOARD_DOMAIN;
}

const a2a = (code: number, http: number, grpc: GrpcStatusName, reason: string): ErrorRow => ({ code, http, grpc, reason, domain: A2A_DOMAIN });
const own = (code: number, http: number, grpc: GrpcStatusName, reason: string): ErrorRow => ({ code, http, grpc, reason, domain: SWITCHBOARD_DOMAIN });

/** Every error a client can see, by name. */
export const ERRORS = {
  // JSON-RPC's own (§9.5); reasons as the SDK's RequestMalformedError and InternalError.
  ParseError: a2a(-32700, 400, 'INVALID_ARGUMENT', 'PARSE_ERROR'),
  InvalidRequest: a2a(-32600, 400, 'INVALID_ARGUMENT', 'INVALID_REQUEST'),
  MethodNotFound: a2a(-32601, 404, 'UNIMPLEMENTED', 'METHOD_NOT_FOUND'),
  InvalidParams: a2a(-32602, 400, 'INVALID_ARGUMENT', 'INVALID_PARAMS'),
  Internal: own(-32603, 500, 'INTERNAL', 'INTERNAL_ERROR'),
  // A2A's (§5.4).
  TaskNotFound: a2a(-32001, 404, 'NOT_FOUND', 'TASK_NOT_FOUND'),
  TaskNotCancelable: a2a(-32002, 409, 'FAILED_PRECONDITION', 'TASK_NOT_CANCELABLE'),
  PushNotificationNotSupported: a2a(-32003, 400, 'UNIMPLEMENTED', 'PUSH_NOTIFICATION_NOT_SUPPORTED'),
  UnsupportedOperation: a2a(-32004, 400, 'UNIMPLEMENTED', 'UNSUPPORTED_OPERATION'),
  ContentTypeNotSupported: a2a(-32005, 415, 'INVALID_ARGUMENT', 'CONTENT_TYPE_NOT_SUPPORTED'),
  InvalidAgentResponse: a2a(-32006, 502, 'INTERNAL', 'INVALID_AGENT_RESPONSE'),
  VersionNotSupported: a2a(-32009, 400, 'UNIMPLEMENTED', 'VERSION_NOT_SUPPORTED'),
  // Switchboard's own, in JSON-RPC's implementation-defined server-error range (-32000…-32099), clear of A2A's.
  /**
   * The requester's account cannot cover the task's hold. Nothing reached the agent; the message names the hold,
   * the account and what it has available. Fund it, send a new message.
   */
  InsufficientFunds: own(-32050, 402, 'FAILED_PRECONDITION', 'INSUFFICIENT_FUNDS'),
  /**
   * The routing front door (POST /a2a) found no agent for a new task's message: the agent named in
   * `metadata.agentId` is not registered or is down, no live agent has the skill in `metadata.skillId`, or no
   * healthy agent matches the text. Nothing was started.
   */
  Unroutable: own(-32051, 404, 'NOT_FOUND', 'UNROUTABLE'),
  /**
   * A multi-agent job went deeper than SWITCHBOARD_MAX_HOPS (agents calling each other through Switchboard in a
   * loop, most likely); or the parent task named in the call does not exist.
   */
  HopLimit: own(-32052, 400, 'FAILED_PRECONDITION', 'JOB_LINK_REFUSED'),
  /**
   * A new task would pass one of the tenant's quotas (open tasks, new tasks per day; src/core/auth/quotas.ts), or a
   * hub agent sends frames faster than its rate. The message names the quota and its value. Nothing was started.
   */
  QuotaExceeded: own(-32053, 429, 'RESOURCE_EXHAUSTED', 'QUOTA_EXCEEDED'),
  /**
   * A dependency (PostgreSQL or Temporal) is down, so the call was refused before it did anything; the message
   * names the dependency. Sent with HTTP 503 and Retry-After: retry the same call (the same messageId) later and it
   * is answered as if the outage never happened.
   */
  Unavailable: own(-32054, 503, 'UNAVAILABLE', 'UNAVAILABLE'),
  Unauthenticated: own(-32055, 401, 'UNAUTHENTICATED', 'UNAUTHENTICATED'),
  PermissionDenied: own(-32056, 403, 'PERMISSION_DENIED', 'PERMISSION_DENIED'),
  RateLimited: own(-32057, 429, 'RESOURCE_EXHAUSTED', 'RATE_LIMITED'),
  /** The URL names no endpoint: an agent not registered here, or no method at that path. */
  NoSuchEndpoint: own(-32058, 404, 'NOT_FOUND', 'ENDPOINT_NOT_FOUND'),
  BodyTooLarge: own(-32059, 413, 'RESOURCE_EXHAUSTED', 'BODY_TOO_LARGE'),
  /**
   * An enforced governance policy (NANDA `policy.*`, src/core/nanda/policies.ts) denies the agent the task would go to.
   * The message names the policy and the rules broken. Nothing was started.
   */
  PolicyDenied: own(-32060, 403, 'PERMISSION_DENIED', 'POLICY_DENIED'),
} as const satisfies Record<string, ErrorRow>;

export type ErrorName = keyof typeof ERRORS;

/**
 * The MCP server's session errors (src/api/routes/mcp.ts), as the MCP SDK's own Streamable HTTP transport answers them:
 * codes of MCP's, in JSON-RPC's server range, which A2A also uses for its own (-32001 is A2A's TaskNotFound). They
 * travel on /mcp only, never on an A2A endpoint.
 */
export const MCP_SESSION_ERRORS = {
  /** A request other than initialize without an Mcp-Session-Id (HTTP 400). */
  NoSession: -32000,
  /** An Mcp-Session-Id this process does not hold for this key (HTTP 404). */
  SessionNotFound: -32001,
} as const;

/** The kinds of error storage, auth and routing raise (each a row of ERRORS). */
export type TaskErrorKind =
  | 'InvalidRequest'
  | 'InvalidParams'
  | 'Internal'
  | 'TaskNotFound'
  | 'TaskNotCancelable'
  | 'PushNotificationNotSupported'
  | 'UnsupportedOperation'
  | 'VersionNotSupported'
  | 'InsufficientFunds'
  | 'Unroutable'
  | 'HopLimit'
  | 'QuotaExceeded'
  | 'Unavailable'
  | 'PolicyDenied';

/** A field a request got wrong (google.rpc.BadRequest's FieldViolation). */
export interface FieldViolation {
  field: string;
  description: string;
}

export class TaskError extends Error {
  constructor(
    readonly kind: TaskErrorKind,
    message: string,
    /** The fields at fault (InvalidParams). */
    readonly violations?: FieldViolation[],
  ) {
    super(message);
    this.name = `TaskError(${kind})`;
  }
}

/** An agent's own JSON-RPC error, passed to the client unchanged (code and message). */
export class AgentRpcFailure extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** Raises an error of `kind`. */
export function taskError(kind: TaskErrorKind, message: string, violations?: FieldViolation[]): TaskError {
  return new TaskError(kind, message, violations);
}

/** The workflow's failure types (task/messages.ts FailureTypes) as the errors a client sees. */
export const WORKFLOW_FAILURE_KINDS: Record<string, TaskErrorKind> = {
  TaskTerminal: 'UnsupportedOperation', // 1.0 §3.1 / TCK CORE-SEND-002
  TaskBusy: 'UnsupportedOperation',
  ContextMismatch: 'InvalidParams', // TCK CORE-MULTI-006, as a2a-js does
  TaskNotCancelable: 'TaskNotCancelable',
  InsufficientFunds: 'InsufficientFunds',
};
