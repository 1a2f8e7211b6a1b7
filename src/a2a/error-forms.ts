/**
 * Every error a client can see, in each binding's own form (A2A 1.0 §5.4, §9.5, §10.6, §11.6): the JSON-RPC
 * code, the HTTP status and the gRPC status of each, and the google.rpc.ErrorInfo that names it. Errors are data
 * (a name and a message); the transport decides how they look. This is the table for refusals made before or
 * beside the RPC core (authentication, rate limits, body limits, routing, outages, the protocol version and the
 * content type) and for the core's own errors on the HTTP+JSON and gRPC bindings.
 */
import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { status as GrpcStatus, Metadata } from '@grpc/grpc-js';
import type { AuthFailure } from '../auth/plugin';

export const A2A_DOMAIN = 'a2a-protocol.org';
/** ErrorInfo domain of Switchboard's own errors (authentication, quotas, outages, …). */
export const SWITCHBOARD_DOMAIN = 'switchboard';

export interface ErrorForm {
  /** The JSON-RPC error code. */
  code: number;
  http: number;
  grpc: GrpcStatus;
  /** google.rpc.ErrorInfo.reason (UPPER_SNAKE). */
  reason: string;
  domain: typeof A2A_DOMAIN | typeof SWITCHBOARD_DOMAIN;
}

const a2a = (code: number, http: number, grpc: GrpcStatus, reason: string): ErrorForm => ({ code, http, grpc, reason, domain: A2A_DOMAIN });
const own = (code: number, http: number, grpc: GrpcStatus, reason: string): ErrorForm => ({ code, http, grpc, reason, domain: SWITCHBOARD_DOMAIN });

/** By error name (src/a2a/errors.ts A2A_ERRORS, and the refusals below). */
export const ERROR_FORMS = {
  // JSON-RPC's own (§9.5); reasons as the SDK's RequestMalformedError and InternalError.
  ParseError: a2a(-32700, 400, GrpcStatus.INVALID_ARGUMENT, 'PARSE_ERROR'),
  InvalidRequest: a2a(-32600, 400, GrpcStatus.INVALID_ARGUMENT, 'INVALID_REQUEST'),
  MethodNotFound: a2a(-32601, 404, GrpcStatus.UNIMPLEMENTED, 'METHOD_NOT_FOUND'),
  InvalidParams: a2a(-32602, 400, GrpcStatus.INVALID_ARGUMENT, 'INVALID_PARAMS'),
  Internal: own(-32603, 500, GrpcStatus.INTERNAL, 'INTERNAL_ERROR'),
  // A2A's (§5.4).
  TaskNotFound: a2a(-32001, 404, GrpcStatus.NOT_FOUND, 'TASK_NOT_FOUND'),
  TaskNotCancelable: a2a(-32002, 409, GrpcStatus.FAILED_PRECONDITION, 'TASK_NOT_CANCELABLE'),
  PushNotificationNotSupported: a2a(-32003, 400, GrpcStatus.UNIMPLEMENTED, 'PUSH_NOTIFICATION_NOT_SUPPORTED'),
  UnsupportedOperation: a2a(-32004, 400, GrpcStatus.UNIMPLEMENTED, 'UNSUPPORTED_OPERATION'),
  ContentTypeNotSupported: a2a(-32005, 415, GrpcStatus.INVALID_ARGUMENT, 'CONTENT_TYPE_NOT_SUPPORTED'),
  InvalidAgentResponse: a2a(-32006, 502, GrpcStatus.INTERNAL, 'INVALID_AGENT_RESPONSE'),
  VersionNotSupported: a2a(-32009, 400, GrpcStatus.UNIMPLEMENTED, 'VERSION_NOT_SUPPORTED'),
  // Switchboard's own, in JSON-RPC's server-error range (-32000…-32099), clear of A2A's.
  InsufficientFunds: own(-32050, 402, GrpcStatus.FAILED_PRECONDITION, 'INSUFFICIENT_FUNDS'),
  Unroutable: own(-32051, 404, GrpcStatus.NOT_FOUND, 'UNROUTABLE'),
  HopLimit: own(-32052, 400, GrpcStatus.FAILED_PRECONDITION, 'JOB_LINK_REFUSED'),
  QuotaExceeded: own(-32053, 429, GrpcStatus.RESOURCE_EXHAUSTED, 'QUOTA_EXCEEDED'),
  Unavailable: own(-32054, 503, GrpcStatus.UNAVAILABLE, 'UNAVAILABLE'),
  Unauthenticated: own(-32055, 401, GrpcStatus.UNAUTHENTICATED, 'UNAUTHENTICATED'),
  PermissionDenied: own(-32056, 403, GrpcStatus.PERMISSION_DENIED, 'PERMISSION_DENIED'),
  RateLimited: own(-32057, 429, GrpcStatus.RESOURCE_EXHAUSTED, 'RATE_LIMITED'),
  /** The URL names no endpoint: an agent not registered here, or no method at that path. */
  NoSuchEndpoint: own(-32058, 404, GrpcStatus.NOT_FOUND, 'ENDPOINT_NOT_FOUND'),
  BodyTooLarge: own(-32059, 413, GrpcStatus.RESOURCE_EXHAUSTED, 'BODY_TOO_LARGE'),
  PolicyDenied: own(-32060, 403, GrpcStatus.PERMISSION_DENIED, 'POLICY_DENIED'),
} as const satisfies Record<string, ErrorForm>;

export type ErrorName = keyof typeof ERROR_FORMS;

const BY_CODE = new Map<number, ErrorName>();
for (const [name, form] of Object.entries(ERROR_FORMS) as [ErrorName, ErrorForm][]) if (!BY_CODE.has(form.code)) BY_CODE.set(form.code, name);

/** The error named by a JSON-RPC code (undefined: a code of nobody's table, e.g. an agent's own). */
export function errorNameOf(code: number): ErrorName | undefined {
  return BY_CODE.get(code);
}

/** A refusal: an error by name, its message, and the seconds to wait before retrying (429, 503). */
export interface Refusal {
  name: ErrorName;
  message: string;
  retryAfterS?: number;
  /** Extra fields for the JSON answer of Switchboard's own (non-A2A) routes, e.g. `requiredRoles`. */
  extra?: Record<string, unknown>;
  /** The same facts for A2A endpoints, as the ErrorInfo's metadata (string values, e.g. `requiredRoles: "admin,client"`). */
  metadata?: Record<string, string>;
}

export function errorInfo(name: ErrorName, metadata?: Record<string, string>): Record<string, unknown> {
  const f = ERROR_FORMS[name];
  return { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: f.reason, domain: f.domain, ...(metadata ? { metadata } : {}) };
}

/** The JSON-RPC error object: 1.0 carries ErrorInfo in `data` (an array of Any, §9.5); 0.3 keeps `data` free-form. */
export function jsonRpcErrorOf(r: Refusal, dialect: '1.0' | '0.3' = '1.0'): { code: number; message: string; data?: unknown } {
  return { code: ERROR_FORMS[r.name].code, message: r.message, ...(dialect === '1.0' ? { data: [errorInfo(r.name, r.metadata)] } : r.metadata ? { data: r.metadata } : {}) };
}

/** A JSON-RPC error response (id null: a refusal made before the request was read). */
export function jsonRpcRefusal(r: Refusal, dialect: '1.0' | '0.3' = '1.0', id: string | number | null = null): Record<string, unknown> {
  return { jsonrpc: '2.0', id, error: jsonRpcErrorOf(r, dialect) };
}

/** The HTTP+JSON form (AIP-193): google.rpc.Status with ErrorInfo in `details`. */
export function restRefusal(r: Refusal): { status: number; body: Record<string, unknown> } {
  const f = ERROR_FORMS[r.name];
  return { status: f.http, body: { error: { code: f.http, status: GrpcStatus[f.grpc], message: r.message, details: [errorInfo(r.name, r.metadata)] } } };
}

/** The gRPC form: the status, its message, and google.rpc.Status with ErrorInfo in `grpc-status-details-bin`. */
export function grpcRefusal(r: Refusal): { code: GrpcStatus; details: string; metadata: Metadata } {
  const f = ERROR_FORMS[r.name];
  const metadata = new Metadata();
  metadata.set('grpc-status-details-bin', statusDetails(f.grpc, r.message, f.reason, f.domain));
  if (r.retryAfterS !== undefined) metadata.set('retry-after', String(r.retryAfterS));
  return { code: f.grpc, details: r.message, metadata };
}

/** google.rpc.Status { code = 1, message = 2, details = 3 (Any { type_url = 1, value = 2 }) } with one ErrorInfo { reason = 1, domain = 2 }. */
function statusDetails(code: number, message: string, reason: string, domain: string): Buffer {
  const info = new BinaryWriter().uint32(10).string(reason).uint32(18).string(domain).finish();
  const any = new BinaryWriter().uint32(10).string('type.googleapis.com/google.rpc.ErrorInfo').uint32(18).bytes(info).finish();
  return Buffer.from(new BinaryWriter().uint32(8).int32(code).uint32(18).string(message).uint32(26).bytes(any).finish());
}

const AUTH_REFUSALS = { 401: 'Unauthenticated', 403: 'PermissionDenied', 404: 'NoSuchEndpoint', 503: 'Unavailable' } as const;

/** An authentication failure (src/auth/plugin.ts) as the refusal every binding renders. */
export function refusalOf(err: AuthFailure): Refusal {
  const metadata = Object.fromEntries(Object.entries(err.extra).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : String(v)]));
  return { name: AUTH_REFUSALS[err.status], message: err.error, extra: err.extra, metadata, ...(err.status === 503 ? { retryAfterS: 5 } : {}) };
}
