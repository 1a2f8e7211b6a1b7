/**
 * The A2A wire types, defined once. Switchboard's internal model is the A2A 1.0 ProtoJSON wire form: plain
 * JSON, so it travels unchanged through Temporal payloads, the workflow's state, the PostgreSQL projection
 * and the task event log. The 0.3 dialect is converted to and from it by @a2a-js/sdk's compat layer at the
 * edges. Types and constants only, no imports: workflow code, activities, the event log and the front door
 * all import from here (src/api/a2a/schemas.ts validates input against these shapes).
 */

/** The dialects Switchboard speaks: 1.0 (PascalCase methods, ProtoJSON) and 0.3 (namespace/verb methods, `kind`). */
export type Dialect = '1.0' | '0.3';
/** The dialects webhook bodies are written in (push configs): the engines', and A2A 0.1's (`{id, status, final}`). */
export type PushDialect = Dialect | '0.1';

export const TASK_STATES = [
  'TASK_STATE_SUBMITTED',
  'TASK_STATE_WORKING',
  'TASK_STATE_INPUT_REQUIRED',
  'TASK_STATE_AUTH_REQUIRED',
  'TASK_STATE_COMPLETED',
  'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED',
  'TASK_STATE_REJECTED',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

/** §1.4: a part carries exactly one of text | raw | url | data. */
export interface WirePart {
  text?: string;
  raw?: string;
  url?: string;
  data?: unknown;
  mediaType?: string;
  filename?: string;
  metadata?: Record<string, unknown>;
}

export interface WireMessage {
  messageId: string;
  contextId?: string;
  taskId?: string;
  role: 'ROLE_USER' | 'ROLE_AGENT';
  parts: WirePart[];
  metadata?: Record<string, unknown>;
  extensions?: string[];
  referenceTaskIds?: string[];
}

export interface WireArtifact {
  artifactId: string;
  name?: string;
  description?: string;
  parts: WirePart[];
  metadata?: Record<string, unknown>;
  extensions?: string[];
}

export interface WireTaskStatus {
  state: TaskState;
  message?: WireMessage;
  timestamp?: string;
}

export interface WireTask {
  id: string;
  contextId: string;
  status: WireTaskStatus;
  artifacts?: WireArtifact[];
  history?: WireMessage[];
  metadata?: Record<string, unknown>;
}

export interface WireStatusUpdate {
  taskId: string;
  contextId: string;
  status: WireTaskStatus;
  metadata?: Record<string, unknown>;
}

export interface WireArtifactUpdate {
  taskId: string;
  contextId: string;
  artifact: WireArtifact;
  append?: boolean;
  lastChunk?: boolean;
  metadata?: Record<string, unknown>;
}

/** One event as the 1.0 wire has it (a StreamResponse in ProtoJSON); the 0.3 rendering is derived from it. */
export type StreamEvent = { task: WireTask } | { statusUpdate: WireStatusUpdate } | { artifactUpdate: WireArtifactUpdate };
