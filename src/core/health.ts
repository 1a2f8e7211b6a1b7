/**
 * Which of Switchboard's dependencies are reachable right now, so that an outage costs a client a fast, clear
 * refusal (HTTP 503 + Retry-After, naming the dependency) instead of a hang or a crash, and /readyz can say what
 * is missing. Each dependency is probed every second with a short deadline; an error of the outage kind seen on
 * a request marks it down at once, and the next good probe marks it up again.
 */
import type { ConnectionLike } from '@temporalio/client';
import { Pool } from 'pg';
import type { Logger } from 'pino';

export type Dependency = 'postgresql' | 'temporal';

/** A request needs a dependency that is down. The routes answer it with 503 and Retry-After. */
export class DependencyUnavailable extends Error {
  constructor(
    readonly dependency: Dependency,
    detail?: string,
    readonly retryAfterS = 5,
    /** Up but saturated (every pooled connection in use), rather than down. */
    readonly busy = false,
  ) {
    super(`${dependency === 'postgresql' ? 'PostgreSQL' : 'Temporal'} is ${busy ? 'busy' : 'unavailable'}${detail ? ` (${detail})` : ''}; nothing was done, retry in ${retryAfterS} s`);
  }
}

const PG_OUTAGE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', '57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006']);
const PG_OUTAGE_TEXT = /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection terminated unexpectedly|the database system is (starting up|shutting down|in recovery mode)/i;
/** gRPC UNAVAILABLE and DEADLINE_EXCEEDED: the Temporal frontend did not answer. */
const GRPC_OUTAGE = new Set([14, 4]);

/**
 * Whether `err` is a wait for a pooled connection that timed out while every connection of `pool` was taken: load,
 * not an outage (pg-pool reports both with the same message). A connection attempt that hangs on a partitioned
 * network also holds a slot; the health probe, on its own connection, tells that case apart within seconds.
 */
export function poolExhausted(err: unknown, pool: Pool): boolean {
  return /timeout exceeded when trying to connect/i.test((err as Error | undefined)?.message ?? '') && pool.totalCount >= (pool.options.max ?? 10);
}

/** A request refused because `pool` had no free connection in time (503, retry in a second). */
export function poolBusy(pool: Pool): DependencyUnavailable {
  return new DependencyUnavailable('postgresql', `all ${pool.totalCount} connections of this process are in use`, 1, true);
}

/** The dependency whose outage `err` shows, if it shows one. */
export function outageOf(err: unknown): Dependency | undefined {
  for (let e = err as { code?: unknown; message?: unknown; cause?: unknown; name?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (e instanceof DependencyUnavailable) return e.dependency;
    if (typeof e.code === 'number' && GRPC_OUTAGE.has(e.code)) return 'temporal';
    if (e.name === 'ServiceError' && typeof e.message === 'string' && /UNAVAILABLE|DEADLINE_EXCEEDED|Failed to connect/i.test(e.message)) return 'temporal';
    if (typeof e.code === 'string' && PG_OUTAGE_CODES.has(e.code)) return 'postgresql';
    if (typeof e.message === 'string' && PG_OUTAGE_TEXT.test(e.message)) return 'postgresql';
  }
  return undefined;
}

interface State {
  up: boolean;
  since: string;
  error?: string;
}

export interface HealthOptions {
  pool: Pool;
  /** The Temporal client connection (probed with GetSystemInfo, the cheapest frontend call). */
  temporal: ConnectionLike;
  log?: Logger;
  intervalMs?: number;
  timeoutMs?: number;
}

export class Health {
  private readonly state: Record<Dependency, State>;
  private timer?: NodeJS.Timeout;
  private probing = false;
  /** Calls in flight that end when their dependency is seen down (whenDown). */
  private readonly watchers = new Set<{ dep: Dependency; down: (e: DependencyUnavailable) => void }>();

  /**
   * The probe's own connection: probing through the request pool would time out whenever every pooled connection
   * is busy, and a saturated pool would read as PostgreSQL being down.
   */
  private readonly probePool: Pool;

  constructor(private readonly o: HealthOptions) {
    const now = new Date().toISOString();
    this.state = { postgresql: { up: true, since: now }, temporal: { up: true, since: now } };
    this.probePool = new Pool({ ...o.pool.options, max: 1, idleTimeoutMillis: 0 });
    this.probePool.on('error', () => undefined); // a dropped idle connection: the next probe opens another
  }

  start(): void {
    if (this.timer) return;
    void this.probe();
    this.timer = setInterval(() => void this.probe(), this.o.intervalMs ?? 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    void this.probePool.end().catch(() => undefined);
  }

  isUp(dep: Dependency): boolean {
    return this.state[dep].up;
  }

  /** @throws DependencyUnavailable when `dep` is down. */
  require(...deps: Dependency[]): void {
    for (const dep of deps) if (!this.state[dep].up) throw new DependencyUnavailable(dep, this.state[dep].error);
  }

  /**
   * An error seen on a request: when it shows an outage, the dependency is down until a probe says otherwise, and
   * the request is answered with the returned error (503). A wait for a pooled connection that timed out while
   * every connection was in use is load, not an outage: answered the same way, named busy, nothing marked down.
   */
  unavailable(err: unknown): DependencyUnavailable | undefined {
    const dep = outageOf(err);
    if (!dep) return undefined;
    if (err instanceof DependencyUnavailable && err.busy) return err;
    // Refused because it is known down (require, untilDown): nothing new to record.
    if (err instanceof DependencyUnavailable && !this.state[dep].up) return err;
    if (dep === 'postgresql' && poolExhausted(err, this.o.pool)) return poolBusy(this.o.pool);
    this.set(dep, false, (err as Error).message);
    return err instanceof DependencyUnavailable ? err : new DependencyUnavailable(dep);
  }

  /**
   * Runs `call` with a signal that aborts, and rejects with DependencyUnavailable, as soon as `dep` is seen down (a
   * probe, or another request's error): a call into a dependency that died just before it must not wait for the
   * client's own retries (Temporal's client retries an unreachable server for about 10 s).
   */
  async untilDown<T>(dep: Dependency, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    this.require(dep);
    const abort = new AbortController();
    let watcher: { dep: Dependency; down: (e: DependencyUnavailable) => void } | undefined;
    const seenDown = new Promise<never>((_, reject) => {
      watcher = {
        dep,
        down: (e) => {
          abort.abort(e);
          reject(e);
        },
      };
      this.watchers.add(watcher);
    });
    seenDown.catch(() => undefined);
    try {
      return await Promise.race([call(abort.signal), seenDown]);
    } finally {
      this.watchers.delete(watcher!);
    }
  }

  snapshot(): Record<Dependency, State> {
    return { postgresql: { ...this.state.postgresql }, temporal: { ...this.state.temporal } };
  }

  /** Probes both now (also what /readyz calls, so a readiness check is never older than this). */
  async probe(): Promise<Record<Dependency, State>> {
    if (this.probing) return this.snapshot();
    this.probing = true;
    const timeout = this.o.timeoutMs ?? 2000;
    try {
      await Promise.all([
        within(timeout, this.probePool.query('SELECT 1')).then(
          () => this.set('postgresql', true),
          (err: Error) => this.set('postgresql', false, err.message),
        ),
        // A deadline alone does not stop the native client's own retries of an unreachable server (~10 s): the probe
        // gives up, and aborts the call, on its own clock.
        this.temporalProbe(timeout).then(
          () => this.set('temporal', true),
          (err: Error) => this.set('temporal', false, err.message),
        ),
      ]);
    } finally {
      this.probing = false;
    }
    return this.snapshot();
  }

  private async temporalProbe(timeoutMs: number): Promise<unknown> {
    const abort = new AbortController();
    const t = this.o.temporal;
    try {
      return await within(timeoutMs, t.withAbortSignal(abort.signal, () => t.withDeadline(Date.now() + timeoutMs, () => t.workflowService.getSystemInfo({}))));
    } finally {
      abort.abort();
    }
  }

  private set(dep: Dependency, up: boolean, error?: string): void {
    const s = this.state[dep];
    if (s.up === up) {
      if (!up) s.error = error;
      return;
    }
    this.state[dep] = { up, since: new Date().toISOString(), ...(up ? {} : { error }) };
    if (up) this.o.log?.info({ dependency: dep }, 'dependency is back');
    else this.o.log?.warn({ dependency: dep, error }, 'dependency is down: requests that need it are refused with 503 until it is back');
    if (!up) for (const w of this.watchers) if (w.dep === dep) w.down(new DependencyUnavailable(dep, error));
  }
}

function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)));
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
