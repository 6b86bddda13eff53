import type { ExtractReceipt } from '@engram/queue/state/session-state';
import { describe, expect, it } from 'vitest';
import { describeReceipts } from './agent-session.js';

// "Saved N memories" is what the user reads after a turn: it counts every file the jobs wrote, including
// those a receipt only counts (a receipt names at most 20).

const receipt = (paths: string[], more?: number): ExtractReceipt => ({
  fromSeq: 1,
  toSeq: 2,
  memories: paths.map((path) => ({ path, action: 'created' as const })),
  ...(more !== undefined ? { more } : {}),
  atMs: 0,
});

describe('describeReceipts', () => {
  it('says nothing was saved when no receipt names or counts a file', () => {
    expect(describeReceipts([receipt([])])).toBe('No new memories saved.');
  });

  it('names each file once across coalesced receipts', () => {
    expect(describeReceipts([receipt(['a.md', 'b.md']), receipt(['b.md'])])).toBe(
      'Saved 2 memories: a.md, b.md',
    );
  });

  it('counts the files a capped receipt did not name', () => {
    const names = Array.from({ length: 20 }, (_, i) => `m${i}.md`);
    const text = describeReceipts([receipt(names, 5)]);
    expect(text.startsWith('Saved 25 memories: m0.md, ')).toBe(true);
    expect(text.endsWith('m19.md and 5 more')).toBe(true);
  });
});
