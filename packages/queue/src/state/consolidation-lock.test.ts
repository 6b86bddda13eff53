import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_BACKENDS, testEngines } from '../backends.test-helpers.js';
import {
  lastConsolidatedAt,
  readConsolidationState,
  recordConsolidatedAt,
  tryAcquireConsolidation,
  tryClaimSessionScan,
} from './consolidation-lock.js';
import type { StateStore } from './state-store.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const P = '-home-me-repo';

describe.each(TEST_BACKENDS)('consolidation lock on %s', (kind, backend) => {
  async function store(): Promise<StateStore> {
    const { worker } = await testEngines(backend, closer, uniquePrefix('dreamlock'));
    expect(worker.state.engine).toBe(kind);
    return worker.state;
  }

  it('records the start as "last consolidated at", blocks a second holder, and keeps the time on success', async () => {
    const s = await store();
    expect(await readConsolidationState(s, P)).toEqual({ lastConsolidatedAtMs: undefined, recorded: false });
    const before = Date.now();
    const a = await tryAcquireConsolidation(s, P, 'worker-a', { ttlMs: 10_000 });
    expect(a).toMatchObject({ holder: 'worker-a', priorConsolidatedAtMs: undefined });
    // Store clock vs this process's clock: allow a little skew.
    expect(a!.startedAtMs).toBeGreaterThan(before - 5_000);
    expect(await lastConsolidatedAt(s, P)).toBe(a!.startedAtMs);
    expect((await readConsolidationState(s, P)).running).toMatchObject({
      holder: 'worker-a',
      token: a!.token,
    });
    expect(await tryAcquireConsolidation(s, P, 'worker-b', { ttlMs: 10_000 })).toBeUndefined();

    expect(await a!.release({ success: true })).toBe(true);
    expect(await a!.release({ success: false })).toBe(true); // idempotent: the first outcome stands
    expect(await readConsolidationState(s, P)).toEqual({
      lastConsolidatedAtMs: a!.startedAtMs,
      recorded: true,
    });

    const b = await tryAcquireConsolidation(s, P, 'worker-b', { ttlMs: 10_000 });
    expect(b!.token).toBeGreaterThan(a!.token);
    expect(b!.priorConsolidatedAtMs).toBe(a!.startedAtMs);
    await b!.release({ success: true });
  });

  it('restores the previous time when a run fails', async () => {
    const s = await store();
    const earlier = Date.parse('2026-11-01T00:00:00Z');
    expect(await recordConsolidatedAt(s, P, earlier)).toBe(true);
    expect(await lastConsolidatedAt(s, P)).toBe(earlier);
    const run = await tryAcquireConsolidation(s, P, 'w', { ttlMs: 10_000 });
    expect(run!.priorConsolidatedAtMs).toBe(earlier);
    expect(await lastConsolidatedAt(s, P)).toBe(run!.startedAtMs);
    expect(await run!.release({ success: false })).toBe(true);
    expect(await lastConsolidatedAt(s, P)).toBe(earlier);
    // A failed first-ever run goes back to "never".
    const other = '-other';
    const first = await tryAcquireConsolidation(s, other, 'w', { ttlMs: 10_000 });
    await first!.release({ success: false });
    expect(await lastConsolidatedAt(s, other)).toBeUndefined();
  });

  it('treats a holder that stopped renewing as dead after the TTL: time rolled back, lock free, its late writes fenced', async () => {
    const s = await store();
    const earlier = Date.parse('2026-11-02T00:00:00Z');
    await recordConsolidatedAt(s, P, earlier);
    // A TTL the first read lands well inside even on a loaded machine (200 ms expired before it under CI load).
    const dead = await tryAcquireConsolidation(s, P, 'killed-worker', { ttlMs: 1_500 });
    expect(await lastConsolidatedAt(s, P)).toBe(dead!.startedAtMs);
    await sleep(1_700);
    expect(await readConsolidationState(s, P)).toEqual({ lastConsolidatedAtMs: earlier, recorded: true });

    const retry = await tryAcquireConsolidation(s, P, 'retry', { ttlMs: 10_000 });
    // The dead run's start is not "last consolidated at": the retry would restore the time before it.
    expect(retry!.priorConsolidatedAtMs).toBe(earlier);
    expect(await dead!.heartbeat()).toBe(false);
    expect(await dead!.release({ success: true })).toBe(false);
    expect(await lastConsolidatedAt(s, P)).toBe(retry!.startedAtMs);
    await retry!.release({ success: true });
    expect(await lastConsolidatedAt(s, P)).toBe(retry!.startedAtMs);
  });

  it('stays held past its TTL while the heartbeat runs', async () => {
    const s = await store();
    const run = await tryAcquireConsolidation(s, P, 'alive', { ttlMs: 300 });
    for (let i = 0; i < 6; i++) {
      await sleep(100);
      expect(await run!.heartbeat()).toBe(true);
    }
    expect(await tryAcquireConsolidation(s, P, 'other', { ttlMs: 300 })).toBeUndefined();
    expect((await readConsolidationState(s, P)).running?.holder).toBe('alive');
    await run!.release({ success: true });
  });

  it('hands a contested lock to exactly one of many concurrent acquirers', async () => {
    const s = await store();
    const all = await Promise.all(
      Array.from({ length: 8 }, (_, i) => tryAcquireConsolidation(s, P, `w${i}`, { ttlMs: 10_000 })),
    );
    expect(all.filter(Boolean)).toHaveLength(1);
  });

  it('refuses to record an outside consolidation while one runs, and throttles scans per project', async () => {
    const s = await store();
    const run = await tryAcquireConsolidation(s, P, 'w', { ttlMs: 10_000 });
    expect(await recordConsolidatedAt(s, P, 1)).toBe(false);
    await run!.release({ success: true });
    expect(await tryClaimSessionScan(s, P, 10_000)).toBe(true);
    expect(await tryClaimSessionScan(s, P, 10_000)).toBe(false);
    expect(await tryClaimSessionScan(s, '-another', 10_000)).toBe(true);
  });
});
