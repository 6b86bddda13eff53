import { randomUUID } from 'node:crypto';
import type { Lease, StateStore } from './state-store.js';

// A lease held for the length of a piece of work: renewed in the background at a third of its TTL, with an
// AbortSignal that fires if a renewal is refused (someone else now holds it) so the work stops writing.

/** A running renewal loop: `signal` aborts when a renewal is refused; `stop()` ends the loop. */
export interface Renewal {
  signal: AbortSignal;
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
  const timer = setInterval(
    () => {
      renew().then(
        (ok) => {
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
    stop: () => {
      stopped = true;
      clearInterval(timer);
    },
  };
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
      await store.releaseLease(key, holder, lease.token).catch(() => false);
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
        const out = await store
          .releaseLeaseToNext(key, holder, lease.token, options.reserveMs)
          .catch(() => ({ released: false, next: undefined }));
        return out.next ? { next: out.next } : {};
      },
    },
  };
}
