import type { ChainEntry, TranscriptEntry } from '@engram/agent-runtime/transcript/entry';
import type { MemoryQueue, MemoryWorkStatus, SessionRef } from '@engram/memory-client/memory-queue';
import {
  countToolCallsSince,
  resolveSessionMemoryThresholds,
  type SessionMemoryThresholds,
  shouldUpdateSessionMemory,
} from '@engram/memory-core/session-memory/trigger';

// The session-memory trigger (docs/design.md §5 `session-memory`), decided after every model reply in the main
// thread: initialise at ≥10,000 context tokens; then enqueue when growth since the last update is ≥5,000
// tokens and (≥3 tool calls since then, or the reply had none). The worker re-gates with the same rule.

export class SessionMemoryTrigger {
  /** The foreground's own baseline, moved when it enqueues (as the reference moves its cursor then). */
  private initialized = false;
  private tokensAtLastUpdate = 0;
  private cursorUuid: string | undefined;
  readonly thresholds: SessionMemoryThresholds;
  lastStatus: MemoryWorkStatus | undefined;

  constructor(
    private readonly memory: MemoryQueue,
    private readonly ref: SessionRef,
    thresholds?: Partial<SessionMemoryThresholds>,
  ) {
    this.thresholds = resolveSessionMemoryThresholds(thresholds);
  }

  /** Picks up where an earlier process of this session left off (markers live in the queue's store). */
  async load(): Promise<void> {
    try {
      await this.memory.engine.state.ready();
      const markers = await this.memory.sessionState(this.ref).sessionMemory();
      this.initialized = markers.initialized === true;
      this.tokensAtLastUpdate = markers.tokensAtLastUpdate ?? 0;
    } catch {
      // queue unreachable: start from zero; the worker re-gates anyway
    }
  }

  /** After compaction: growth is measured from the compacted size again, tool calls from the new chain. */
  reset(tokens: number): void {
    this.tokensAtLastUpdate = tokens;
    this.cursorUuid = undefined;
  }

  async afterReply(
    messages: readonly TranscriptEntry[],
    leaf: { leafUuid: string; leafSeq: number },
    contextTokens: number,
    replyHadToolCalls: boolean,
  ): Promise<MemoryWorkStatus | undefined> {
    const decision = shouldUpdateSessionMemory({
      initialized: this.initialized,
      contextTokens,
      tokensAtLastUpdate: this.tokensAtLastUpdate,
      toolCallsSinceLastUpdate: countToolCallsSince(messages as ChainEntry[], this.cursorUuid),
      lastReplyHadToolCalls: replyHadToolCalls,
      thresholds: this.thresholds,
    });
    if (decision.initialize) {
      this.initialized = true;
      await this.memory
        .sessionState(this.ref)
        .updateSessionMemory({ initialized: true })
        .catch(() => undefined);
    }
    if (!decision.update) return undefined;
    this.tokensAtLastUpdate = contextTokens;
    this.cursorUuid = leaf.leafUuid;
    this.lastStatus = await this.memory.enqueue('session-memory', {
      sessionId: this.ref.sessionId,
      ...this.memory.projectRef(this.ref),
      ...leaf,
      contextTokens,
      thresholds: {
        initTokens: this.thresholds.initTokens,
        minGrowthTokens: this.thresholds.minGrowthTokens,
        toolCalls: this.thresholds.toolCalls,
      },
      requestedAt: new Date().toISOString(),
    });
    return this.lastStatus;
  }
}
