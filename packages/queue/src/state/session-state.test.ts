import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_BACKENDS, testEngines } from '../backends.test-helpers.js';
import {
  MAX_RECEIPT_MEMORIES,
  MAX_RECEIPTS,
  SESSION_STATE_TTL_MS,
  SessionState,
  sessionStateTtlMs,
} from './session-state.js';

const closer = new Closer();
afterEach(() => closer.closeAll());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(TEST_BACKENDS)('%s session state is bounded', (_kind, backend) => {
  it('keeps the newest receipts only, each naming a bounded number of memories', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('sessstate'));
    const state = new SessionState(worker.state, { transcriptDir: 'p', sessionId: 's1' });
    for (let i = 0; i < 30; i++) {
      await state.recordExtractReceipt({
        fromSeq: i * 10,
        toSeq: i * 10 + 10,
        memories: Array.from({ length: 100 }, (_, m) => ({
          path: `project_note_${i}_${m}_with_a_longish_descriptive_name.md`,
          type: 'project',
          action: 'created' as const,
        })),
        atMs: i,
      });
    }
    const receipts = await state.extractReceipts();
    expect(receipts.map((r) => r.toSeq)).toEqual([260, 270, 280, 290, 300]);
    expect(receipts).toHaveLength(MAX_RECEIPTS);
    for (const r of receipts) {
      expect(r.memories).toHaveLength(MAX_RECEIPT_MEMORIES);
      expect(r.more).toBe(100 - MAX_RECEIPT_MEMORIES);
    }
    // Whatever the forks wrote, the receipts stay bounded: 5 receipts × 20 names of ~100 bytes.
    expect(JSON.stringify(receipts).length).toBeLessThan(12 * 1024);
  });

  it('a retry of the same range merges into its receipt; another range stands beside it', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('sessmerge'));
    const state = new SessionState(worker.state, { transcriptDir: 'p', sessionId: 's3' });
    await state.recordExtractReceipt({
      fromSeq: 0,
      toSeq: 4,
      memories: [{ path: 'a.md', type: 'user', action: 'created' }],
      atMs: 1,
    });
    // The retry of a run that crashed between its receipt and its cursor: `a.md` is already on disk.
    await state.recordExtractReceipt({
      fromSeq: 0,
      toSeq: 4,
      memories: [
        { path: 'a.md', type: 'user', action: 'updated' },
        { path: 'b.md', type: 'project', action: 'created' },
      ],
      atMs: 2,
    });
    await state.recordExtractReceipt({ fromSeq: 4, toSeq: 6, memories: [], atMs: 3 });
    expect(await state.extractReceipts()).toEqual([
      {
        fromSeq: 0,
        toSeq: 4,
        memories: [
          { path: 'a.md', type: 'user', action: 'created' },
          { path: 'b.md', type: 'project', action: 'created' },
        ],
        atMs: 2,
      },
      { fromSeq: 4, toSeq: 6, memories: [], atMs: 3 },
    ]);
  });

  it('expires with the retention it is given', async () => {
    const { worker } = await testEngines(backend, closer, uniquePrefix('sessttl'));
    const state = new SessionState(worker.state, { transcriptDir: 'p', sessionId: 's2' }, { ttlMs: 200 });
    await state.advanceExtractCursor({ leafUuid: 'u', leafSeq: 3 });
    await state.updateSessionMemory({ initialized: true });
    await state.recordExtractReceipt({ fromSeq: 0, toSeq: 3, memories: [], atMs: 1 });
    expect(await state.extractCursor()).toEqual({ leafUuid: 'u', leafSeq: 3 });
    await sleep(400);
    expect(await state.extractCursor()).toBeUndefined();
    expect(await state.sessionMemory()).toEqual({});
    expect(await state.extractReceipts()).toEqual([]);
  });

  it('derives the TTL from the transcript retention in days', () => {
    expect(sessionStateTtlMs(7)).toBe(7 * 24 * 3600 * 1000);
    expect(sessionStateTtlMs(0)).toBe(SESSION_STATE_TTL_MS);
    expect(sessionStateTtlMs(undefined)).toBe(SESSION_STATE_TTL_MS);
  });
});
