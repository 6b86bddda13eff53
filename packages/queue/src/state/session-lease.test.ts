import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_BACKENDS, testEngines } from '../backends.test-helpers.js';
import {
  acquireSessionLease,
  SessionBusyError,
  SessionLeaseLostError,
  sessionLeaseKey,
} from './session-lease.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

describe.each(TEST_BACKENDS)('%s session lease', (_kind, backend) => {
  it('admits one writer per session, fences it, and frees the session on release', async () => {
    const { producer: a, worker: b } = await testEngines(backend, closer, uniquePrefix('lease'));
    await a.state.ready();
    const scope = { tenant: 'acme', sessionId: 's1' };
    const first = await acquireSessionLease(a.state, scope, { ttlMs: 5_000 });
    const busy = await acquireSessionLease(b.state, scope, { ttlMs: 5_000 }).catch((e) => e);
    expect(busy).toBeInstanceOf(SessionBusyError);
    expect((busy as SessionBusyError).code).toBe('SESSION_BUSY');
    // Another tenant's session of the same id is a different lease.
    const other = await acquireSessionLease(b.state, { tenant: 'other', sessionId: 's1' }, { ttlMs: 5_000 });
    await first.assertHeld();
    // A waiter gets the lease as soon as the holder releases it, with a newer fencing token.
    const waiting = acquireSessionLease(b.state, scope, { ttlMs: 5_000, waitMs: 5_000 });
    await first.release();
    const second = await waiting;
    expect(second.lease.token).toBeGreaterThan(first.lease.token);
    await expect(first.assertHeld()).rejects.toBeInstanceOf(SessionLeaseLostError);
    await second.assertHeld();
    await second.release();
    await other.release();
  });

  it('expires when its holder stops renewing (a dead replica), and the stale holder is fenced out', async () => {
    const { producer: a, worker: b } = await testEngines(backend, closer, uniquePrefix('lease'));
    await a.state.ready();
    const scope = { tenant: 'acme', sessionId: 's2' };
    // A holder that never renews: take the raw lease as a killed replica would have left it.
    const dead = await a.state.acquireLease(sessionLeaseKey(scope), 'dead-replica', 300);
    expect(dead).toBeDefined();
    await expect(acquireSessionLease(b.state, scope, { ttlMs: 5_000 })).rejects.toBeInstanceOf(
      SessionBusyError,
    );
    const next = await acquireSessionLease(b.state, scope, { ttlMs: 5_000, waitMs: 5_000 });
    expect(next.lease.token).toBeGreaterThan(dead!.token);
    expect(await a.state.renewLease(sessionLeaseKey(scope), 'dead-replica', dead!.token, 300)).toBe(false);
    await next.release();
  });
});
