import { describe, expect, it } from 'vitest';
import { JOB_CATALOG } from '../catalog.js';
import { MAX_PAYLOAD_BYTES, payloadBytes } from './common.js';
import { capRecallQuery, RECALL_QUERY_HEAD_CHARS, RECALL_QUERY_TAIL_CHARS } from './recall.js';

const base = {
  sessionId: 'abc-123',
  projectDir: '-home-me-repo',
  transcriptDir: '-home-me-repo',
  leafUuid: '0b5f3f9e-1c1d-4c39-a3c4-9d0b6f2d8f10',
  leafSeq: 12,
  requestedAt: '2026-11-30T10:00:00.000Z',
};

describe('job payload schemas', () => {
  it('accepts a well-formed extract payload well under 4 KiB', () => {
    const parsed = JOB_CATALOG.extract.payload.parse(base);
    expect(payloadBytes(parsed)).toBeLessThan(MAX_PAYLOAD_BYTES);
  });

  it.each([
    ['traversal in session id', { sessionId: '../../etc/passwd' }],
    ['absolute path as project dir', { projectDir: '/etc' }],
    ['dots in project dir', { projectDir: '..' }],
    ['NUL in transcript dir', { transcriptDir: 'a\u0000b' }],
    ['backslash in session id', { sessionId: 'a\\b' }],
    ['zero leaf seq', { leafSeq: 0 }],
    ['fractional leaf seq', { leafSeq: 1.5 }],
    ['missing leaf uuid', { leafUuid: undefined }],
    ['not a timestamp', { requestedAt: 'yesterday' }],
  ])('rejects %s', (_label, patch) => {
    const result = JOB_CATALOG.extract.payload.safeParse({ ...base, ...patch });
    expect(result.success).toBe(false);
  });

  it('caps the recall query to a bounded head and tail', () => {
    const huge = `${'h'.repeat(50_000)}${'t'.repeat(30_000)}`;
    const capped = capRecallQuery(huge);
    expect(capped.startsWith('h'.repeat(RECALL_QUERY_HEAD_CHARS))).toBe(true);
    expect(capped.endsWith('t'.repeat(RECALL_QUERY_TAIL_CHARS))).toBe(true);
    expect(capped).toContain('77000 characters omitted');
    const payload = JOB_CATALOG.recall.payload.parse({
      sessionId: 's',
      projectDir: '-p',
      transcriptDir: '-p',
      query: capped,
      alreadySurfaced: [],
      alreadyRead: [],
      recentTools: [],
      requestedAt: base.requestedAt,
    });
    expect(payloadBytes(payload)).toBeLessThan(4_000);
    expect(capRecallQuery('short prompt')).toBe('short prompt');
  });

  it('deduplicates extract per session and dream per project', () => {
    expect(JOB_CATALOG.extract.deduplicationId?.(JOB_CATALOG.extract.payload.parse(base))).toBe(
      'extract:-home-me-repo:abc-123',
    );
    const dream = JOB_CATALOG.dream.payload.parse({ ...base, sessionIds: [] });
    expect(dream.force).toBe(false);
    expect(JOB_CATALOG.dream.deduplicationId?.(dream)).toBe('dream:-home-me-repo');
    expect(JOB_CATALOG['session-memory'].deduplicationId).toBeUndefined();
  });
});
