import { describe, expect, it } from 'vitest';
import { memoryWorkFailed } from './extraction-outcome.js';

// The exit-code rule of `engram run` (EXIT.memory = 3 only when the turn's memory work was lost).

describe('memoryWorkFailed', () => {
  it('is true for work that could not be queued nor kept, and for a job that failed for good', () => {
    expect(memoryWorkFailed({ status: 'not-queued', reason: 'queue down' })).toBe(true);
    expect(memoryWorkFailed({ status: 'failed', reason: 'x', attempts: 1, waitedMs: 5 })).toBe(true);
  });

  it('is false for work kept in the session outbox (durable), and for the other outcomes', () => {
    expect(memoryWorkFailed({ status: 'not-queued', reason: 'queue down', kept: true })).toBe(false);
    expect(memoryWorkFailed({ status: 'pending', waitedMs: 1 })).toBe(false);
    expect(memoryWorkFailed({ status: 'done', receipts: [], waitedMs: 1 })).toBe(false);
    expect(memoryWorkFailed({ status: 'skipped', reason: 'wrote memory' })).toBe(false);
  });
});
