import { describe, expect, it } from 'vitest';
import { JOB_CATALOG } from '../catalog.js';
import { MAX_PAYLOAD_BYTES, payloadBytes } from './common.js';
import { dreamProgress, dreamResult } from './dream.js';

const base = {
  projectDir: '-home-me-repo',
  transcriptDir: '-home-me-repo',
  sessionIds: [],
  requestedAt: '2026-11-30T10:00:00.000Z',
};

describe('dream schemas', () => {
  it('accepts the original payload shape unchanged (no fork source, default thresholds)', () => {
    const p = JOB_CATALOG.dream.payload.parse({ ...base, triggeredBy: 'abc' });
    expect(p).toEqual({ ...base, triggeredBy: 'abc', force: false });
  });

  it('accepts a fork source of session + leaf and the gate thresholds, well under 4 KiB with 50 sessions', () => {
    const p = JOB_CATALOG.dream.payload.parse({
      ...base,
      sessionIds: Array.from(
        { length: 50 },
        (_, i) => `3f1e2d4c-aaaa-4bbb-8ccc-1234567890${String(i).padStart(2, '0')}`,
      ),
      sessionId: 'abc',
      leafUuid: '0b5f3f9e-1c1d-4c39-a3c4-9d0b6f2d8f10',
      minHours: 12,
      minSessions: 3,
    });
    expect(p.leafUuid).toBe('0b5f3f9e-1c1d-4c39-a3c4-9d0b6f2d8f10');
    expect(payloadBytes(p)).toBeLessThan(MAX_PAYLOAD_BYTES);
  });

  it.each([
    ['a session without a leaf', { sessionId: 'abc' }],
    ['a leaf without a session', { leafUuid: 'u1' }],
    ['a traversal leaf', { sessionId: 'abc', leafUuid: '../x' }],
    ['zero hours', { minHours: 0 }],
    ['fractional sessions', { minSessions: 2.5 }],
  ])('rejects %s', (_label, patch) => {
    expect(JOB_CATALOG.dream.payload.safeParse({ ...base, ...patch }).success).toBe(false);
  });

  it('describes progress and the receipt', () => {
    expect(dreamProgress.parse({ phase: 'consolidate', filesTouched: ['a.md'], turns: 3 }).phase).toBe(
      'consolidate',
    );
    expect(dreamProgress.safeParse({ phase: 'updating', filesTouched: [], turns: 0 }).success).toBe(false);
    const receipt = dreamResult.parse({
      outcome: 'skipped-locked',
      projectDir: '-p',
      reason: 'busy',
      sessionsReviewed: 0,
      files: { created: [], updated: [], deleted: [] },
      indexLines: { before: 0, after: 0 },
      turns: 0,
      usage: { inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 },
      deniedToolCalls: 0,
    });
    expect(receipt.outcome).toBe('skipped-locked');
  });
});
