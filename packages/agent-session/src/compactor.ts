import {
  type AutoCompactOutcome,
  maybeAutoCompact,
  type SessionMemorySource,
  waitForSessionMemoryUpdate,
} from '@engram/agent-runtime/compact/auto-compact';
import { compactWithModel } from '@engram/agent-runtime/compact/llm-compact';
import { autoCompactThreshold } from '@engram/agent-runtime/compact/thresholds';
import type { CacheSafeParams } from '@engram/agent-runtime/fork/cache-safe-params';
import type { ModelClient } from '@engram/agent-runtime/model/client';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import type { MemoryQueue, SessionRef } from '@engram/memory-client/memory-queue';
import {
  readSessionMemoryForCompact,
  sessionMemoryConfigPaths,
} from '@engram/memory-core/session-memory/summary-file';
import { loadSessionMemoryTemplate } from '@engram/memory-core/session-memory/template';

// Context compaction for the foreground (docs/design.md §7): from the session-memory notes the workers keep when they
// are usable (no model call), else a model-written summary; a circuit breaker after 3 failures in a row.

export interface CompactorOptions {
  client: ModelClient;
  memory: MemoryQueue | undefined;
  ref: SessionRef;
  engramHome: string;
  contextWindow: number;
  maxOutputTokens: number;
  transcriptPath: string;
  params: () => CacheSafeParams;
}

export class Compactor {
  consecutiveFailures = 0;
  readonly threshold: number;

  constructor(private readonly opts: CompactorOptions) {
    this.threshold = autoCompactThreshold({
      contextWindow: opts.contextWindow,
      maxOutputTokens: opts.maxOutputTokens,
    });
  }

  private sessionMemorySource(): SessionMemorySource | undefined {
    const { memory, ref, engramHome } = this.opts;
    if (!memory) return undefined;
    const state = memory.sessionState(ref);
    return {
      // Wait ≤15 s for an update in flight; not at all if it started more than 60 s ago.
      waitForInFlight: async () => {
        await waitForSessionMemoryUpdate({ readMarkers: () => state.sessionMemory() }).catch(() => undefined);
      },
      read: async () => {
        const template = await loadSessionMemoryTemplate(sessionMemoryConfigPaths(engramHome).templatePath);
        const notes = await readSessionMemoryForCompact(ref.paths.sessionMemoryPath(ref.sessionId), template);
        if (!notes) return undefined;
        const markers = await state.sessionMemory().catch(() => ({ lastSummarizedUuid: undefined }));
        return { ...notes, lastSummarizedUuid: markers.lastSummarizedUuid };
      },
    };
  }

  async maybeCompact(
    entries: readonly ChainEntry[],
    contextTokens: number,
    force = false,
  ): Promise<AutoCompactOutcome> {
    const sessionMemory = this.sessionMemorySource();
    const outcome = await maybeAutoCompact({
      entries,
      contextTokens,
      threshold: this.threshold,
      ...(sessionMemory ? { sessionMemory } : {}),
      compactWithModel: (toCompact, context) =>
        compactWithModel({
          client: this.opts.client,
          params: this.opts.params(),
          entries: toCompact,
          transcriptPath: this.opts.transcriptPath,
          ...context,
        }),
      consecutiveFailures: this.consecutiveFailures,
      transcriptPath: this.opts.transcriptPath,
      ...(force ? { force, trigger: 'manual' as const } : {}),
    });
    this.consecutiveFailures = outcome.consecutiveFailures;
    return outcome;
  }

  /** After a compaction: notes cover what the summary replaced; growth counts from the compacted size. */
  async recordCompaction(outcome: Extract<AutoCompactOutcome, { compacted: true }>): Promise<void> {
    if (!this.opts.memory) return;
    await this.opts.memory
      .sessionState(this.opts.ref)
      .updateSessionMemory({
        lastSummarizedUuid: outcome.via === 'session-memory' ? outcome.result.summary.uuid : undefined,
        tokensAtLastUpdate: outcome.result.postTokens,
      })
      .catch(() => undefined);
  }
}
