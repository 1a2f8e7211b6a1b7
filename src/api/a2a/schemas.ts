/**
 * What the edges accept, validated with zod: JSON-RPC envelopes, the method params of 1.0 and 0.3 (0.1's and
 * NEXUS's are in their files in ./dialects), and the registration body. The shapes validated are the wire types of ./wire.ts (a compile-time check below keeps
 * the two in step).
 */
import { z } from 'zod';
import { TASK_STATES, type WireMessage, type WirePart } from '../../../task/wire';


const metadata = z.record(z.string(), z.unknown());
const nonEmpty = z.string().min(1).max(1024);

// §1.4: a 1.0 part carries exactly one of text | raw | url | data.
export const PartSchema = z
  .object({
    text: z.string().optional(),
    raw: z.string().optional(),
    url: z.string().optional(),
    data: z.unknown().optional(),
    mediaType: z.string().optional(),
    filename: z.string().optional(),
    metadata: metadata.optional(),
  })
  .refine((p) => ['text', 'raw', 'url', 'data'].filter((k) => (p as Record<string, unknown>)[k] !== undefined).length === 1, {
    message: 'a part must carry exactly one of text, raw, url or data',
  });

export const MessageSchema = z.object({
  messageId: nonEmpty,
  contextId: z.string().max(1024).optional(),
  taskId: z.string().max(1024).optional(),
  role: z.enum(['ROLE_USER', 'ROLE_AGENT']),
  parts: z.array(PartSchema).min(1),
  metadata: metadata.optional(),
  extensions: z.array(z.string()).optional(),
  referenceTaskIds: z.array(z.string()).optional(),
});
// The validated shapes are exactly the wire types: a change to one without the other does not compile.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const SCHEMAS_MATCH_WIRE: [Same<z.infer<typeof PartSchema>, WirePart>, Same<z.infer<typeof MessageSchema>, WireMessage>] = [true, true];

const historyLength = z.number().int().min(0).max(10_000);
const tenant = z.string().max(256).optional();

// ---- 1.0 method params (PascalCase methods) ----
export const SendMessageParams = z.object({
  tenant,
  message: MessageSchema,
  configuration: z
    .object({
      acceptedOutputModes: z.array(z.string()).optional(),
      historyLength: historyLength.optional(),
      returnImmediately: z.boolean().optional(),
      taskPushNotificationConfig: z.unknown().optional(),
    })
    .optional(),
  metadata: metadata.optional(),
});
export const GetTaskParams = z.object({ tenant, id: nonEmpty, historyLength: historyLength.optional() });
export const CancelTaskParams = z.object({ tenant, id: nonEmpty, metadata: metadata.optional() });
export const SubscribeToTaskParams = z.object({ tenant, id: nonEmpty });
export const ListTasksParams = z.object({
  tenant,
  contextId: z.string().max(1024).optional(),
  status: z.enum(TASK_STATES).optional(),
  pageSize: z.number().int().min(1).max(100).optional(),
  pageToken: z.string().max(512).optional(),
  historyLength: historyLength.optional(),
  // ISO 8601 that PostgreSQL's timestamptz also takes: it refuses year 0000 and offsets past ±15:59 (issue 32).
  statusTimestampAfter: z.iso
    .datetime({ offset: true })
    .refine((t) => !t.startsWith('0000') && !/[+-](?:1[6-9]|[2-9]\d):?\d\d$/.test(t), 'a timestamp within year 0001-9999 and offset ±15:59')
    .optional(),
  includeArtifacts: z.boolean().optional(),
});
export type ListTasksQuery = z.infer<typeof ListTasksParams>;

// ---- 0.3 method params (namespace/verb methods) ----
const LegacyPart = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('text'), text: z.string(), metadata: metadata.optional() }),
  z.object({
    kind: z.literal('file'),
    file: z.union([
      z.object({ bytes: z.string(), name: z.string().optional(), mimeType: z.string().optional() }),
      z.object({ uri: z.string(), name: z.string().optional(), mimeType: z.string().optional() }),
    ]),
    metadata: metadata.optional(),
  }),
  z.object({ kind: z.literal('data'), data: z.record(z.string(), z.unknown()), metadata: metadata.optional() }),
]);
const LegacyMessage = z.object({
  kind: z.literal('message'),
  messageId: nonEmpty,
  role: z.enum(['user', 'agent']),
  parts: z.array(LegacyPart).min(1),
  contextId: z.string().max(1024).optional(),
  taskId: z.string().max(1024).optional(),
  metadata: metadata.optional(),
  extensions: z.array(z.string()).optional(),
  referenceTaskIds: z.array(z.string()).optional(),
});
export const LegacySendParams = z.object({
  message: LegacyMessage,
  configuration: z
    .object({
      acceptedOutputModes: z.array(z.string()).optional(),
      historyLength: historyLength.optional(),
      blocking: z.boolean().optional(),
      pushNotificationConfig: z.unknown().optional(),
    })
    .optional(),
  metadata: metadata.optional(),
});
export const LegacyTaskIdParams = z.object({ id: nonEmpty, metadata: metadata.optional() });

/** The JSON-RPC 2.0 envelope (§JSON-RPC 2.0 "Request object"); batches are not part of A2A. */
export const EnvelopeSchema = z.object({
  jsonrpc: z.literal('2.0'),
  method: z.string().min(1).max(128),
  id: z.union([z.string().max(256), z.number().int(), z.null()]).optional(),
  // JSON-RPC 2.0 §4.2: params, when present, MUST be a structured value (object or array); anything else is an invalid Request.
  params: z.union([z.record(z.string(), z.unknown()), z.array(z.unknown())]).optional(),
});
export type Envelope = z.infer<typeof EnvelopeSchema>;
