import { randomUUID } from 'node:crypto';
import type { Lease, StateStore } from './state-store.js';

// A lease held for the length of a piece of work: renewed in the background at a third of its TTL, with an
// AbortSignal that fires if a renewal is refused (someone else now holds it) so the work stops writing.

export interface HeldLease {
  lease: Lease;
  /** Aborts when the lease is lost. */
  signal: AbortSignal;
  release(): Promise<void>;
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

export async function tryHoldLease(
  store: StateStore,
  key: string,
  options: { ttlMs: number; holder?: string },
): Promise<HeldLease | undefined> {
  const holder = options.holder ?? `${process.pid}-${randomUUID()}`;
  const lease = await store.acquireLease(key, holder, options.ttlMs);
  if (!lease) return undefined;
  const controller = new AbortController();
  let released = false;
  let expiresAtMs = Date.now() + options.ttlMs;
  const timer = setInterval(
    () => {
      const asked = Date.now();
      store.renewLease(key, holder, lease.token, options.ttlMs).then(
        (ok) => {
          if (ok) expiresAtMs = asked + options.ttlMs;
          if (!ok && !released) controller.abort(new Error(`lease ${key} was lost`));
        },
        () => {
          // A transient store error: the next tick retries; the TTL covers two missed renewals.
        },
      );
    },
    Math.max(50, Math.floor(options.ttlMs / 3)),
  );
  timer.unref();
  return {
    lease,
    signal: controller.signal,
    release: async () => {
      released = true;
      clearInterval(timer);
      await releaseOrRetry(
        () => store.releaseLease(key, holder, lease.token),
        () => expiresAtMs,
        false,
      );
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
  const controller = new AbortController();
  let released = false;
  let expiresAtMs = Date.now() + ttlMs;
  const timer = setInterval(
    () => {
      const asked = Date.now();
      store.renewLease(key, holder, lease.token, ttlMs).then(
        (ok) => {
          if (ok) expiresAtMs = asked + ttlMs;
          if (!ok && !released) controller.abort(new Error(`lease ${key} was lost`));
        },
        () => {
          // A transient store error: the next tick retries; the TTL covers two missed renewals.
        },
      );
    },
    Math.max(50, Math.floor(ttlMs / 3)),
  );
  timer.unref();
  return {
    held: {
      lease,
      signal: controller.signal,
      release: async () => {
        released = true;
        clearInterval(timer);
        // A release retried after an outage hands over without a wake: the first waiter is parked until the
        // lease's expiry at the latest, as after a dead holder.
        const out = await releaseOrRetry(
          () => store.releaseLeaseToNext(key, holder, lease.token, options.reserveMs),
          () => expiresAtMs,
          { released: false, next: undefined as string | undefined },
        );
        return out.next ? { next: out.next } : {};
      },
    },
  };
}
