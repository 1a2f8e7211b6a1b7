/**
 * The one table that maps every error a client can see to its JSON-RPC code (A2A §5.4, §9.5;
 * reference/a2a-protocol.md §1.9). Errors are raised as @a2a-js/sdk error classes so that the SDK's
 * 1.0 and 0.3 transport handlers render them in the caller's dialect (1.0 adds google.rpc.ErrorInfo data).
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
import { AgentRpcFailure, TaskError } from '../../task/errors';

export const A2A_ERRORS = {
  ParseError: { code: -32700, make: (m: string) => new JsonRpcRequestMalformedError({ message: m, envelopeCode: -32700 }) },
  InvalidRequest: { code: -32600, make: (m: string) => new JsonRpcRequestMalformedError({ message: m, envelopeCode: -32600 }) },
  MethodNotFound: { code: -32601, make: (m: string) => new JsonRpcUnsupportedOperationError({ message: m, envelopeCode: -32601 }) },
  InvalidParams: {
    code: -32602,
    make: (m: string, data?: Record<string, unknown>[]) => new JsonRpcRequestMalformedError({ message: m, envelopeCode: -32602, data }),
  },
  Internal: { code: -32603, make: (m: string) => new JsonRpcTransportError({ jsonrpc: '2.0', id: null, error: { code: -32603, message: m } }) },
  TaskNotFound: { code: -32001, make: (m: string) => new JsonRpcTaskNotFoundError({ message: m }) },
  TaskNotCancelable: { code: -32002, make: (m: string) => new JsonRpcTaskNotCancelableError({ message: m }) },
  PushNotificationNotSupported: { code: -32003, make: (m: string) => new JsonRpcPushNotificationNotSupportedError({ message: m }) },
  UnsupportedOperation: { code: -32004, make: (m: string) => new JsonRpcUnsupportedOperationError({ message: m }) },
  InvalidAgentResponse: { code: -32006, make: (m: string) => new JsonRpcInvalidAgentResponseError({ message: m }) },
  VersionNotSupported: { code: -32009, make: (m: string) => new JsonRpcVersionNotSupportedError({ message: m }) },
  /**
   * Switchboard's own code, in JSON-RPC's implementation-defined server-error range (-32000…-32099), clear of
   * the codes A2A assigns (-32001…-32009): the requester's account cannot cover the task's hold. Nothing reached
   * the agent; the message names the hold, the account and what it has available. Fund it, send a new message.
   */
  InsufficientFunds: { code: -32050, make: (m: string) => new JsonRpcTransportError({ jsonrpc: '2.0', id: null, error: { code: -32050, message: m } }) },
  /**
   * Switchboard's own code: a multi-agent job went deeper than SWITCHBOARD_MAX_HOPS (agents calling each other
   * through Switchboard in a loop, most likely); or the parent task named in the call does not exist.
   */
  HopLimit: { code: -32052, make: (m: string) => new JsonRpcTransportError({ jsonrpc: '2.0', id: null, error: { code: -32052, message: m } }) },
  /**
   * Switchboard's own code (the same range as InsufficientFunds): the routing front door (POST /a2a) found no
   * agent for a new task's message: the agent named in `metadata.agentId` is not registered or is down, no live
   * agent has the skill in `metadata.skillId`, or no healthy agent matches the text. Nothing was started.
   */
  Unroutable: { code: -32051, make: (m: string) => new JsonRpcTransportError({ jsonrpc: '2.0', id: null, error: { code: -32051, message: m } }) },
  /**
   * Switchboard's own code (the same range): a new task would pass one of the tenant's quotas (open tasks, new
   * tasks per day; src/auth/quotas.ts). The message names the quota and its value. Nothing was started.
   */
  /**
   * Switchboard's own code: a dependency (PostgreSQL or Temporal) is down, so the call was refused before it did
   * anything; the message names the dependency. Sent with HTTP 503 and Retry-After: retry the same call (the same
   * messageId) later and it is answered as if the outage never happened.
   */
  Unavailable: { code: -32054, make: (m: string) => new JsonRpcTransportError({ jsonrpc: '2.0', id: null, error: { code: -32054, message: m } }) },
  QuotaExceeded: { code: -32053, make: (m: string) => new JsonRpcTransportError({ jsonrpc: '2.0', id: null, error: { code: -32053, message: m } }) },
  /**
   * Switchboard's own code (the same range): an enforced governance policy (NANDA `policy.*`, src/nanda/policies.ts)
   * denies the agent the task would go to. The message names the policy and the rules broken. Nothing was started.
   */
  PolicyDenied: { code: -32060, make: (m: string) => new JsonRpcTransportError({ jsonrpc: '2.0', id: null, error: { code: -32060, message: m } }) },
} as const;

export type A2AErrorName = keyof typeof A2A_ERRORS;

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
