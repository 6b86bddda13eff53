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
  const timer = setInterval(
    () => {
      store.renewLease(key, holder, lease.token, options.ttlMs).then(
        (ok) => {
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
      await store.releaseLease(key, holder, lease.token).catch(() => false);
    },
  };
}
