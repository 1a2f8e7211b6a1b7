/**
 * How a tenant's agents look to an MCP client (issue 43): one tool per agent, and an A2A task's answer as a tool
 * result. Pure mapping, no I/O: src/api/mcp/calls.ts runs the tasks, src/api/mcp/sessions.ts serves the tools.
 */
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { TaskState, WirePart, WireTask } from '../../../task/wire';
import { isInterrupted, isTerminal } from '../../../task/rules';
import type { Agent } from '../../core/agents/registry';

/** What a tool call takes: the message to the agent, and where it goes on (a context, a task waiting for input). */
export interface ToolArgs {
  message: string;
  contextId?: string;
  taskId?: string;
  skill?: string;
}

/** Tool names are agent ids as they are (lower-case letters, digits and '-': within MCP's `[A-Za-z0-9_.-]{1,128}`). */
export const toolNameOf = (agent: Pick<Agent, 'id'>): string => agent.id;

const MAX_DESCRIPTION = 2_000;

interface CardSkill {
  id?: unknown;
  name?: unknown;
  description?: unknown;
}

/** The agent as a tool: its card's name and description, its skills listed, and the input every agent takes. */
export function toolOf(agent: Agent): Tool {
  const card = agent.card as { name?: unknown; description?: unknown; skills?: unknown };
  const skills = (Array.isArray(card.skills) ? (card.skills as CardSkill[]) : []).filter((s) => typeof s?.id === 'string');
  const lines = [typeof card.description === 'string' && card.description ? card.description : `The A2A agent ${agent.name}.`];
  if (skills.length) {
    lines.push('Skills:');
    for (const s of skills) lines.push(`- ${String(s.name ?? s.id)}${typeof s.description === 'string' && s.description ? `: ${s.description}` : ''}`);
  }
  lines.push('Each call is a durable Switchboard task: if it waits for input or outlives the call, call again with its taskId.');
  const description = lines.join('\n').slice(0, MAX_DESCRIPTION);
  const properties: Record<string, object> = {
    message: { type: 'string', description: 'The message to the agent (or the answer it asked for, with taskId)' },
    contextId: { type: 'string', description: 'Continue a conversation: the contextId of an earlier result' },
    taskId: { type: 'string', description: 'Continue a task: the taskId of an earlier result that waits for input or is still working' },
  };
  if (skills.length) properties.skill = { type: 'string', enum: skills.map((s) => s.id as string), description: 'The skill to use (message.metadata.skillId)' };
  return {
    name: toolNameOf(agent),
    title: typeof card.name === 'string' && card.name ? card.name : agent.name,
    description,
    inputSchema: { type: 'object', properties, required: ['message'], additionalProperties: false },
    annotations: { openWorldHint: true },
    // MCP 2025-11-25 tasks: a client may ask for the call as a task (src/api/mcp/mcp-tasks.ts), or wait for it as usual.
    execution: { taskSupport: 'optional' },
  };
}

/** A tool's arguments checked by hand (the SDK's low-level server leaves them to the tool): the args, or why not. */
export function readArgs(raw: unknown): ToolArgs | { invalid: string } {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return { invalid: 'arguments must be an object with a string `message`' };
  const a = raw as Record<string, unknown>;
  if (typeof a.message !== 'string') return { invalid: 'arguments.message must be a string' };
  for (const k of ['contextId', 'taskId', 'skill'] as const) {
    if (a[k] !== undefined && (typeof a[k] !== 'string' || a[k] === '')) return { invalid: `arguments.${k} must be a non-empty string` };
  }
  const extra = Object.keys(a).filter((k) => !['message', 'contextId', 'taskId', 'skill'].includes(k));
  if (extra.length) return { invalid: `unknown arguments: ${extra.join(', ')}` };
  return { message: a.message, contextId: a.contextId as string | undefined, taskId: a.taskId as string | undefined, skill: a.skill as string | undefined };
}

type Content = CallToolResult['content'][number];

/** One A2A part as MCP content: text as text, a file by URL as a resource link, file bytes as an embedded resource. */
function contentOf(part: WirePart, uriBase: string, i: number): Content | undefined {
  if (typeof part.text === 'string') return { type: 'text', text: part.text };
  if (typeof part.url === 'string') return { type: 'resource_link', uri: part.url, name: part.filename ?? part.url, ...(part.mediaType ? { mimeType: part.mediaType } : {}) };
  if (typeof part.raw === 'string') {
    const mimeType = part.mediaType ?? 'application/octet-stream';
    if (mimeType.startsWith('image/')) return { type: 'image', data: part.raw, mimeType };
    return { type: 'resource', resource: { uri: `${uriBase}/parts/${i}${part.filename ? `/${encodeURIComponent(part.filename)}` : ''}`, mimeType, blob: part.raw } };
  }
  return undefined;
}

/** The parts that answer: the artifacts', or (none) the status message's, as the agent's last word. */
function answerParts(task: WireTask): WirePart[] {
  const fromArtifacts = (task.artifacts ?? []).flatMap((a) => a.parts ?? []);
  if (fromArtifacts.length && !isInterrupted(task.status.state)) return fromArtifacts;
  return task.status.message?.parts ?? fromArtifacts;
}

/** What a tool result says of its task in `_meta`, so a client can continue it (taskId) or show where it is. */
export interface TaskMeta {
  taskId: string;
  contextId: string;
  state: TaskState;
}

/**
 * The task as a tool result: its answer's text and files as content, its data parts as structured content (one
 * object as it is; several under `data`), the task in `_meta`. A failed, rejected or canceled task is a tool
 * error (isError); a task that waits for input or is still working says how to go on.
 */
export function resultOf(task: WireTask, tool: string, uriBase: string): CallToolResult {
  const state = task.status.state;
  const parts = answerParts(task);
  const content: Content[] = [];
  parts.forEach((p, i) => {
    const c = contentOf(p, `${uriBase}/tasks/${task.id}`, i);
    if (c) content.push(c);
  });
  const data = parts.filter((p) => p.data !== undefined).map((p) => p.data);
  const structured = data.length === 1 && data[0] !== null && typeof data[0] === 'object' && !Array.isArray(data[0]) ? (data[0] as Record<string, unknown>) : data.length ? { data } : undefined;
  if (structured) content.push({ type: 'text', text: JSON.stringify(structured) }); // for clients that read only content
  const note = noteOf(state, task.id, tool);
  if (note) content.push({ type: 'text', text: note });
  if (!content.length) content.push({ type: 'text', text: `The task ended ${stateName(state)} without an answer.` });
  const meta: TaskMeta = { taskId: task.id, contextId: task.contextId, state };
  return {
    content,
    ...(structured ? { structuredContent: structured } : {}),
    ...(isError(state) ? { isError: true } : {}),
    _meta: { ...meta },
  };
}

const isError = (s: TaskState): boolean => s === 'TASK_STATE_FAILED' || s === 'TASK_STATE_REJECTED' || s === 'TASK_STATE_CANCELED';

/** `TASK_STATE_INPUT_REQUIRED` → `input-required`, as people write it. */
export const stateName = (s: TaskState): string => s.replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-');

function noteOf(state: TaskState, taskId: string, tool: string): string | undefined {
  if (isInterrupted(state)) {
    return `The task ${taskId} waits for input (${stateName(state)}): call ${tool} again with {"taskId": "${taskId}", "message": <your answer>} to continue it.`;
  }
  if (!isTerminal(state)) return `The task ${taskId} is still ${stateName(state)}: call ${tool} again with {"taskId": "${taskId}", "message": ""} to wait for its answer.`;
  if (state === 'TASK_STATE_CANCELED') return `The task ${taskId} was canceled.`;
  return undefined;
}

/** A tool error that is no task's (unknown tool, bad arguments, a refusal): a result with isError, as MCP asks. */
export function toolError(message: string, meta?: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true, ...(meta ? { _meta: meta } : {}) };
}
