import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_BACKENDS, testEngines } from '../backends.test-helpers.js';
import { dreamJob, dreamReceiptKey } from '../jobs/dream.js';
import { extractJob } from '../jobs/extract.js';
import { teamSyncJob } from '../jobs/team-sync.js';
import { JobProducer } from '../producer.js';
import {
  consolidationLeaseKey,
  lastConsolidatedAt,
  tryAcquireConsolidation,
  tryClaimSessionScan,
} from './consolidation-lock.js';
import { acquireSessionLease, SessionBusyError } from './session-lease.js';
import { SessionState } from './session-state.js';
import { tenantKey } from './tenant-scope.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

// Two hosted tenants that chose the same things: a session id and a project path string that sanitize to
// the same directory names. Plus the operator (no tenant), with the same names again.
const TD = '-workspace-app';
const SID = 'same-session-id';
const A = 'acme';
const B = 'bravo';

describe.each(TEST_BACKENDS)('tenant-scoped state on %s', (_kind, backend) => {
  it('keeps two tenants’ (and the operator’s) session state apart for one session id and directory', async () => {
    const { producer, worker } = await testEngines(backend, closer, uniquePrefix('tscope'));
    const a = new SessionState(worker.state, { tenant: A, transcriptDir: TD, sessionId: SID });
    const b = new SessionState(producer.state, { tenant: B, transcriptDir: TD, sessionId: SID });
    const local = new SessionState(worker.state, { transcriptDir: TD, sessionId: SID });

    expect(await a.advanceExtractCursor({ leafUuid: 'a-9', leafSeq: 9 })).toBe(true);
    // B's cursor is its own: a lower seq is not "stale" against A's.
    expect(await b.advanceExtractCursor({ leafUuid: 'b-3', leafSeq: 3 })).toBe(true);
    expect(await a.extractCursor()).toEqual({ leafUuid: 'a-9', leafSeq: 9 });
    expect(await b.extractCursor()).toEqual({ leafUuid: 'b-3', leafSeq: 3 });
    expect(await local.extractCursor()).toBeUndefined();

    await a.noteExtractRequested({ leafUuid: 'a-12', leafSeq: 12 });
    expect(await b.latestExtractRequest()).toBeUndefined();
    await a.recordExtractReceipt({
      fromSeq: 0,
      toSeq: 9,
      memories: [{ path: 'a.md', action: 'created' }],
      atMs: 1,
    });
    expect(await b.extractReceipts()).toEqual([]);
    expect(await local.extractReceipts()).toEqual([]);
    await b.updateSessionMemory({ initialized: true, tokensAtLastUpdate: 7 });
    expect(await a.sessionMemory()).toEqual({});
    expect(await b.sessionMemory()).toEqual({ initialized: true, tokensAtLastUpdate: 7 });

    // The session-memory lease: both tenants can hold their own at once.
    const la = await worker.state.acquireLease(a.sessionMemoryLeaseKey, 'wa', 10_000);
    const lb = await worker.state.acquireLease(b.sessionMemoryLeaseKey, 'wb', 10_000);
    expect(la).toBeDefined();
    expect(lb).toBeDefined();
    expect(new Set([...a.keys, ...b.keys, ...local.keys]).size).toBe(3 * a.keys.length);
    for (const k of a.keys) expect(k.startsWith(`tenant:${A}:`)).toBe(true);
    // The operator's keys are the ones Engram always wrote (existing local data keeps working).
    expect(local.keys).toContain(`session:${TD}:${SID}:extract-cursor`);
  });

  it('keeps the hosted session lease per tenant for one session id', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('tslease'));
    const a = await acquireSessionLease(worker.state, { tenant: A, sessionId: SID }, { ttlMs: 10_000 });
    const b = await acquireSessionLease(worker.state, { tenant: B, sessionId: SID }, { ttlMs: 10_000 });
    await expect(
      acquireSessionLease(worker.state, { tenant: A, sessionId: SID }, { ttlMs: 10_000 }),
    ).rejects.toBeInstanceOf(SessionBusyError);
    await a.release();
    await b.release();
  });

  it('keeps project state (writer-turn, consolidation, scan throttle, dream receipt) apart for one project path', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('tproj'));
    const s = worker.state;
    const pa = { tenant: A, projectDir: TD };
    const pb = { tenant: B, projectDir: TD };
    const lockA = await tryAcquireConsolidation(s, pa, 'dream-a', { ttlMs: 10_000 });
    expect(lockA).toBeDefined();
    // Tenant B's consolidation of "the same" project is not blocked by A's, nor is the operator's.
    const lockB = await tryAcquireConsolidation(s, pb, 'dream-b', { ttlMs: 10_000 });
    expect(lockB).toBeDefined();
    expect(await tryAcquireConsolidation(s, TD, 'dream-local', { ttlMs: 10_000 })).toBeDefined();
    await lockA!.release({ success: true });
    await lockB!.release({ success: false });
    expect(await lastConsolidatedAt(s, pa)).toBe(lockA!.startedAtMs);
    expect(await lastConsolidatedAt(s, pb)).toBeUndefined();

    expect(await tryClaimSessionScan(s, pa, 60_000)).toBe(true);
    expect(await tryClaimSessionScan(s, pb, 60_000)).toBe(true);
    expect(await tryClaimSessionScan(s, pa, 60_000)).toBe(false);

    await s.setJson(dreamReceiptKey(pa), { atMs: 1 });
    expect(await s.getJson(dreamReceiptKey(pb))).toBeUndefined();
    expect(consolidationLeaseKey(pa)).not.toBe(consolidationLeaseKey(pb));
  });

  it('adopts a hosted session’s pre-tenant-key cursor, so an upgrade loses none and cannot move it back', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('tlegacy'));
    // What a hosted tenant's session wrote before keys carried the tenant: the unprefixed keys.
    const before = new SessionState(worker.state, { transcriptDir: TD, sessionId: 'uuid-1' });
    await before.advanceExtractCursor({ leafUuid: 'l-40', leafSeq: 40 });
    await before.recordExtractReceipt({ fromSeq: 0, toSeq: 40, memories: [], atMs: 5 });

    const after = new SessionState(worker.state, { tenant: A, transcriptDir: TD, sessionId: 'uuid-1' });
    expect(await after.extractCursor()).toEqual({ leafUuid: 'l-40', leafSeq: 40 });
    expect((await after.extractReceipts()).map((r) => r.toSeq)).toEqual([40]);
    // Adopted into the tenant's own key.
    expect((await worker.state.getVersioned(tenantKey(A, `session:${TD}:uuid-1:extract-cursor`)))?.seq).toBe(
      40,
    );
    // A stale advance (a re-delivered old job) stays a no-op, a newer one moves on.
    const fresh = new SessionState(worker.state, { tenant: A, transcriptDir: TD, sessionId: 'uuid-2' });
    await new SessionState(worker.state, { transcriptDir: TD, sessionId: 'uuid-2' }).advanceExtractCursor({
      leafUuid: 'l-30',
      leafSeq: 30,
    });
    expect(await fresh.advanceExtractCursor({ leafUuid: 'l-20', leafSeq: 20 })).toBe(false);
    expect(await fresh.advanceExtractCursor({ leafUuid: 'l-31', leafSeq: 31 })).toBe(true);
    expect(await fresh.extractCursor()).toEqual({ leafUuid: 'l-31', leafSeq: 31 });
  });

  it('does not coalesce two tenants’ jobs for one session or project into one', async () => {
    const { producer } = await testEngines(backend, closer, uniquePrefix('tdedup'));
    const jobs = closer.add(new JobProducer(producer));
    const extract = (tenant: string | undefined, leafSeq: number) => ({
      ...(tenant ? { tenant } : {}),
      projectDir: TD,
      transcriptDir: TD,
      sessionId: SID,
      leafUuid: `leaf-${leafSeq}`,
      leafSeq,
      requestedAt: new Date().toISOString(),
    });
    const ra = await jobs.enqueue('extract', extract(A, 2));
    const rb = await jobs.enqueue('extract', extract(B, 3));
    const rl = await jobs.enqueue('extract', extract(undefined, 4));
    expect(new Set([ra.jobId, rb.jobId, rl.jobId]).size).toBe(3);
    // The same tenant's second request still joins its pending job.
    const ra2 = await jobs.enqueue('extract', extract(A, 5));
    expect(ra2.jobId).toBe(ra.jobId);
    // And each tenant's newest request is recorded in its own scope.
    expect(
      await new SessionState(producer.state, {
        tenant: A,
        transcriptDir: TD,
        sessionId: SID,
      }).latestExtractRequest(),
    ).toEqual({ leafUuid: 'leaf-5', leafSeq: 5 });
    expect(
      await new SessionState(producer.state, {
        tenant: B,
        transcriptDir: TD,
        sessionId: SID,
      }).latestExtractRequest(),
    ).toEqual({ leafUuid: 'leaf-3', leafSeq: 3 });

    const ids = (f: (p: { tenant?: string; projectDir: string }) => string) => [
      f({ tenant: A, projectDir: TD }),
      f({ tenant: B, projectDir: TD }),
      f({ projectDir: TD }),
    ];
    expect(new Set(ids((p) => dreamJob.deduplicationId(p as never))).size).toBe(3);
    expect(
      new Set(ids((p) => teamSyncJob.deduplicationId({ ...p, action: 'pull', debounceMs: 0 } as never))).size,
    ).toBe(3);
    // The operator's ids are unchanged, so jobs waiting from before an upgrade still coalesce.
    expect(extractJob.deduplicationId(extract(undefined, 1))).toBe(`extract:${TD}:${SID}`);
    expect(dreamJob.deduplicationId({ projectDir: TD } as never)).toBe(`dream:${TD}`);
  });
});
