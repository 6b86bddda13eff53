import { tokenCountWithEstimation } from '../model/tokens.js';
import type { ChainEntry } from '../transcript/entry.js';
import {
  buildCompaction,
  type CompactionResult,
  type CompactTrigger,
  continuationMessage,
} from './compaction.js';
import { selectTailToKeep, type TailOptions } from './tail.js';

// Compaction from the session's rolling notes (docs/claude-code-memory.md §7.20): no model call at all. The notes cover the
// conversation up to `lastSummarizedUuid`; everything after it is kept verbatim (widened to a workable
// tail), and the notes become the summary message.

/** The notes as the caller read them (memory-core's `readSessionMemoryForCompact` prepares exactly this). */
export interface SessionMemorySummary {
  /** The notes, already cut per section for compaction. */
  content: string;
  /** A section was cut: the summary then points at `summaryPath` for the full notes. */
  truncated?: boolean;
  summaryPath?: string;
}

export type SessionMemoryCompactionSkip =
  | 'no_entries'
  | 'empty_summary'
  | 'summarized_uuid_not_found'
  | 'threshold_exceeded';

export interface SessionMemoryCompactionInput {
  /** The live chain as the foreground holds it. */
  entries: readonly ChainEntry[];
  summary: SessionMemorySummary;
  /** Last message the notes cover; undefined (a resumed session) treats the whole chain as covered. */
  lastSummarizedUuid?: string | undefined;
  /** The session transcript, named in the summary message for details the notes lack. */
  transcriptPathForPointer?: string;
  /** Auto-compact threshold: a result still at or above it is refused (null). */
  threshold: number;
  /** Context size before compaction (default: estimated from `entries`). */
  preTokens?: number;
  /** Fixed context outside the messages (system prompt, tools) counted in the post-compact estimate. */
  overheadTokens?: number;
  trigger?: CompactTrigger;
  tail?: Omit<TailOptions, 'lastSummarizedUuid'>;
  sessionId?: string;
  cwd?: string;
  now?: () => Date;
  uuid?: () => string;
  /** Why the attempt returned null (for logs and metrics). */
  onSkip?: (reason: SessionMemoryCompactionSkip) => void;
}

export function trySessionMemoryCompaction(input: SessionMemoryCompactionInput): CompactionResult | null {
  const skip = (reason: SessionMemoryCompactionSkip) => {
    input.onSkip?.(reason);
    return null;
  };
  if (input.entries.length === 0) return skip('no_entries');
  if (input.summary.content.trim().length === 0) return skip('empty_summary');
  const tail = selectTailToKeep(input.entries, {
    ...input.tail,
    lastSummarizedUuid: input.lastSummarizedUuid,
  });
  if (!tail) return skip('summarized_uuid_not_found');
  const result = buildCompaction({
    via: 'session-memory',
    entries: input.entries,
    summaryText: continuationMessage({
      summary: input.summary.content,
      transcriptPath: input.transcriptPathForPointer,
      fullSummaryPath: input.summary.truncated ? input.summary.summaryPath : undefined,
      recentMessagesPreserved: tail.kept.length > 0,
    }),
    keep: tail.kept,
    trigger: input.trigger ?? 'auto',
    preTokens: input.preTokens ?? tokenCountWithEstimation(input.entries),
    ...(input.overheadTokens !== undefined ? { overheadTokens: input.overheadTokens } : {}),
    ...(input.sessionId !== undefined ? { sessionId: input.sessionId } : {}),
    ...(input.cwd !== undefined ? { cwd: input.cwd } : {}),
    ...(input.now ? { now: input.now } : {}),
    ...(input.uuid ? { uuid: input.uuid } : {}),
  });
  if (result.postTokens >= input.threshold) return skip('threshold_exceeded');
  return result;
}
