import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tokenCountWithEstimation } from '../model/tokens.js';
import { buildChain } from '../transcript/chain.js';
import { isCompactBoundary } from '../transcript/entry.js';
import { renderChainToApiMessages } from '../transcript/render.js';
import { TranscriptStore } from '../transcript/store.js';
import { ChainBuilder } from './chain.test-helpers.js';
import { trySessionMemoryCompaction } from './session-memory-compact.js';

const NOTES = '# Current State\n_now_\nFixing the flaky retry test in src/retry.ts\n';

function session(turns = 30) {
  const c = new ChainBuilder();
  for (let i = 0; i < turns; i++) {
    c.user(`prompt ${i} ${'p'.repeat(4_000)}`);
    const a = c.assistant({ text: `working on ${i}`, tools: 1, usageTokens: 5_000 + i * 2_200 });
    c.results(a, 2_000);
    c.assistant({ text: `answer ${i} ${'a'.repeat(2_000)}`, usageTokens: 6_000 + i * 2_200 });
  }
  return c;
}

describe('trySessionMemoryCompaction', () => {
  it('replaces everything the notes cover by a boundary and one summary message, keeping the tail verbatim', () => {
    const c = session();
    const covered = c.entries.at(-9)!; // the last reply of turn 27
    const skips: string[] = [];
    const result = trySessionMemoryCompaction({
      entries: c.entries,
      summary: { content: NOTES },
      lastSummarizedUuid: covered.uuid,
      transcriptPathForPointer: '/home/u/.engram/projects/-p/sess-1.jsonl',
      threshold: 100_000,
      onSkip: (r) => skips.push(r),
    })!;
    expect(skips).toEqual([]);
    expect(result.via).toBe('session-memory');
    expect(result.boundary).toMatchObject({
      type: 'system',
      subtype: 'compact_boundary',
      parentUuid: null,
      logicalParentUuid: c.entries.at(-1)!.uuid,
      compactMetadata: { trigger: 'auto', preTokens: tokenCountWithEstimation(c.entries) },
    });
    expect(result.summary).toMatchObject({
      type: 'user',
      isCompactSummary: true,
      parentUuid: result.boundary.uuid,
    });
    const text = result.summary.message!.content as string;
    expect(text).toContain('This session continues an earlier conversation that ran out of context.');
    expect(text).toContain('Fixing the flaky retry test in src/retry.ts');
    expect(text).toContain('read the full transcript at /home/u/.engram/projects/-p/sess-1.jsonl');
    expect(text).toContain('The most recent messages follow verbatim.');
    expect(text).not.toContain('shortened for length');
    // The tail: at least everything after the covered message, re-chained after the summary.
    expect(result.kept.length).toBeGreaterThanOrEqual(8);
    expect(result.kept.map((e) => e.compactedFromUuid)).toEqual(
      c.entries.slice(c.entries.length - result.kept.length).map((e) => e.uuid),
    );
    expect(result.kept[0]!.parentUuid).toBe(result.summary.uuid);
    // Model-visible content is unchanged; stale usage is gone so the next estimate is not the old size.
    expect(renderChainToApiMessages(result.kept)).toEqual(
      renderChainToApiMessages(c.entries.slice(c.entries.length - result.kept.length)),
    );
    expect(result.kept.some((e) => e.message?.usage)).toBe(false);
    expect(result.postTokens).toBeLessThan(result.preTokens);
    expect(result.newEntries).toEqual([result.boundary, result.summary, ...result.kept]);
  });

  it('points at the full notes when sections were cut', () => {
    const c = session(3);
    const result = trySessionMemoryCompaction({
      entries: c.entries,
      summary: { content: NOTES, truncated: true, summaryPath: '/x/summary.md' },
      threshold: 1_000_000,
    })!;
    expect(result.summary.message!.content).toContain('the complete notes are in /x/summary.md');
  });

  it('returns null when the covered message is not in the chain, or the result is still over the threshold', () => {
    const c = session(10);
    const skips: string[] = [];
    const onSkip = (r: string) => skips.push(r);
    expect(
      trySessionMemoryCompaction({
        entries: c.entries,
        summary: { content: NOTES },
        lastSummarizedUuid: 'gone',
        threshold: 1e9,
        onSkip,
      }),
    ).toBeNull();
    expect(
      trySessionMemoryCompaction({ entries: c.entries, summary: { content: NOTES }, threshold: 100, onSkip }),
    ).toBeNull();
    expect(
      trySessionMemoryCompaction({ entries: c.entries, summary: { content: ' ' }, threshold: 1e9, onSkip }),
    ).toBeNull();
    expect(skips).toEqual(['summarized_uuid_not_found', 'threshold_exceeded', 'empty_summary']);
  });

  it('rebuilds from the JSONL starting at the boundary, and renders the summary first', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'engram-smc-'));
    const store = new TranscriptStore(join(dir, 'sess-1.jsonl'));
    const c = session(12);
    await store.append(c.entries);
    const result = trySessionMemoryCompaction({
      entries: c.entries,
      summary: { content: NOTES },
      lastSummarizedUuid: c.entries.at(-5)!.uuid,
      threshold: 1e9,
    })!;
    await store.append(result.newEntries);
    const { entries } = await new TranscriptStore(store.path).readAll();
    const chain = buildChain(entries);
    expect(chain.boundary?.uuid).toBe(result.boundary.uuid);
    expect(chain.live.map((e) => e.uuid)).toEqual(result.live.map((e) => e.uuid));
    expect(chain.live.some(isCompactBoundary)).toBe(false);
    // The whole history stays reachable through the boundary's logical parent.
    expect(chain.entries.length).toBe(c.entries.length + 1 + result.live.length);
    const rendered = renderChainToApiMessages(chain.live);
    expect(JSON.stringify(rendered[0])).toContain('This session continues an earlier conversation');
  });
});
