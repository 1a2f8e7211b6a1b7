/** JSON-RPC error responses as each dialect renders them (the RPC core's, and its transports'). */
import { toJsonRpcError } from '@a2a-js/sdk/errors';
import { A2A_ERRORS, protocolError } from './errors';
import { z } from 'zod';
import { JsonLimitError, parseJson } from '../../core/http/json-guard';
import { EnvelopeSchema } from './schemas';

/** One JSON-RPC response, as a stream event or an answer. */
export type RpcEvent = { jsonrpc: '2.0'; id: string | number | null; result?: unknown; error?: unknown };

/** A JSON-RPC error response. */
export function envelope(id: string | number | null, error: { code: number; message: string; data?: unknown }): RpcEvent {
  return { jsonrpc: '2.0' as const, id, error };
}

/**
 * 1.0 errors as the SDK renders them (a google.rpc.ErrorInfo in `data`), plus, for invalid params, the field
 * violations as a google.rpc.BadRequest (§1.9): the SDK renderer drops an error's own `data`.
 */
export function v1Error(raised: unknown): { code: number; message: string; data?: unknown[] } {
  const err = protocolError(raised);
  const out = toJsonRpcError(err);
  const violations = (err as { data?: unknown }).data;
  if (out.code !== A2A_ERRORS.InvalidParams.code || !Array.isArray(violations) || violations.length === 0) return out;
  return { ...out, data: [...(out.data ?? []), { '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: violations }] };
}

/** 0.3 errors carry no google.rpc ErrorInfo array; `data` stays free-form (field violations for -32602). */
export function legacyError(raised: unknown): { code: number; message: string; data?: unknown } {
  const e = protocolError(raised) as { envelopeCode?: number; message?: string; data?: unknown };
  return { code: e.envelopeCode ?? A2A_ERRORS.Internal.code, message: e.message ?? 'Internal error', ...(e.data !== undefined ? { data: e.data } : {}) };
}

/** Echo the request id in an error when it is a valid one (JSON-RPC 2.0 §5: null when it cannot be read). */
export function idOf(body: unknown): string | number | null {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)) ? id : null;
}

/**
 * The error for a body or frame that could not be read (JSON-RPC 2.0 §5.1): not JSON, or not UTF-8 (RFC 8259
 * §8.1: JSON text between systems is UTF-8), is -32700; JSON refused by the peer-input guard
 * (src/core/http/json-guard.ts: nested too deep, or too large) is valid JSON that is no Request this server reads:
 * -32600. The message says which limit.
 */
export function unreadableError(err: unknown): { code: number; message: string } {
  if (err instanceof JsonLimitError && err.limit !== 'encoding') return { code: A2A_ERRORS.InvalidRequest.code, message: `Invalid Request: ${err.message}` };
  return { code: A2A_ERRORS.ParseError.code, message: `Parse error: ${(err as Error).message}` };
}

/** A JSON-RPC request as read from a body: its id, method and params (params parsed, not yet validated). */
export interface RpcEnvelope {
  id: string | number | null;
  method: string;
  params: unknown;
}

/**
 * Reads a JSON-RPC request from a body, once (JSON-RPC 2.0 §4): the envelope, or the error that answers a body that
 * is none — unreadable (-32700, or -32600 past the peer-input guard's limits) or not a Request (-32600).
 */
export function readEnvelope(body: string | Uint8Array): RpcEnvelope | { id: string | number | null; error: { code: number; message: string } } {
  let parsed: unknown;
  try {
    parsed = parseJson(body);
  } catch (err) {
    return { id: null, error: unreadableError(err) };
  }
  const rpc = parsed as { jsonrpc?: unknown; method?: unknown; id?: unknown; params?: unknown } | null;
  // The common case is checked by hand; anything else gets the schema's message naming what is wrong.
  const idOk = rpc?.id === undefined || rpc.id === null || (typeof rpc.id === 'string' && rpc.id.length <= 256) || (typeof rpc.id === 'number' && Number.isInteger(rpc.id));
  const paramsOk = rpc?.params === undefined || (typeof rpc.params === 'object' && rpc.params !== null);
  if (rpc?.jsonrpc === '2.0' && typeof rpc.method === 'string' && rpc.method.length >= 1 && rpc.method.length <= 128 && idOk && paramsOk) {
    return { id: (rpc.id ?? null) as string | number | null, method: rpc.method, params: rpc.params };
  }
  const checked = EnvelopeSchema.safeParse(parsed);
  if (checked.success) return { id: checked.data.id ?? null, method: checked.data.method, params: checked.data.params };
  return { id: idOf(parsed), error: { code: A2A_ERRORS.InvalidRequest.code, message: `Invalid JSON-RPC request: ${z.prettifyError(checked.error)}` } };
}
