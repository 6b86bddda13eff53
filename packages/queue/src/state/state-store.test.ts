import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_BACKENDS, testEngines } from '../backends.test-helpers.js';
import { tryHoldLease } from './held-lease.js';
import { SessionState } from './session-state.js';
import type { StateStore } from './state-store.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// One contract, two stores: RedisStateStore (Lua scripts) and PostgresStateStore (ON CONFLICT / transactions).
describe.each(TEST_BACKENDS)('%s state store', (kind, backend) => {
  async function store(): Promise<StateStore> {
    const { worker } = await testEngines(backend, closer, uniquePrefix('state'));
    expect(worker.state.engine).toBe(kind);
    return worker.state;
  }

  it('hands a lease over in FIFO order: waiters keep their place, the lease is reserved for the next one', async () => {
    const s = await store();
    const a = await s.acquireLeaseInTurn('w', 'a', 5_000, 60_000);
    expect(a.acquired).toBe(true);
    // b, c, d queue up behind a; asking again keeps one's place.
    const b = await s.acquireLeaseInTurn('w', 'b', 5_000, 60_000);
    const c = await s.acquireLeaseInTurn('w', 'c', 5_000, 60_000);
    expect(b).toMatchObject({ acquired: false, position: 0, holder: 'a' });
    expect(c).toMatchObject({ acquired: false, position: 1 });
    expect(await s.acquireLeaseInTurn('w', 'b', 5_000, 60_000)).toMatchObject({
      acquired: false,
      position: 0,
    });
    await s.acquireLeaseInTurn('w', 'd', 5_000, 60_000);
    // Released by a: reserved for b, so c (or a newcomer) cannot take it.
    const lease = a.acquired ? a.lease : undefined;
    expect(await s.releaseLeaseToNext('w', 'a', lease!.token, 2_000)).toEqual({ released: true, next: 'b' });
    expect(await s.acquireLeaseInTurn('w', 'e', 5_000, 60_000)).toMatchObject({
      acquired: false,
      holder: 'reserved:b',
      position: 2,
    });
    expect(await s.acquireLease('w', 'z', 5_000)).toBeUndefined();
    const b2 = await s.acquireLeaseInTurn('w', 'b', 5_000, 60_000);
    expect(b2.acquired).toBe(true);
    const bLease = b2.acquired ? b2.lease : undefined;
    expect(bLease!.token).toBeGreaterThan(lease!.token);
    // A stale holder cannot release a lease it lost.
    expect(await s.releaseLeaseToNext('w', 'a', lease!.token, 2_000)).toEqual({ released: false });
    // A reservation nobody claims (c's job is gone) expires: then anyone may take the lease.
    expect(await s.releaseLeaseToNext('w', 'b', bLease!.token, 100)).toEqual({ released: true, next: 'c' });
    await sleep(250);
    const z = await s.acquireLeaseInTurn('w', 'z', 5_000, 60_000);
    expect(z.acquired).toBe(true);
    if (!z.acquired) return;
    // The line goes on where it was: d, then e.
    expect(await s.releaseLeaseToNext('w', 'z', z.lease.token, 2_000)).toEqual({ released: true, next: 'd' });
  });

  it('a dead holder frees the line when its lease expires; the line is empty again after the last waiter', async () => {
    const s = await store();
    await s.acquireLeaseInTurn('dead', 'x', 1_000, 60_000);
    expect((await s.acquireLeaseInTurn('dead', 'y', 5_000, 60_000)).acquired).toBe(false);
    await sleep(1_300);
    const y = await s.acquireLeaseInTurn('dead', 'y', 5_000, 60_000);
    expect(y.acquired).toBe(true);
    if (!y.acquired) return;
    expect(await s.releaseLeaseToNext('dead', 'y', y.lease.token, 2_000)).toEqual({ released: true });
    expect(await s.getLease('dead')).toBeUndefined();
  });

  it('presence: of members joining at the same instant every one but the first sees another; left and expired members are gone', async () => {
    const s = await store();
    const seen = await Promise.all(Array.from({ length: 8 }, (_, i) => s.joinPresence('p', `m${i}`, 5_000)));
    // One atomic step each: the k-th to join saw the k before it (a read-modify-write lets racers miss each other).
    expect(seen.map((others) => others.length).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // Joining again renews a member; it never counts itself.
    expect((await s.joinPresence('p', 'm0', 5_000)).sort()).toEqual([
      'm1',
      'm2',
      'm3',
      'm4',
      'm5',
      'm6',
      'm7',
    ]);
    for (let i = 1; i < 8; i++) await s.leavePresence('p', `m${i}`);
    expect(await s.joinPresence('p', 'm0', 5_000)).toEqual([]);
    await s.leavePresence('p', 'm0');
    await s.leavePresence('p', 'never-joined');
    // A member that died stops counting when its time runs out.
    await s.joinPresence('q', 'dead', 150);
    expect(await s.joinPresence('q', 'alive', 5_000)).toEqual(['dead']);
    await sleep(400);
    expect(await s.joinPresence('q', 'late', 5_000)).toEqual(['alive']);
  });

  it('moves a versioned value only forward', async () => {
    const s = await store();
    expect(await s.setIfNewer('c', 5, { at: 5 })).toBe(true);
    expect(await s.setIfNewer('c', 3, { at: 3 })).toBe(false);
    expect(await s.setIfNewer('c', 5, { at: 'again' })).toBe(false);
    expect(await s.getVersioned('c')).toEqual({ seq: 5, value: { at: 5 } });
    expect(await s.setIfNewer('c', 9, { at: 9 })).toBe(true);
    expect((await s.getVersioned<{ at: number }>('c'))?.value.at).toBe(9);
  });

  it('keeps a versioned value monotonic under concurrent writers', async () => {
    const s = await store();
    const seqs = Array.from({ length: 40 }, (_, i) => ((i * 17) % 40) + 1);
    const results = await Promise.all(seqs.map((seq) => s.setIfNewer('race', seq, { seq })));
    expect(results.some(Boolean)).toBe(true);
    expect(await s.getVersioned('race')).toEqual({ seq: 40, value: { seq: 40 } });
  });

  it('stores JSON with and without a TTL, and deletes it', async () => {
    const s = await store();
    await s.setJson('plain', { a: [1, 'two', null], nested: { ok: true } });
    await s.setJson('short', 'gone soon', 150);
    expect(await s.getJson('plain')).toEqual({ a: [1, 'two', null], nested: { ok: true } });
    expect(await s.getJson('short')).toBe('gone soon');
    await sleep(300);
    expect(await s.getJson('short')).toBeUndefined();
    await s.delete('plain');
    expect(await s.getJson('plain')).toBeUndefined();
    expect(await s.getJson('never-set')).toBeUndefined();
  });

  it('lets a versioned value expire after its TTL, after which any seq may start again', async () => {
    const s = await store();
    expect(await s.setIfNewer('v', 10, 'ten', 150)).toBe(true);
    // An advance without a TTL keeps the live value's TTL (Redis HSET semantics).
    expect(await s.setIfNewer('v', 11, 'eleven')).toBe(true);
    await sleep(300);
    expect(await s.getVersioned('v')).toBeUndefined();
    expect(await s.setIfNewer('v', 2, 'two')).toBe(true);
    expect(await s.getVersioned('v')).toEqual({ seq: 2, value: 'two' });
  });

  it('grants a lease to one holder at a time with strictly increasing fencing tokens', async () => {
    const s = await store();
    const a = await s.acquireLease('p', 'worker-a', 10_000);
    expect(a?.token).toBe(1);
    expect(a?.expiresAtMs).toBeGreaterThan(Date.now() + 5_000);
    expect(await s.acquireLease('p', 'worker-b', 10_000)).toBeUndefined();
    expect(await s.renewLease('p', 'worker-b', 1, 10_000)).toBe(false);
    expect(await s.renewLease('p', 'worker-a', a!.token, 10_000)).toBe(true);
    expect(await s.releaseLease('p', 'worker-b', a!.token)).toBe(false);
    expect(await s.releaseLease('p', 'worker-a', a!.token)).toBe(true);
    const b = await s.acquireLease('p', 'worker-b', 10_000);
    expect(b?.token).toBe(2);
    expect((await s.getLease('p'))?.holder).toBe('worker-b');
  });

  it('hands a contested lease to exactly one of many concurrent acquirers', async () => {
    const s = await store();
    const attempts = await Promise.all(
      Array.from({ length: 12 }, (_, i) => s.acquireLease('contested', `w${i}`, 10_000)),
    );
    const winners = attempts.filter((lease) => lease !== undefined);
    expect(winners).toHaveLength(1);
    expect(winners[0]?.token).toBe(1);
    expect((await s.getLease('contested'))?.holder).toBe(winners[0]?.holder);
  });

  it('frees a lease whose holder stopped renewing after its TTL', async () => {
    const s = await store();
    const a = await s.acquireLease('dead', 'crashed-worker', 150);
    expect(a).toBeDefined();
    await sleep(300);
    expect(await s.getLease('dead')).toBeUndefined();
    const b = await s.acquireLease('dead', 'survivor', 10_000);
    expect(b?.token).toBe(a!.token + 1);
    // The crashed holder's late renewal and release are refused: its token is fenced off.
    expect(await s.renewLease('dead', 'crashed-worker', a!.token, 10_000)).toBe(false);
    expect(await s.releaseLease('dead', 'crashed-worker', a!.token)).toBe(false);
  });

  it('adds counters atomically under concurrent writers, apart from other keys', async () => {
    const s = await store();
    expect(await s.getCounters('c')).toEqual({});
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => s.addCounters('c', { a: 2, ...(i % 4 === 0 ? { b: 5 } : {}) })),
    );
    await s.addCounters('c', {});
    await s.addCounters('other', { a: 1 });
    expect(await s.getCounters('c')).toEqual({ a: 80, b: 50 });
    expect(await s.getCounters('other')).toEqual({ a: 1 });
    // A counter key shares nothing with a JSON value of the same name.
    await s.setJson('c', { x: 1 });
    expect(await s.getCounters('c')).toEqual({ a: 80, b: 50 });
  });

  it('throttles with set-if-absent', async () => {
    const s = await store();
    expect(await s.setIfAbsent('scan', 1, 200)).toBe(true);
    expect(await s.setIfAbsent('scan', 2, 200)).toBe(false);
    expect(await s.getJson('scan')).toBe(1);
    await sleep(300);
    expect(await s.setIfAbsent('scan', 3, 200)).toBe(true);
    expect(await s.getJson('scan')).toBe(3);
  });

  it('keeps each session separate and merges session-memory markers', async () => {
    const s = await store();
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

  it('isolates namespaces', async () => {
    const a = await store();
    const b = await store();
    await a.setJson('k', 'a');
    expect(await b.getJson('k')).toBeUndefined();
    await a.acquireLease('l', 'x', 10_000);
    expect((await b.acquireLease('l', 'y', 10_000))?.token).toBe(1);
  });

  it('holds a lease past its TTL by renewing it, and signals when it is lost', async () => {
    const s = await store();
    const held = await tryHoldLease(s, 'project', { ttlMs: 300 });
    expect(held).toBeDefined();
    expect(await tryHoldLease(s, 'project', { ttlMs: 300 })).toBeUndefined();
    await sleep(700);
    expect(held!.signal.aborted).toBe(false);
    expect((await s.getLease('project'))?.token).toBe(held!.lease.token);
    // Someone breaks the lease (e.g. an operator): the holder learns at its next renewal.
    await s.releaseLease('project', held!.lease.holder, held!.lease.token);
    await s.acquireLease('project', 'intruder', 10_000);
    await sleep(250);
    expect(held!.signal.aborted).toBe(true);
    await held!.release();
    expect((await s.getLease('project'))?.holder).toBe('intruder');
  });
});
