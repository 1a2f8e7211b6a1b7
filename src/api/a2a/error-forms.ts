/**
 * Every error a client can see, in each binding's own form (A2A 1.0 §5.4, §9.5, §10.6, §11.6), rendered from its
 * row of the one table (task/errors.ts ERRORS): the JSON-RPC error object in each dialect, the HTTP+JSON body
 * (AIP-193) and the gRPC status, each with the google.rpc.ErrorInfo that names it. Errors are data (a name and a
 * message); the transport decides how they look.
 */
import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { status as GrpcStatus, Metadata } from '@grpc/grpc-js';
import type { AuthFailure } from '../../core/auth/plugin';
import { ERRORS, type ErrorName, type ErrorRow } from '../../../task/errors';


const BY_CODE = new Map<number, ErrorName>();
for (const [name, form] of Object.entries(ERRORS) as [ErrorName, ErrorRow][]) if (!BY_CODE.has(form.code)) BY_CODE.set(form.code, name);

/** The error named by a JSON-RPC code (undefined: a code of nobody's table, e.g. an agent's own). */
export function errorNameOf(code: number): ErrorName | undefined {
  return BY_CODE.get(code);
}

/**
 * Why a call was refused before it ran, for the transport to show as it shows such refusals (JSON-RPC: HTTP 403,
 * 404, 429, 503; REST and gRPC by the error's name in the one table): the role may not call the method, the
 * endpoint names no agent, a stream cap is reached, a dependency is down.
 */
export type Refused = 'permission' | 'no-endpoint' | 'busy' | 'unavailable';

/**
 * The error an RPC core answer stands for on HTTP+JSON and gRPC, which show errors by name: its code's row; a
 * refusal for the caller's role is PermissionDenied whatever code its dialect gave it (a NANDA action's -32600); a
 * code no table knows (an agent's own) is Internal unless the refusal names it.
 */
export function bindingErrorName(code: number, refused?: Refused): ErrorName {
  if (refused === 'permission') return 'PermissionDenied';
  return errorNameOf(code) ?? (refused === 'busy' ? 'RateLimited' : refused === 'no-endpoint' ? 'NoSuchEndpoint' : 'Internal');
}

/** What a 1.0 error's ErrorInfo said (e.g. the roles a method needs): its metadata, kept by the other bindings. */
export function errorInfoMetadata(data: unknown): Record<string, string> | undefined {
  return Array.isArray(data) ? (data as { metadata?: Record<string, string> }[]).find((d) => d?.metadata)?.metadata : undefined;
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
  const f = ERRORS[name];
  return { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: f.reason, domain: f.domain, ...(metadata ? { metadata } : {}) };
}

/** The JSON-RPC error object: 1.0 carries ErrorInfo in `data` (an array of Any, §9.5); 0.3 keeps `data` free-form. */
export function jsonRpcErrorOf(r: Refusal, dialect: '1.0' | '0.3' = '1.0'): { code: number; message: string; data?: unknown } {
  return { code: ERRORS[r.name].code, message: r.message, ...(dialect === '1.0' ? { data: [errorInfo(r.name, r.metadata)] } : r.metadata ? { data: r.metadata } : {}) };
}

/** A JSON-RPC error response (id null: a refusal made before the request was read). */
export function jsonRpcRefusal(r: Refusal, dialect: '1.0' | '0.3' = '1.0', id: string | number | null = null): Record<string, unknown> {
  return { jsonrpc: '2.0', id, error: jsonRpcErrorOf(r, dialect) };
}

/** The HTTP+JSON form (AIP-193): google.rpc.Status with ErrorInfo in `details`. */
export function restRefusal(r: Refusal): { status: number; body: Record<string, unknown> } {
  const f = ERRORS[r.name];
  return { status: f.http, body: { error: { code: f.http, status: f.grpc, message: r.message, details: [errorInfo(r.name, r.metadata)] } } };
}

/** The gRPC status code of an error (the table names it). */
export function grpcStatusOf(name: ErrorName): GrpcStatus {
  return GrpcStatus[ERRORS[name].grpc];
}

/** The gRPC form: the status, its message, and google.rpc.Status with ErrorInfo in `grpc-status-details-bin`. */
export function grpcRefusal(r: Refusal): { code: GrpcStatus; details: string; metadata: Metadata } {
  const f = ERRORS[r.name];
  const metadata = new Metadata();
  metadata.set('grpc-status-details-bin', statusDetails(grpcStatusOf(r.name), r.message, f.reason, f.domain));
  if (r.retryAfterS !== undefined) metadata.set('retry-after', String(r.retryAfterS));
  return { code: grpcStatusOf(r.name), details: r.message, metadata };
}

/** google.rpc.Status { code = 1, message = 2, details = 3 (Any { type_url = 1, value = 2 }) } with one ErrorInfo { reason = 1, domain = 2 }. */
function statusDetails(code: number, message: string, reason: string, domain: string): Buffer {
  const info = new BinaryWriter().uint32(10).string(reason).uint32(18).string(domain).finish();
  const any = new BinaryWriter().uint32(10).string('type.googleapis.com/google.rpc.ErrorInfo').uint32(18).bytes(info).finish();
  return Buffer.from(new BinaryWriter().uint32(8).int32(code).uint32(18).string(message).uint32(26).bytes(any).finish());
}

const AUTH_REFUSALS = { 401: 'Unauthenticated', 403: 'PermissionDenied', 404: 'NoSuchEndpoint', 503: 'Unavailable' } as const;

/** An authentication failure (src/core/auth/plugin.ts) as the refusal every binding renders. */
export function refusalOf(err: AuthFailure): Refusal {
  const metadata = Object.fromEntries(Object.entries(err.extra).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : String(v)]));
  return { name: AUTH_REFUSALS[err.status], message: err.error, extra: err.extra, metadata, ...(err.status === 503 ? { retryAfterS: 5 } : {}) };
}
