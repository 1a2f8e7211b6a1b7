/**
 * The errors a request handler raises, as @a2a-js/sdk error classes so that the SDK's 1.0 and 0.3 transport handlers
 * render them in the caller's dialect (1.0 adds google.rpc.ErrorInfo data). Their codes are written once, in the one
 * table of every error a client can see (task/errors.ts ERRORS).
 */
import {
  JsonRpcInvalidAgentResponseError,
  JsonRpcPushNotificationNotSupportedError,
  JsonRpcRequestMalformedError,
  JsonRpcTaskNotCancelableError,
  JsonRpcTaskNotFoundError,
  JsonRpcTransportError,
  JsonRpcUnsupportedOperationError,
  JsonRpcVersionNotSupportedError,
  fromJsonRpcErrorResponse,
} from '@a2a-js/sdk/errors';
import { AgentRpcFailure, ERRORS, type ErrorName, TaskError } from '../../../task/errors';

/** How each error a handler may raise is made: the SDK class that renders it in each dialect, given its code. */
type Make = (message: string, code: number, data?: Record<string, unknown>[]) => Error;
const malformed: Make = (message, envelopeCode) => new JsonRpcRequestMalformedError({ message, envelopeCode });
const transport: Make = (message, code) => new JsonRpcTransportError({ jsonrpc: '2.0', id: null, error: { code, message } });

/** The SDK class of each error a handler may raise; its code is its row's in the one table (task/errors.ts). */
const MAKERS = {
  ParseError: malformed,
  InvalidRequest: malformed,
  MethodNotFound: (message, envelopeCode) => new JsonRpcUnsupportedOperationError({ message, envelopeCode }),
  InvalidParams: (message, envelopeCode, data) => new JsonRpcRequestMalformedError({ message, envelopeCode, data }),
  Internal: transport,
  TaskNotFound: (message) => new JsonRpcTaskNotFoundError({ message }),
  TaskNotCancelable: (message) => new JsonRpcTaskNotCancelableError({ message }),
  PushNotificationNotSupported: (message) => new JsonRpcPushNotificationNotSupportedError({ message }),
  UnsupportedOperation: (message) => new JsonRpcUnsupportedOperationError({ message }),
  InvalidAgentResponse: (message) => new JsonRpcInvalidAgentResponseError({ message }),
  VersionNotSupported: (message) => new JsonRpcVersionNotSupportedError({ message }),
  // Switchboard's own (the table says what each means): the SDK has no class for them, so its generic one.
  InsufficientFunds: transport,
  HopLimit: transport,
  Unroutable: transport,
  Unavailable: transport,
  QuotaExceeded: transport,
  PolicyDenied: transport,
} as const satisfies Partial<Record<ErrorName, Make>>;

export type A2AErrorName = keyof typeof MAKERS;

/** The errors a handler may raise, by name: each one's code (from the one table) and how it is made. */
export const A2A_ERRORS = Object.fromEntries(
  (Object.keys(MAKERS) as A2AErrorName[]).map((name) => {
    const code = ERRORS[name].code;
    return [name, { code, make: (m: string, data?: Record<string, unknown>[]) => MAKERS[name](m, code, data) }];
  }),
) as { readonly [N in A2AErrorName]: { readonly code: (typeof ERRORS)[N]['code']; make(message: string, data?: Record<string, unknown>[]): Error } };

/** Raises the named A2A error; `data` is only used by InvalidParams (the field violations). */
export function a2aError(name: A2AErrorName, message: string, data?: Record<string, unknown>[]): Error {
  return A2A_ERRORS[name].make(message, data);
}

/**
 * An agent's own JSON-RPC error, passed to the client unchanged (code and message): the SDK's class for the code
 * when A2A names it, so each dialect renders it as it renders that error, else the code as is.
 */
export function agentRpcError(code: number, message: string): Error {
  return fromJsonRpcErrorResponse({ jsonrpc: '2.0', id: null, error: { code, message } });
}

/**
 * An error raised below the protocol layer (task/errors.ts: a kind and a message; an agent's own JSON-RPC error) as
 * the SDK error that renders it in the caller's dialect; anything else as it is.
 */
export function protocolError(err: unknown): unknown {
  if (err instanceof TaskError) return a2aError(err.kind, err.message, err.violations as unknown as Record<string, unknown>[] | undefined);
  if (err instanceof AgentRpcFailure) return agentRpcError(err.code, err.message);
  return err;
}

/** The JSON-RPC code an error stands for (a raised A2A or task error), if it stands for one. */
export function errorCodeOf(err: unknown): number | undefined {
  if (err instanceof TaskError) return A2A_ERRORS[err.kind].code;
  if (err instanceof AgentRpcFailure) return err.code;
  return (err as { envelopeCode?: number } | undefined)?.envelopeCode;
}
