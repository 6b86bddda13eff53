import { describe, expect, it } from 'vitest';
import { ModelServerError, PromptTooLongError } from '../model/errors.js';
import type { ChainEntry } from '../transcript/entry.js';
import {
  ContextTooLongError,
  maybeAutoCompact,
  reactiveCompact,
  type SessionMemorySource,
  sessionMemoryWaitPlan,
  waitForSessionMemoryUpdate,
} from './auto-compact.js';
import { ChainBuilder } from './chain.test-helpers.js';
import { buildCompaction, type CompactionResult } from './compaction.js';

describe('sessionMemoryWaitPlan', () => {
  const now = 1_000_000;
  it('does not wait when no update is in flight', () => {
    expect(sessionMemoryWaitPlan({}, now)).toEqual({ wait: false, reason: 'idle' });
    expect(sessionMemoryWaitPlan({ startedAtMs: now - 5_000, finishedAtMs: now - 1_000 }, now)).toEqual({
      wait: false,
      reason: 'idle',
    });
  });

  it('waits up to 15 s for an update in flight, but never past 60 s after it started', () => {
    expect(sessionMemoryWaitPlan({ startedAtMs: now - 1_000, finishedAtMs: now - 9_000 }, now)).toEqual({
      wait: true,
      untilMs: now + 15_000,
    });
    expect(sessionMemoryWaitPlan({ startedAtMs: now - 50_000 }, now)).toEqual({
      wait: true,
      untilMs: now + 10_000,
    });
  });

  it('treats an update that started more than 60 s ago as stale', () => {
    expect(sessionMemoryWaitPlan({ startedAtMs: now - 60_000 }, now).wait).toBe(true);
    expect(sessionMemoryWaitPlan({ startedAtMs: now - 60_001 }, now)).toEqual({
      wait: false,
      reason: 'stale',
    });
  });
});

describe('waitForSessionMemoryUpdate', () => {
  function fakeClock() {
    let t = 5_000_000;
    return {
      now: () => t,
      sleep: async (ms: number) => {
        t += ms;
      },
    };
  }

  it('polls every second until the update finishes', async () => {
    const clock = fakeClock();
    const started = clock.now() - 2_000;
    let polls = 0;
    const outcome = await waitForSessionMemoryUpdate({
      ...clock,
      readMarkers: async () =>
        ++polls < 4 ? { startedAtMs: started } : { startedAtMs: started, finishedAtMs: clock.now() },
    });
    expect(outcome).toEqual({ outcome: 'finished', waitedMs: 3_000 });
  });

  it('gives up after 15 s, or as soon as the update turns stale', async () => {
    const clock = fakeClock();
    const fresh = clock.now();
    expect(
      await waitForSessionMemoryUpdate({ ...clock, readMarkers: async () => ({ startedAtMs: fresh }) }),
    ).toEqual({
      outcome: 'timeout',
      waitedMs: 15_000,
    });
    const old = clock.now() - 55_000;
    const stale = await waitForSessionMemoryUpdate({
      ...clock,
      readMarkers: async () => ({ startedAtMs: old }),
    });
    expect(stale.outcome === 'timeout' || stale.outcome === 'stale').toBe(true);
    expect(stale.waitedMs).toBeLessThanOrEqual(5_001);
    expect(await waitForSessionMemoryUpdate({ ...clock, readMarkers: async () => ({}) })).toEqual({
      outcome: 'idle',
      waitedMs: 0,
    });
  });
});

function longSession() {
  const c = new ChainBuilder();
  for (let i = 0; i < 40; i++) c.exchange(4_000, `t${i}`); // 1,000 tokens per message
  return c;
}

function modelCompactor(calls: { n: number }, fail = false) {
  return async (
    entries: readonly ChainEntry[],
    ctx: { trigger: 'auto' | 'manual'; preTokens: number },
  ): Promise<CompactionResult> => {
    calls.n++;
    if (fail) throw new ModelServerError(500, 'boom');
    return buildCompaction({ via: 'model', entries, summaryText: 'model summary', keep: [], ...ctx });
  };
}

function notes(c: ChainBuilder, lastSummarizedUuid?: string): SessionMemorySource & { waited: number } {
  const source = {
    waited: 0,
    async waitForInFlight() {
      source.waited++;
    },
    async read() {
      return {
        content: '# Current State\n_now_\nrefactoring',
        lastSummarizedUuid: lastSummarizedUuid ?? c.entries.at(-3)!.uuid,
      };
    },
  };
  return source;
}

describe('maybeAutoCompact', () => {
  it('does nothing below the threshold', async () => {
    const c = longSession();
    const calls = { n: 0 };
    const out = await maybeAutoCompact({
      entries: c.entries,
      contextTokens: 99_999,
      threshold: 100_000,
      sessionMemory: notes(c),
      compactWithModel: modelCompactor(calls),
      consecutiveFailures: 0,
    });
    expect(out).toEqual({ compacted: false, reason: 'below_threshold', consecutiveFailures: 0 });
    expect(calls.n).toBe(0);
  });

  it('compacts from the session notes without a model call when they are usable, after waiting for an update in flight', async () => {
    const c = longSession();
    const calls = { n: 0 };
    const sm = notes(c);
    const out = await maybeAutoCompact({
      entries: c.entries,
      contextTokens: 100_000,
      threshold: 100_000,
      sessionMemory: sm,
      compactWithModel: modelCompactor(calls),
      consecutiveFailures: 2,
      transcriptPath: '/t.jsonl',
    });
    expect(out).toMatchObject({ compacted: true, via: 'session-memory', consecutiveFailures: 0 });
    expect(calls.n).toBe(0);
    expect(sm.waited).toBe(1);
    if (!out.compacted) throw new Error('unreachable');
    expect(out.newEntries[0]!.subtype).toBe('compact_boundary');
    expect(out.newEntries[1]!.message!.content).toContain('refactoring');
  });

  it('falls back to one model summary when there are no usable notes, or they would not get under the threshold', async () => {
    const c = longSession();
    for (const sessionMemory of [
      { waitForInFlight: async () => {}, read: async () => undefined },
      {
        waitForInFlight: async () => {},
        read: async () => {
          throw new Error('EIO');
        },
      },
      notes(c, c.entries[0]!.uuid), // covers almost nothing: the kept tail is still too big
    ] satisfies SessionMemorySource[]) {
      const calls = { n: 0 };
      const skips: string[] = [];
      const out = await maybeAutoCompact({
        entries: c.entries,
        contextTokens: 90_000,
        threshold: 30_000,
        sessionMemory,
        compactWithModel: modelCompactor(calls),
        consecutiveFailures: 0,
        onSessionMemorySkip: (r) => skips.push(r),
      });
      expect(out).toMatchObject({ compacted: true, via: 'model' });
      expect(calls.n).toBe(1);
      expect(skips).toHaveLength(1);
    }
  });

  it('counts failures and stops auto-compacting after 3 in a row, unless forced', async () => {
    const c = longSession();
    const calls = { n: 0 };
    let failures = 0;
    for (let i = 0; i < 5; i++) {
      const out = await maybeAutoCompact({
        entries: c.entries,
        contextTokens: 200_000,
        threshold: 100_000,
        compactWithModel: modelCompactor(calls, true),
        consecutiveFailures: failures,
      });
      failures = out.consecutiveFailures;
      if (i >= 3) expect(out).toMatchObject({ compacted: false, reason: 'circuit_open' });
    }
    expect(calls.n).toBe(3);
    expect(failures).toBe(3);
    const forced = await maybeAutoCompact({
      entries: c.entries,
      contextTokens: 0,
      threshold: 100_000,
      compactWithModel: modelCompactor(calls),
      consecutiveFailures: 3,
      force: true,
    });
    expect(forced).toMatchObject({ compacted: true, via: 'model', consecutiveFailures: 0 });
    expect(forced.compacted && forced.result.boundary.compactMetadata).toEqual({
      trigger: 'manual',
      preTokens: 0,
    });
  });
});

describe('reactiveCompact', () => {
  const ptl = () =>
    new PromptTooLongError(210_000, 200_000, 'prompt is too long: 210000 tokens > 200000 maximum');

  it('compacts exactly once and retries exactly once on a prompt-too-long reply', async () => {
    const c = longSession();
    const sent: number[] = [];
    let compactions = 0;
    const appended: ChainEntry[][] = [];
    const out = await reactiveCompact({
      entries: c.entries,
      attempt: async (entries) => {
        sent.push(entries.length);
        if (sent.length === 1) throw ptl();
        return 'reply';
      },
      compact: async (entries) => {
        compactions++;
        return buildCompaction({
          via: 'model',
          entries,
          summaryText: 's',
          keep: [],
          trigger: 'auto',
          preTokens: 1,
        }).newEntries;
      },
      onCompacted: (e) => void appended.push([...e]),
    });
    expect(out).toMatchObject({ value: 'reply', compacted: true });
    expect(compactions).toBe(1);
    expect(sent).toEqual([80, 1]);
    expect(appended).toHaveLength(1);
    expect(out.entries[0]!.isCompactSummary).toBe(true);
  });

  it('ends with a clear error when the retry is still too long, or compaction fails, without a second compaction', async () => {
    const c = longSession();
    let compactions = 0;
    const compact = async (entries: readonly ChainEntry[]) => {
      compactions++;
      return buildCompaction({
        via: 'model',
        entries,
        summaryText: 's',
        keep: [],
        trigger: 'auto',
        preTokens: 1,
      }).newEntries;
    };
    const again = await reactiveCompact({
      entries: c.entries,
      attempt: async () => {
        throw ptl();
      },
      compact,
    }).catch((e) => e);
    expect(again).toBeInstanceOf(ContextTooLongError);
    expect(again).toMatchObject({ code: 'CONTEXT_TOO_LONG', compacted: true });
    expect(again.message).toContain('210,000 tokens, the maximum is 200,000');
    expect(again.message).toContain('start a new session');
    expect(compactions).toBe(1);

    const none = await reactiveCompact({
      entries: c.entries,
      attempt: async () => {
        throw ptl();
      },
      compact: async () => null,
    }).catch((e) => e);
    expect(none).toMatchObject({ code: 'CONTEXT_TOO_LONG', compacted: false });
  });

  it('passes other errors through untouched', async () => {
    const c = longSession();
    const boom = new ModelServerError(500, 'boom');
    await expect(
      reactiveCompact({
        entries: c.entries,
        attempt: async () => {
          throw boom;
        },
        compact: async () => null,
      }),
    ).rejects.toBe(boom);
  });
});
