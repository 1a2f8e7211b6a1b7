/**
 * A2A 0.1 parts ↔ the 1.0 wire form, in one place: the 0.1 client dialect (src/api/a2a/dialects/v01.ts), the 0.1
 * agent transport (src/core/agents/transports/a2a-v01.ts) and the WebSocket hub's frames (src/core/hub/frames.ts) all
 * translate parts with these. Pure functions, no imports but the wire types.
 *
 * 0.1 parts: `{type:"text",text}`, `{type:"data",data}` (data is an object) and
 * `{type:"file",file:{name?,mimeType?,bytes|uri}}`, each with optional `metadata`. Society AI's hub also sends
 * 0.2's `kind` in place of `type`, so both are read.
 */
import type { WirePart } from './wire';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A 1.0 part as 0.1 writes it. 0.1 data parts carry an object: another JSON value is wrapped as `{value}`. */
export function toV01Part(p: WirePart): Record<string, unknown> {
  const metadata = p.metadata && Object.keys(p.metadata).length ? { metadata: p.metadata } : {};
  if (typeof p.text === 'string') return { type: 'text', text: p.text, ...metadata };
  if (p.raw !== undefined || p.url !== undefined) {
    const file = { ...(p.filename ? { name: p.filename } : {}), ...(p.mediaType ? { mimeType: p.mediaType } : {}), ...(p.raw !== undefined ? { bytes: p.raw } : { uri: p.url }) };
    return { type: 'file', file, ...metadata };
  }
  return { type: 'data', data: isObject(p.data) ? p.data : { value: p.data ?? null }, ...metadata };
}

/**
 * A 0.1 part (or 0.2's, by `kind`) as the 1.0 wire form. Without a `type` the part's own fields say which it is.
 * @returns undefined for a shape that is no part: the caller says how bad input is answered.
 */
export function fromV01Part(raw: unknown): WirePart | undefined {
  if (!isObject(raw)) return undefined;
  const kind = raw.type ?? raw.kind ?? (typeof raw.text === 'string' ? 'text' : isObject(raw.file) ? 'file' : 'data' in raw ? 'data' : undefined);
  const metadata = isObject(raw.metadata) ? { metadata: raw.metadata } : {};
  if (kind === 'text' && typeof raw.text === 'string') return { text: raw.text, ...metadata };
  if (kind === 'data' && raw.data !== undefined) return { data: raw.data, ...metadata };
  if (kind === 'file' && isObject(raw.file)) {
    const f = raw.file;
    const named = { ...(typeof f.name === 'string' ? { filename: f.name } : {}), ...(typeof f.mimeType === 'string' ? { mediaType: f.mimeType } : {}) };
    if (typeof f.bytes === 'string') return { raw: f.bytes, ...named, ...metadata };
    if (typeof f.uri === 'string') return { url: f.uri, ...named, ...metadata };
  }
  return undefined;
}

/** What fromV01Part accepts, for error messages. */
export const V01_PART_SHAPES = '{type: "text", text}, {type: "data", data} or {type: "file", file: {bytes | uri}}';
