/**
 * Following a task's event stream to its end, across broken connections: a stream that breaks off (the server
 * restarting, a last event naming where to resume) is picked up again with SubscribeToTask and Last-Event-ID after
 * a short backoff. Used by `send`, `stream` and `resume` (after their SendStreamingMessage) and by `tasks watch`.
 */
import { Api, type StreamEvent, Unreachable } from './api';

export const FRONT_DOOR = '/a2a';

/** What the caller makes of an event: go on, resume from the last event id, or stop reading (the caller is done). */
export type Verdict = 'resume' | 'stop' | undefined;

/** Reads `events` (then their resumptions) until the server ends the stream or `onEvent` says stop. */
export async function follow(
  client: Api,
  events: AsyncGenerator<StreamEvent, void, undefined>,
  onEvent: (e: StreamEvent) => Verdict,
  taskId: () => string | undefined,
  note: (text: string) => void,
): Promise<void> {
  let lastId: number | undefined;
  for (let resumes = 0; ; ) {
    let again = false;
    try {
      for await (const e of events) {
        const verdict = onEvent(e);
        if (verdict === 'stop') return;
        if (verdict === 'resume') {
          again = true;
          break;
        }
        if (e.id !== undefined) lastId = e.id;
      }
    } catch (err) {
      if (!(err instanceof Unreachable) || !taskId() || resumes >= 10) throw err;
      again = true;
    }
    if (!again) return;
    resumes++;
    note(`the stream broke off at event ${lastId ?? 0}; resuming`);
    await new Promise((r) => setTimeout(r, Math.min(5_000, 250 * 2 ** resumes)));
    events = client.stream(FRONT_DOOR, 'SubscribeToTask', { id: taskId() }, lastId ?? 0);
  }
}
