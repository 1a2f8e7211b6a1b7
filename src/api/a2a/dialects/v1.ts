/** A2A 1.0: PascalCase methods, ProtoJSON. Switchboard's own form: its calls run as they come. */
import { PUSH_METHOD_PARAMS } from '../../../core/push/params';
import { v1Error } from '../rpc-errors';
import * as S from '../schemas';
import type { DialectDef, MethodSpec } from './dialect';

export const NO_EXTENDED_CARD = { unsupported: 'UnsupportedOperation', why: 'this gateway does not serve extended agent cards' } as const;

/** Each method runs as itself, its params validated by `schema`. */
export const asIs = (schemas: Record<string, import('zod').ZodType>): Record<string, MethodSpec> =>
  Object.fromEntries(Object.entries(schemas).map(([method, params]) => [method, { params, runs: method }]));

export const V1: DialectDef = {
  name: '1.0',
  methods: {
    ...asIs({
      SendMessage: S.SendMessageParams,
      GetTask: S.GetTaskParams,
      CancelTask: S.CancelTaskParams,
      ListTasks: S.ListTasksParams,
      SendStreamingMessage: S.SendMessageParams,
      SubscribeToTask: S.SubscribeToTaskParams,
      ...PUSH_METHOD_PARAMS['1.0'],
    }),
    GetExtendedAgentCard: NO_EXTENDED_CARD,
  },
  renderError: v1Error,
  // 1.0 has no `final`: a stream ends by closing.
  streamRenderer: () => (result) => result,
};
