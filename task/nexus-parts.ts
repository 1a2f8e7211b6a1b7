/**
 * NEXUS parts ↔ the 1.0 wire form, in one place: the NEXUS client dialect (src/api/a2a/dialects/nexus.ts) and the NEXUS
 * agent transport (src/core/agents/transports/nexus.ts) both translate parts with these. Pure functions.
 *
 * NEXUS's Part (seed 000) is `{type, data}`, `type` free ("text", "image", "file", …) and `data` "any". A part goes
 * through Switchboard as the wire part a 1.0 agent understands (an image URL a file part, say), and its NEXUS type
 * and the form its data had ride in the part's metadata, so a NEXUS agent, or a NEXUS client reading the task, gets
 * the part back as it was sent: `{type: "image", data: "https://…/cat.png"}` stays exactly that.
 */
import type { WirePart } from './wire';

/** The part's NEXUS `type`, where the wire form alone would not say it (anything but text, data and file). */
const TYPE = 'nexusType';
/** How the part's file data was written: `string` (a URL or base64 content) or `url` (an object with `url`, not `uri`). */
const FORM = 'nexusForm';
/** The keys of a file part's data object besides the file's own (`alt`, `width`, `duration`…), given back as they came. */
const EXTRA = 'nexusData';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A NEXUS part as the wire form. A text part is text when its data is a string (or, 0.1 style, its `text` is);
 * other data (the seed: `data: any`) goes as a data part typed `text`, given back as it came. A text part with
 * neither is the callers' to refuse (the client dialect) or read as best it can (the agent transport).
 */
export function fromNexusPart(type: string, data: unknown, metadata?: Record<string, unknown>, text?: string): WirePart {
  const meta = (extra: Record<string, unknown>) => {
    const all = { ...metadata, ...extra };
    return Object.keys(all).length ? { metadata: all } : {};
  };
  if (type === 'text') {
    if (typeof data === 'string' || (data === undefined && text !== undefined)) return { text: typeof data === 'string' ? data : text!, ...meta({}) };
    return { data: data ?? null, mediaType: 'application/json', ...meta({ [TYPE]: type }) };
  }
  const typed = type === 'data' || type === 'file' ? {} : { [TYPE]: type };
  if (type === 'data' || type === 'json') return { data: data ?? null, mediaType: 'application/json', ...meta(typed) };
  if (typeof data === 'string') {
    const form = { ...typed, [FORM]: 'string' };
    return /^(https?|data):/i.test(data) ? { url: data, ...meta(form) } : { raw: data, ...meta(form) };
  }
  const f = isObject(data) ? data : {};
  const named = { ...(typeof f.name === 'string' && { filename: f.name }), ...(typeof f.mimeType === 'string' && { mediaType: f.mimeType }) };
  // What the wire part does not carry itself (an image's `alt`, `width`; a clip's `duration`) rides in its metadata.
  const carried = (k: string, used: string) => k === used || ((k === 'name' || k === 'mimeType') && typeof f[k] === 'string');
  const extra = (used: string) => {
    const rest = Object.fromEntries(Object.entries(f).filter(([k]) => !carried(k, used)));
    return Object.keys(rest).length ? { [EXTRA]: rest } : {};
  };
  if (typeof f.bytes === 'string') return { raw: f.bytes, ...named, ...meta({ ...typed, ...extra('bytes') }) };
  if (typeof f.uri === 'string') return { url: f.uri, ...named, ...meta({ ...typed, ...extra('uri') }) };
  if (typeof f.url === 'string') return { url: f.url, ...named, ...meta({ ...typed, [FORM]: 'url', ...extra('url') }) };
  // Any other content keeps its type, unwrapped.
  return { data: data ?? null, mediaType: 'application/json', ...meta({ [TYPE]: type }) };
}

/** A wire part as NEXUS writes it: the type and data it came in with, or the closest NEXUS has (1.0 parts). */
export function toNexusPart(p: WirePart): { type: string; data: unknown; metadata?: Record<string, unknown> } {
  const { [TYPE]: nexusType, [FORM]: form, [EXTRA]: extra, ...rest } = p.metadata ?? {};
  const metadata = Object.keys(rest).length ? { metadata: rest } : {};
  if (typeof p.text === 'string') return { type: 'text', data: p.text, ...metadata };
  const type = typeof nexusType === 'string' ? nexusType : undefined;
  if (p.raw !== undefined || p.url !== undefined) {
    const fileType = type ?? (p.mediaType?.startsWith('image/') ? 'image' : 'file');
    if (form === 'string') return { type: fileType, data: p.raw ?? p.url, ...metadata };
    const at = p.raw !== undefined ? { bytes: p.raw } : { [form === 'url' ? 'url' : 'uri']: p.url };
    const data = { ...(isObject(extra) && extra), ...(p.filename && { name: p.filename }), ...(p.mediaType && { mimeType: p.mediaType }), ...at };
    return { type: fileType, data, ...metadata };
  }
  return { type: type ?? 'data', data: p.data ?? null, ...metadata };
}
