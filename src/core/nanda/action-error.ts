/**
 * The errors an action answers with, with the NANDA seed's JSON-RPC codes (-32600, -32601, -32602): the JSON-RPC
 * standard's own, which the seed's nodes answer with whatever the transport (src/api/a2a/nanda-actions.ts).
 */
import { ERRORS } from '../../../task/errors';

const INVALID_PARAMS = ERRORS.InvalidParams.code;

export class ActionError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** -32602 naming the field: missing, of the wrong type, or naming something the tenant does not have. */
export function invalidField(action: string, field: string, why: string): ActionError {
  return new ActionError(INVALID_PARAMS, `Invalid params for ${action}: ${field} ${why}`, { field });
}
