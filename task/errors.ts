/**
 * Errors as data: what went wrong, by kind, with a message for people and, for bad input, the fields at fault.
 * Storage, auth, routing and the task gateway raise these; they know no protocol. The protocol layer decides how
 * each kind looks to a client (src/a2a/error-forms.ts: the JSON-RPC code, the HTTP status, the gRPC status).
 */

/** The kinds of error a client can be told of (each has one row in src/a2a/error-forms.ts). */
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
