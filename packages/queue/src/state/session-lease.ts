import { randomUUID } from 'node:crypto';
import { EngramError } from '@engram/errors/engram-error';
import { tryHoldLease } from './held-lease.js';
import type { Lease, StateStore } from './state-store.js';

// The per-session writer lease of the hosted service: whoever holds `session:<tenant>:<sessionId>` is the
// one process allowed to append to that session's transcript. Any replica can take it; it is renewed in the
// background while the turn runs, released when the turn ends, and simply expires when its replica dies, so
// another replica serves the next turn after at most one TTL. The fencing token (strictly increasing per
// session on every engine) lets a writer check, right before each append, that it is still the holder.

export const DEFAULT_SESSION_LEASE_TTL_MS = 30_000;

export class SessionBusyError extends EngramError {
  constructor(
    readonly sessionId: string,
    readonly holder: Lease | undefined,
  ) {
    super(
      'SESSION_BUSY',
      `Session ${sessionId} is running another turn. Retry when it ends, or send the request with ` +
        '"wait": true (or `Prefer: wait=<seconds>`) to queue behind it.',
      { retryable: true },
    );
  }
}

export class SessionLeaseLostError extends EngramError {
  constructor(readonly sessionId: string) {
    super(
      'SESSION_LEASE_LOST',
      `This replica lost the lease of session ${sessionId} (it was unreachable from the state store for longer ` +
        'than the lease TTL, and another replica may now hold it); the turn stopped before writing more.',
      { retryable: true },
    );
  }
}

export interface SessionLease {
  readonly lease: Lease;
  /** Aborts when a renewal finds the lease taken: stop the turn. */
  readonly signal: AbortSignal;
  /** Throws SessionLeaseLostError unless this holder's token is still the live one (call before appending). */
  assertHeld(): Promise<void>;
  release(): Promise<void>;
}

export function sessionLeaseKey(scope: { tenant: string; sessionId: string }): string {
  return `session:${scope.tenant}:${scope.sessionId}`;
}

/**
 * Takes the session's lease. Without `waitMs` (or 0) a held lease fails at once with SessionBusyError; with
 * it, retries until the holder releases (or its lease expires) or `waitMs` passes.
 */
export async function acquireSessionLease(
  store: StateStore,
  scope: { tenant: string; sessionId: string },
  options: { ttlMs?: number; waitMs?: number; holder?: string; signal?: AbortSignal } = {},
): Promise<SessionLease> {
  const key = sessionLeaseKey(scope);
  const ttlMs = options.ttlMs ?? DEFAULT_SESSION_LEASE_TTL_MS;
  const holder = options.holder ?? `${process.pid}-${randomUUID()}`;
  const deadline = Date.now() + (options.waitMs ?? 0);
  let pause = 25;
  for (;;) {
    const held = await tryHoldLease(store, key, { ttlMs, holder });
    if (held) {
      return {
        lease: held.lease,
        signal: held.signal,
        assertHeld: async () => {
          if (held.signal.aborted) throw new SessionLeaseLostError(scope.sessionId);
          const current = await store.getLease(key);
          if (!current || current.holder !== holder || current.token !== held.lease.token) {
            throw new SessionLeaseLostError(scope.sessionId);
          }
        },
        release: () => held.release(),
      };
    }
    if (Date.now() >= deadline || options.signal?.aborted) {
      throw new SessionBusyError(scope.sessionId, await store.getLease(key).catch(() => undefined));
    }
    await new Promise((r) => setTimeout(r, Math.min(pause, Math.max(1, deadline - Date.now()))));
    pause = Math.min(pause * 2, 500);
  }
}
