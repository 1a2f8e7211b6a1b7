/**
 * Fair admission (issue 46): a tenant flooding the gateway waits behind its own sends, not in front of everyone's.
 * A send (a new task or the next turn of one, on any binding) holds a place while in its busy phase, the part that
 * costs the gateway its work: the intake, the workflow's start, the first exchange with the agent, and for a quick
 * agent the whole task.
 * - A tenant alone (no other tenant has sent within ACTIVE_MS) is not held back: nobody else is there to share with.
 * - With others about, at most `capacity` sends are in at once; past it a send waits, and a place that frees goes to
 *   the waiting tenant holding the fewest (the one served longest ago among equals). A light tenant beside a flood so
 *   waits for the next place, not behind the flood's queue, and runs beside fewer than `capacity` of the flood's sends,
 *   however many clients the flood has.
 *
 * A place is held until the send has its answer or for `holdMs`, whichever comes first: a task still running then
 * waits on its agent, which costs the gateway little, and must not keep other sends out (a long task's client waits
 * for hours). A send that waits `maxWaitMs` for a place is refused (QuotaExceeded, nothing started; send it again).
 */
import { taskError } from '../../../task/errors';
import { admissionWaiting, quotaRefusals } from '../../core/metrics';

export interface FairGateOptions {
  /** Sends in their busy phase at once, across tenants (SWITCHBOARD_ADMISSION_CONCURRENCY). */
  capacity: number;
  /** The longest a send holds its place (SWITCHBOARD_ADMISSION_HOLD_MS). */
  holdMs: number;
  /** The longest a send waits for a place before it is refused (SWITCHBOARD_ADMISSION_WAIT_MS). */
  maxWaitMs: number;
}

/** A place: give it back once the send is answered (again is harmless; holdMs gives it back anyway). */
export type Release = () => void;

/** A tenant that sent within this long is about: the others share with it. */
const ACTIVE_MS = 1_000;

interface Waiter {
  tenant: string;
  admit(release: Release): void;
  refuse(err: Error): void;
}

export class FairGate {
  private busy = 0;
  private readonly held = new Map<string, number>();
  /** Each waiting tenant's sends, in arrival order. */
  private readonly waiting = new Map<string, Waiter[]>();
  private queued = 0;
  /** The order of each tenant's last place (a count): among tenants holding as many, the one served longest ago first. */
  private readonly lastServed = new Map<string, number>();
  private served = 0;
  /** When each tenant last sent (pruned past ACTIVE_MS). */
  private readonly lastSent = new Map<string, number>();

  constructor(readonly o: FairGateOptions) {}

  /**
   * A place for one of `tenant`'s sends: at once while the gateway has room and nobody waits, else once the tenants
   * holding fewer places have had theirs.
   * @throws QuotaExceeded after maxWaitMs; the signal's reason when the client leaves first.
   */
  enter(tenant: string, signal?: AbortSignal): Promise<Release> {
    this.lastSent.delete(tenant); // re-inserted last: the map stays in order of last send
    this.lastSent.set(tenant, Date.now());
    if (this.admitsAtOnce(tenant)) return Promise.resolve(this.grant(tenant));
    signal?.throwIfAborted();
    return new Promise<Release>((resolve, reject) => {
      const leave = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const waiter: Waiter = {
        tenant,
        admit: (release) => (leave(), resolve(release)),
        refuse: (err) => (leave(), reject(err)),
      };
      const onAbort = () => this.drop(waiter) && waiter.refuse(signal!.reason as Error);
      const timer = setTimeout(() => {
        if (!this.drop(waiter)) return;
        quotaRefusals.inc({ quota: 'admission' });
        waiter.refuse(taskError('QuotaExceeded', `The gateway is saturated and this send waited ${this.o.maxWaitMs} ms for its tenant's share (SWITCHBOARD_ADMISSION_WAIT_MS): ${this.held.get(tenant) ?? 0} of this tenant's sends are in progress. Nothing was started; send the same message again.`));
      }, this.o.maxWaitMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      const queue = this.waiting.get(tenant);
      if (queue) queue.push(waiter);
      else this.waiting.set(tenant, [waiter]);
      this.queued++;
      admissionWaiting.set(this.queued);
    });
  }

  /** Sends in their busy phase now, and waiting for a place. */
  get load(): { busy: number; waiting: number } {
    return { busy: this.busy, waiting: this.queued };
  }

  /** Alone (and none of its own waiting), or room and nobody waiting. */
  private admitsAtOnce(tenant: string): boolean {
    if (this.queued === 0 && this.busy < this.o.capacity) return true;
    return !this.waiting.has(tenant) && this.tenantsAbout() <= 1;
  }

  /** Tenants that sent within ACTIVE_MS, or hold or wait for a place. */
  private tenantsAbout(): number {
    const since = Date.now() - ACTIVE_MS;
    for (const [tenant, at] of this.lastSent) {
      if (at >= since) break;
      this.lastSent.delete(tenant);
      if (!this.held.has(tenant) && !this.waiting.has(tenant)) this.lastServed.delete(tenant);
    }
    let about = this.lastSent.size;
    for (const tenant of new Set([...this.held.keys(), ...this.waiting.keys()])) if (!this.lastSent.has(tenant)) about++;
    return about;
  }

  private grant(tenant: string): Release {
    this.busy++;
    this.lastServed.set(tenant, ++this.served);
    this.held.set(tenant, (this.held.get(tenant) ?? 0) + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clearTimeout(timer);
      this.busy--;
      const left = this.held.get(tenant)! - 1;
      if (left === 0) this.held.delete(tenant);
      else this.held.set(tenant, left);
      this.admitNext();
    };
    const timer = setTimeout(release, this.o.holdMs);
    timer.unref();
    return release;
  }

  /** Free places to the waiting tenants holding the fewest, a send at a time. */
  private admitNext(): void {
    while (this.queued > 0 && (this.busy < this.o.capacity || this.tenantsAbout() <= 1)) {
      let next: string | undefined;
      for (const tenant of this.waiting.keys()) if (next === undefined || this.before(tenant, next)) next = tenant;
      const queue = this.waiting.get(next!)!;
      const waiter = queue.shift()!;
      if (queue.length === 0) this.waiting.delete(next!);
      this.queued--;
      admissionWaiting.set(this.queued);
      waiter.admit(this.grant(waiter.tenant));
    }
  }

  /** Whether tenant `a` is served before `b`: it holds fewer places, or as many and was served longer ago. */
  private before(a: string, b: string): boolean {
    const held = (this.held.get(a) ?? 0) - (this.held.get(b) ?? 0);
    return held < 0 || (held === 0 && (this.lastServed.get(a) ?? 0) < (this.lastServed.get(b) ?? 0));
  }

  /** Takes a waiter out of its queue; false when it was admitted or dropped already. */
  private drop(waiter: Waiter): boolean {
    const queue = this.waiting.get(waiter.tenant);
    const at = queue?.indexOf(waiter) ?? -1;
    if (at < 0) return false;
    queue!.splice(at, 1);
    if (queue!.length === 0) this.waiting.delete(waiter.tenant);
    this.queued--;
    admissionWaiting.set(this.queued);
    return true;
  }
}
