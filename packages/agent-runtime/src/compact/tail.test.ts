import { describe, expect, it } from 'vitest';
import type { ContentBlock } from '../model/types.js';
import { createCompactBoundary } from '../transcript/chain.js';
import type { ChainEntry } from '../transcript/entry.js';
import { ChainBuilder } from './chain.test-helpers.js';
import { entryTokens, selectTailToKeep } from './tail.js';

function blocks(e: ChainEntry): ContentBlock[] {
  return Array.isArray(e.message?.content) ? (e.message!.content as ContentBlock[]) : [];
}

/** Every tool_result in `kept` has its tool_use in `kept`, before it. */
function pairsIntact(kept: readonly ChainEntry[]): boolean {
  const seen = new Set<string>();
  for (const e of kept) {
    for (const b of blocks(e)) {
      if (b.type === 'tool_use') seen.add(b.id);
      if (b.type === 'tool_result' && !seen.has(b.tool_use_id)) return false;
    }
  }
  return true;
}

describe('selectTailToKeep', () => {
  it('keeps what follows the last summarised message when that already meets both minimums', () => {
    const c = new ChainBuilder();
    for (let i = 0; i < 10; i++) c.exchange(4_000, `t${i}`); // 1,000 tokens per message
    const summarised = c.entries[5]!;
    const tail = selectTailToKeep(c.entries, { lastSummarizedUuid: summarised.uuid })!;
    expect(tail.startIndex).toBe(6);
    expect(tail.tokens).toBe(14_000);
    expect(tail.textMessages).toBe(14);
  });

  it('widens backwards until 10,000 tokens and 5 text messages, when the unsummarised part is smaller', () => {
    const c = new ChainBuilder();
    for (let i = 0; i < 20; i++) c.exchange(4_000, `t${i}`);
    const tail = selectTailToKeep(c.entries, { lastSummarizedUuid: c.entries.at(-3)!.uuid })!;
    expect(tail.kept).toHaveLength(10);
    expect(tail.tokens).toBe(10_000);
  });

  it('needs 5 text messages even past 10,000 tokens, and stops at 40,000 tokens regardless', () => {
    const big = new ChainBuilder();
    for (let i = 0; i < 10; i++) big.exchange(40_000, `b${i}`); // 10,000 tokens per message
    const one = selectTailToKeep(big.entries, { lastSummarizedUuid: big.entries.at(-2)!.uuid })!;
    // 1 message (10k) → widen: 2 (20k), 3 (30k), 4 (40k = max) → stop below 5 messages.
    expect(one.kept).toHaveLength(4);
    expect(one.tokens).toBe(40_000);

    const small = new ChainBuilder();
    for (let i = 0; i < 10; i++) small.exchange(12_000, `s${i}`); // 3,000 tokens per message
    const few = selectTailToKeep(small.entries, { lastSummarizedUuid: small.entries.at(-2)!.uuid })!;
    // 10k reached at 4 messages (12k) but only 4 with text → one more.
    expect(few.kept).toHaveLength(5);
  });

  it('keeps nothing to start with when no message is marked summarised (a resumed session), then widens', () => {
    const c = new ChainBuilder();
    for (let i = 0; i < 10; i++) c.exchange(4_000, `t${i}`);
    expect(selectTailToKeep(c.entries)!.kept).toHaveLength(10);
    expect(selectTailToKeep(c.entries, { minTokens: 0, minTextMessages: 0 })!.kept).toHaveLength(0);
  });

  it('returns undefined when the summarised message is not in the chain', () => {
    const c = new ChainBuilder();
    c.exchange(100);
    expect(selectTailToKeep(c.entries, { lastSummarizedUuid: 'nope' })).toBeUndefined();
  });

  it('never reaches behind the last compact boundary', () => {
    const c = new ChainBuilder();
    for (let i = 0; i < 5; i++) c.exchange(4_000, `old${i}`);
    const boundary = createCompactBoundary({
      sessionId: c.sessionId,
      cwd: c.cwd,
      logicalParentUuid: c.entries.at(-1)!.uuid,
      trigger: 'auto',
      preTokens: 1,
      uuid: () => 'boundary',
    });
    c.entries.push(boundary);
    for (let i = 0; i < 3; i++) c.exchange(4_000, `new${i}`);
    const tail = selectTailToKeep(c.entries, { lastSummarizedUuid: c.entries.at(-1)!.uuid })!;
    expect(tail.startIndex).toBe(c.entries.indexOf(boundary) + 1);
    expect(tail.kept).toHaveLength(6);
  });

  it('never splits a tool_use from its tool_result, whichever side of the cut the summary ended on', () => {
    const c = new ChainBuilder();
    c.user('u'.repeat(40_000));
    const a1 = c.assistant({ text: 'reading', tools: 2 });
    c.results(a1, 40_000);
    const a2 = c.assistant({ tools: 1 });
    c.results(a2, 40_000);
    c.assistant({ text: 'done' });
    // Summary ends at a2 (tool calls pending): a2's result is unsummarised, so a2 must be kept with it.
    for (const uuid of [a2.uuid, a1.uuid, c.entries[2]!.uuid]) {
      const tail = selectTailToKeep(c.entries, {
        lastSummarizedUuid: uuid,
        minTokens: 1,
        minTextMessages: 1,
      })!;
      expect(pairsIntact(tail.kept)).toBe(true);
    }
    // Widening stops at the cap (here 15k) on a1's results (20k); the tail moves back to include a1 itself.
    const capped = selectTailToKeep(c.entries, {
      lastSummarizedUuid: c.entries.at(-1)!.uuid,
      maxTokens: 15_000,
    })!;
    expect(pairsIntact(capped.kept)).toBe(true);
    expect(capped.kept[0]!.uuid).toBe(a1.uuid);
  });

  it('keeps earlier fragments of a reply that share its API message id (parallel tool calls, thinking)', () => {
    const c = new ChainBuilder();
    c.exchange(4_000);
    const f1 = c.assistant({ tools: 1, messageId: 'msg_same' });
    const f2 = c.assistant({ tools: 1, messageId: 'msg_same' });
    c.results(f1, 10);
    c.results(f2, 10);
    c.assistant({ text: 'ok' });
    const tail = selectTailToKeep(c.entries, {
      lastSummarizedUuid: c.entries.at(-3)!.uuid,
      minTokens: 0,
      minTextMessages: 0,
    })!;
    // Only f2's result was after the cut; f2 is pulled in for it, and f1 for sharing f2's message id.
    expect(tail.kept[0]!.uuid).toBe(f1.uuid);
    expect(pairsIntact(tail.kept)).toBe(true);
  });

  it('holds the invariants on random chains', () => {
    let seed = 7;
    const rand = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let run = 0; run < 200; run++) {
      const c = new ChainBuilder();
      const turns = 1 + Math.floor(rand() * 15);
      for (let t = 0; t < turns; t++) {
        c.user('u'.repeat(Math.floor(rand() * 20_000)));
        for (let k = Math.floor(rand() * 3); k > 0; k--) {
          const a = c.assistant({ tools: 1 + Math.floor(rand() * 3) });
          c.results(a, Math.floor(rand() * 30_000));
        }
        c.assistant({ text: 'a'.repeat(Math.floor(rand() * 8_000)) });
      }
      const cut = c.entries[Math.floor(rand() * c.entries.length)]!.uuid;
      const tail = selectTailToKeep(c.entries, { lastSummarizedUuid: cut })!;
      expect(pairsIntact(tail.kept)).toBe(true);
      const cutIndex = c.entries.findIndex((e) => e.uuid === cut);
      // Everything unsummarised is kept.
      expect(tail.startIndex).toBeLessThanOrEqual(cutIndex + 1);
      // Either the whole chain is kept, or the tail meets the rule (≥40k, or ≥10k with ≥5 text messages).
      const meetsRule = tail.tokens >= 40_000 || (tail.tokens >= 10_000 && tail.textMessages >= 5);
      expect(tail.startIndex === 0 || meetsRule).toBe(true);
      expect(tail.tokens).toBe(tail.kept.reduce((n, e) => n + entryTokens(e), 0));
    }
  });
});
