import { randomUUID } from 'node:crypto';
import type { Lease, StateStore } from './state-store.js';

// A lease held for the length of a piece of work: renewed in the background at a third of its TTL, with an
// AbortSignal that fires if a renewal is refused (someone else now holds it) so the work stops writing.

/** A running renewal loop: `signal` aborts when a renewal is refused; `stop()` ends the loop. */
export interface Renewal {
  signal: AbortSignal;
  /** When the lease expires unless renewed again: the start plus the TTL, moved by each accepted renewal. */
  expiresAtMs(): number;
  stop(): void;
}

/**
 * Renews at a third of `ttlMs` until stopped. A renewal answered `false` (someone else holds it now) aborts
 * `signal` with `lostMessage`; a transient store error is skipped (the next tick retries, and the TTL covers two
 * missed renewals). The one renewal loop of every held lease: project writer, session, consolidation lock.
 */
export function keepRenewing(renew: () => Promise<boolean>, ttlMs: number, lostMessage: string): Renewal {
  const controller = new AbortController();
  let stopped = false;
  let expiresAtMs = Date.now() + ttlMs;
  const timer = setInterval(
    () => {
      const asked = Date.now();
      renew().then(
        (ok) => {
          if (ok) expiresAtMs = asked + ttlMs;
          if (!ok && !stopped) controller.abort(new Error(lostMessage));
        },
        () => {
          // A transient store error: the next tick retries.
        },
      );
    },
    Math.max(50, Math.floor(ttlMs / 3)),
  );
  timer.unref();
  return {
    signal: controller.signal,
    expiresAtMs: () => expiresAtMs,
    stop: () => {
      stopped = true;
      clearInterval(timer);
    },
  };
}

const RELEASE_RETRY_FIRST_MS = 100;
const RELEASE_RETRY_MAX_MS = 1_000;

/**
 * Runs `release`; when the store cannot answer (an outage), keeps retrying in the background until it does or
 * the lease has expired on its own (`expiresAtMs`), so a lease never outlives its work by more than the outage.
 * The caller is not held up: the first failure resolves with `fallback`.
 */
async function releaseOrRetry<T>(
  release: () => Promise<T>,
  expiresAtMs: () => number,
  fallback: T,
): Promise<T> {
  try {
    return await release();
  } catch {
    let pause = RELEASE_RETRY_FIRST_MS;
    const again = () => {
      if (Date.now() >= expiresAtMs()) return;
      release().catch(() => {
        pause = Math.min(pause * 2, RELEASE_RETRY_MAX_MS);
        setTimeout(again, pause).unref();
      });
    };
    setTimeout(again, pause).unref();
    return fallback;
  }
}

export interface HeldLease {
  lease: Lease;
  /** Aborts when the lease is lost. */
  signal: AbortSignal;
  release(): Promise<void>;
}

export async function tryHoldLease(
  store: StateStore,
  key: string,
  options: { ttlMs: number; holder?: string },
): Promise<HeldLease | undefined> {
  const holder = options.holder ?? `${process.pid}-${randomUUID()}`;
  const lease = await store.acquireLease(key, holder, options.ttlMs);
  if (!lease) return undefined;
  const renewal = keepRenewing(
    () => store.renewLease(key, holder, lease.token, options.ttlMs),
    options.ttlMs,
    `lease ${key} was lost`,
  );
  return {
    lease,
    signal: renewal.signal,
    release: async () => {
      renewal.stop();
      await releaseOrRetry(() => store.releaseLease(key, holder, lease.token), renewal.expiresAtMs, false);
    },
  };
}

/** A lease taken in turn: held, or the caller's place in line (it defers and is woken when handed the lease). */
export interface HeldTurnLease {
  lease: Lease;
  signal: AbortSignal;
  /** Releases and hands over; `next` names the waiter the lease is now reserved for. */
  release(): Promise<{ next?: string }>;
}

export type HeldTurn =
  | { held: HeldTurnLease }
  | { held?: undefined; position: number; holder: string; expiresAtMs: number };

/**
 * The FIFO form of `tryHoldLease` (one project's memory writers): takes the lease when free or reserved for
 * `holder`, else joins the line. Releasing hands the lease to the first waiter, reserved for it for
 * `reserveMs`; the caller wakes that waiter's job (`release()` returns its holder name).
 */
export async function holdLeaseInTurn(
  store: StateStore,
  key: string,
  options: { ttlMs: number; holder: string; reserveMs: number; waiterTtlMs: number },
): Promise<HeldTurn> {
  const { holder, ttlMs } = options;
  const turn = await store.acquireLeaseInTurn(key, holder, ttlMs, options.waiterTtlMs);
  if (!turn.acquired) return turn;
  const { lease } = turn;
  const renewal = keepRenewing(
    () => store.renewLease(key, holder, lease.token, ttlMs),
    ttlMs,
    `lease ${key} was lost`,
  );
  return {
    held: {
      lease,
      signal: renewal.signal,
      release: async () => {
        renewal.stop();
        // A release retried after an outage hands over without a wake: the first waiter is parked until the
        // lease's expiry at the latest, as after a dead holder.
        const out = await releaseOrRetry(
          () => store.releaseLeaseToNext(key, holder, lease.token, options.reserveMs),
          renewal.expiresAtMs,
          { released: false, next: undefined as string | undefined },
        );
        return out.next ? { next: out.next } : {};
      },
    },
  };
}
