/** What a turn's artifacts may weigh in a task workflow's state (Temporal refuses payloads over 2 MiB). */
import type { WireArtifact, WirePart } from './wire';

/**
 * Joins runs of adjacent text parts: a 10,000-chunk stream becomes one text part in the workflow's task
 * (the event log keeps every chunk), so history and payloads stay small. The text itself is unchanged.
 */
export function compactArtifact(a: WireArtifact): WireArtifact {
  const parts: WirePart[] = [];
  // Text parts with the same other fields (media type, no metadata…) read the same joined.
  const shape = (p: WirePart) => (typeof p.text === 'string' ? JSON.stringify({ ...p, text: undefined }) : undefined);
  for (const part of a.parts) {
    const prev = parts[parts.length - 1];
    const s = shape(part);
    if (prev && s !== undefined && shape(prev) === s) parts[parts.length - 1] = { ...prev, text: `${prev.text}${part.text}` };
    else parts.push(part);
  }
  return parts.length === a.parts.length ? a : { ...a, parts };
}

/** What one turn may carry into the workflow (Temporal refuses payloads over 2 MiB and messages over 4 MiB). */
export const ARTIFACT_BUDGET_BYTES = 1024 * 1024;

/**
 * Keeps the artifacts that go into workflow state under ARTIFACT_BUDGET_BYTES. Past it, parts are dropped and
 * the artifact is marked `metadata.switchboard.truncated`; every chunk is still in the task's event log (and
 * was streamed), so SubscribeToTask with Last-Event-ID: 0 replays the whole output.
 */
export function withinBudget(artifacts: WireArtifact[]): WireArtifact[] {
  let left = ARTIFACT_BUDGET_BYTES;
  return artifacts.map((a) => {
    const kept: WirePart[] = [];
    for (const part of a.parts) {
      const size = Buffer.byteLength(JSON.stringify(part));
      if (size > left) break;
      left -= size;
      kept.push(part);
    }
    if (kept.length === a.parts.length) return a;
    const note = { keptParts: kept.length, totalParts: a.parts.length, reason: `over the ${ARTIFACT_BUDGET_BYTES}-byte budget of a task's artifacts; the event log has all of it` };
    return { ...a, parts: kept, metadata: { ...a.metadata, switchboard: { ...(a.metadata?.switchboard as object), truncated: note } } };
  });
}
