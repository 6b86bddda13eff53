import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { RedisStateStore } from './redis-state-store.js';
import { SessionState } from './session-state.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

function store() {
  return closer.add(new RedisStateStore(inject('redisUrl'), uniquePrefix('state')));
}

describe('RedisStateStore', () => {
  it('moves a versioned value only forward', async () => {
    const s = store();
    expect(await s.setIfNewer('c', 5, { at: 5 })).toBe(true);
    expect(await s.setIfNewer('c', 3, { at: 3 })).toBe(false);
    expect(await s.setIfNewer('c', 5, { at: 'again' })).toBe(false);
    expect(await s.getVersioned('c')).toEqual({ seq: 5, value: { at: 5 } });
    expect(await s.setIfNewer('c', 9, { at: 9 })).toBe(true);
    expect((await s.getVersioned<{ at: number }>('c'))?.value.at).toBe(9);
  });

  it('grants a lease to one holder at a time with strictly increasing fencing tokens', async () => {
    const s = store();
    const a = await s.acquireLease('p', 'worker-a', 10_000);
    expect(a?.token).toBe(1);
    expect(await s.acquireLease('p', 'worker-b', 10_000)).toBeUndefined();
    expect(await s.renewLease('p', 'worker-b', 1, 10_000)).toBe(false);
    expect(await s.renewLease('p', 'worker-a', a!.token, 10_000)).toBe(true);
    expect(await s.releaseLease('p', 'worker-b', a!.token)).toBe(false);
    expect(await s.releaseLease('p', 'worker-a', a!.token)).toBe(true);
    const b = await s.acquireLease('p', 'worker-b', 10_000);
    expect(b?.token).toBe(2);
    expect((await s.getLease('p'))?.holder).toBe('worker-b');
  });

  it('frees a lease whose holder stopped renewing after its TTL', async () => {
    const s = store();
    const a = await s.acquireLease('dead', 'crashed-worker', 150);
    expect(a).toBeDefined();
    await new Promise((r) => setTimeout(r, 300));
    const b = await s.acquireLease('dead', 'survivor', 10_000);
    expect(b?.token).toBe(a!.token + 1);
    // The crashed holder's late renewal is refused: its token is fenced off.
    expect(await s.renewLease('dead', 'crashed-worker', a!.token, 10_000)).toBe(false);
  });

  it('throttles with set-if-absent', async () => {
    const s = store();
    expect(await s.setIfAbsent('scan', 1, 200)).toBe(true);
    expect(await s.setIfAbsent('scan', 2, 200)).toBe(false);
    await new Promise((r) => setTimeout(r, 300));
    expect(await s.setIfAbsent('scan', 3, 200)).toBe(true);
  });

  it('keeps each session separate and merges session-memory markers', async () => {
    const s = store();
    const one = new SessionState(s, { transcriptDir: '-a', sessionId: 's1' });
    const two = new SessionState(s, { transcriptDir: '-a', sessionId: 's2' });
    await one.advanceExtractCursor({ leafUuid: 'u7', leafSeq: 7 });
    expect(await one.extractCursor()).toEqual({ leafUuid: 'u7', leafSeq: 7 });
    expect(await two.extractCursor()).toBeUndefined();
    expect(await one.advanceExtractCursor({ leafUuid: 'u3', leafSeq: 3 })).toBe(false);
    await one.updateSessionMemory({ startedAtMs: 1 });
    expect(await one.updateSessionMemory({ tokensAtLastUpdate: 12_000 })).toEqual({
      startedAtMs: 1,
      tokensAtLastUpdate: 12_000,
    });
  });
});

describe('tryHoldLease', () => {
  it('holds a lease past its TTL by renewing it, and signals when it is lost', async () => {
    const { tryHoldLease } = await import('./held-lease.js');
    const s = store();
    const held = await tryHoldLease(s, 'project', { ttlMs: 300 });
    expect(held).toBeDefined();
    expect(await tryHoldLease(s, 'project', { ttlMs: 300 })).toBeUndefined();
    await new Promise((r) => setTimeout(r, 700));
    expect(held!.signal.aborted).toBe(false);
    expect((await s.getLease('project'))?.token).toBe(held!.lease.token);
    // Someone breaks the lease (e.g. an operator): the holder learns at its next renewal.
    await s.releaseLease('project', held!.lease.holder, held!.lease.token);
    await s.acquireLease('project', 'intruder', 10_000);
    await new Promise((r) => setTimeout(r, 250));
    expect(held!.signal.aborted).toBe(true);
    await held!.release();
    expect((await s.getLease('project'))?.holder).toBe('intruder');
  });
});
