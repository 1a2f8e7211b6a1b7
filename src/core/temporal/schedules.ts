/**
 * A Temporal Schedule made at start-up, or updated when it exists. Switchboard's own housekeeping no longer uses
 * Schedules (a run per tick crowded Temporal UI's list): it runs as long-lived workflows (src/core/temporal/housekeeping.ts),
 * which new periodic jobs should follow too. This stays for a job that must be a Schedule: the retention sweep
 * (src/core/temporal/retention-sweep.ts). A Schedule's action and
 * summary are payloads, sealed under the payload key of the process that
 * wrote them: after SWITCHBOARD_PAYLOAD_KEY lost that key (rotated out, replaced), reading the Schedule fails, and
 * start-up must not (issue 32). Such a Schedule holds nothing but what this code writes anyway: it is deleted and
 * made again from `options`, with a warning naming the key id.
 */
import { type Client, ScheduleAlreadyRunning, type ScheduleDescription, ScheduleNotFoundError, type ScheduleOptions, type ScheduleUpdateOptions } from '@temporalio/client';
import { payloadKeyErrorIn } from './encryption-codec';

export interface ScheduleLog {
  warn(obj: object, msg: string): void;
}

/**
 * Creates the Schedule, or applies `update` to the one there; one that does not decode under this deployment's
 * payload keys is recreated (safe from several processes at once: whoever creates it first wins).
 * @returns what was done.
 * @throws what Temporal throws for anything else (unreachable, refused).
 */
export async function ensureSchedule(
  client: Client,
  options: ScheduleOptions,
  update: (previous: ScheduleDescription) => ScheduleUpdateOptions,
  log?: ScheduleLog,
): Promise<'created' | 'updated' | 'recreated'> {
  if (await create(client, options)) return 'created';
  const handle = client.schedule.getHandle(options.scheduleId);
  try {
    await handle.update(update);
    return 'updated';
  } catch (err) {
    const sealed = payloadKeyErrorIn(err);
    if (!sealed) throw err;
    log?.warn(
      { scheduleId: options.scheduleId, keyId: sealed.keyId, reason: sealed.message },
      `schedule ${options.scheduleId} is sealed under payload key ${sealed.keyId}, which SWITCHBOARD_PAYLOAD_KEY no longer holds: recreating it`,
    );
    await handle.delete().catch((e: unknown) => {
      if (!(e instanceof ScheduleNotFoundError)) throw e;
    });
    await create(client, options);
    return 'recreated';
  }
}

/** @returns false when a Schedule with that id exists already. */
async function create(client: Client, options: ScheduleOptions): Promise<boolean> {
  try {
    await client.schedule.create(options);
    return true;
  } catch (err) {
    if (err instanceof ScheduleAlreadyRunning) return false;
    throw err;
  }
}
