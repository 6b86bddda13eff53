import { randomUUID } from 'node:crypto';
import { EngramError } from '@engram/errors/engram-error';
import type { Usage } from '../model/client.js';
import { createCompactBoundary } from '../transcript/chain.js';
import { type ChainEntry, createUserEntry, isCompactBoundary } from '../transcript/entry.js';
import { entryTokens } from './tail.js';

// What every compaction produces, whichever way the summary was obtained (docs/design.md §7): a compact boundary
// (a new root that remembers the old leaf), one summary message the model reads as user content, and the
// kept tail. Appending `newEntries` to the transcript is the whole commit: rebuilding the chain from the
// JSONL then starts at the boundary.

export type CompactionVia = 'session-memory' | 'model';
export type CompactTrigger = 'auto' | 'manual';

export interface CompactionResult {
  via: CompactionVia;
  boundary: ChainEntry;
  /** The summary user message (`isCompactSummary`), parented on the boundary. */
  summary: ChainEntry;
  /**
   * The kept tail as fresh entries (new uuids, chained after the summary, `compactedFromUuid` naming the
   * original). Assistant usage is dropped from them: it measured the old, larger context.
   */
  kept: ChainEntry[];
  /** `[boundary, summary, ...kept]`: append these, in order. */
  newEntries: ChainEntry[];
  /** The live chain after compaction: `[summary, ...kept]`. */
  live: ChainEntry[];
  preTokens: number;
  /** Estimated context of `live` (plus any fixed overhead the caller declared). */
  postTokens: number;
  /** Model usage of the summarising request(s); absent for session-memory compaction (no model call). */
  usage?: Usage;
}

export interface ContinuationInput {
  summary: string;
  transcriptPath?: string | undefined;
  /** Set when the summary was cut for length: where the complete notes are. */
  fullSummaryPath?: string | undefined;
  recentMessagesPreserved: boolean;
}

/** The text of the summary message (docs/claude-code-memory.md §7.20.8, in our words). */
export function continuationMessage(input: ContinuationInput): string {
  const parts = [
    'This session continues an earlier conversation that ran out of context. The earlier part is summarised below.',
    input.summary.trim(),
  ];
  if (input.fullSummaryPath !== undefined) {
    parts.push(
      `Some sections of these notes were shortened for length; the complete notes are in ${input.fullSummaryPath}.`,
    );
  }
  if (input.transcriptPath !== undefined) {
    parts.push(
      `If you need details from before this point (exact code, error messages, output you produced), read the full transcript at ${input.transcriptPath}.`,
    );
  }
  if (input.recentMessagesPreserved) parts.push('The most recent messages follow verbatim.');
  parts.push(
    'Continue from where the conversation left off without asking the user any further questions. Go straight on with the work: do not acknowledge this summary or recap what happened.',
  );
  return parts.join('\n\n');
}

export interface BuildCompactionInput {
  via: CompactionVia;
  /** The live chain being compacted; its last entry becomes the boundary's logical parent. */
  entries: readonly ChainEntry[];
  summaryText: string;
  /** Entries of `entries` to keep verbatim after the summary (a suffix of it). */
  keep: readonly ChainEntry[];
  trigger: CompactTrigger;
  preTokens: number;
  overheadTokens?: number;
  sessionId?: string;
  cwd?: string;
  usage?: Usage;
  now?: () => Date;
  uuid?: () => string;
}

export type CompactionErrorCode =
  | 'COMPACTION_NOTHING_TO_COMPACT'
  | 'COMPACTION_PROMPT_TOO_LONG'
  | 'COMPACTION_EMPTY_SUMMARY'
  | 'COMPACTION_ABORTED';

/** A compaction that did not happen; trying the same compaction again does not help (the caller decides what next). */
export class CompactionError extends EngramError {
  declare readonly code: CompactionErrorCode;
  constructor(code: CompactionErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, { retryable: false, ...options });
  }
}

export function buildCompaction(input: BuildCompactionInput): CompactionResult {
  const leaf = input.entries.at(-1);
  if (!leaf) {
    throw new CompactionError('COMPACTION_NOTHING_TO_COMPACT', 'There is no conversation to compact yet.');
  }
  const sessionId = input.sessionId ?? leaf.sessionId;
  const cwd = input.cwd ?? leaf.cwd;
  const newUuid = input.uuid ?? randomUUID;
  const boundary = createCompactBoundary({
    sessionId,
    cwd,
    logicalParentUuid: leaf.uuid,
    trigger: input.trigger,
    preTokens: input.preTokens,
    ...(input.now ? { now: input.now } : {}),
    uuid: newUuid,
  });
  const summary = createUserEntry(
    { sessionId, cwd, parentUuid: boundary.uuid, uuid: newUuid, ...(input.now ? { now: input.now } : {}) },
    input.summaryText,
    { isCompactSummary: true },
  );
  const remap = new Map<string, string>();
  const kept: ChainEntry[] = [];
  let parent = summary.uuid;
  for (const original of input.keep) {
    // An earlier compaction's boundary or summary is superseded by this one.
    if (isCompactBoundary(original) || original.isCompactSummary === true) continue;
    const uuid = newUuid();
    remap.set(original.uuid, uuid);
    const copy: ChainEntry = { ...original, uuid, parentUuid: parent, compactedFromUuid: original.uuid };
    if (original.message) {
      const { usage: _stale, ...message } = original.message;
      copy.message = message;
    }
    const source = original.sourceToolAssistantUUID;
    if (typeof source === 'string' && remap.has(source)) copy.sourceToolAssistantUUID = remap.get(source);
    kept.push(copy);
    parent = uuid;
  }
  const live = [summary, ...kept];
  return {
    via: input.via,
    boundary,
    summary,
    kept,
    newEntries: [boundary, ...live],
    live,
    preTokens: input.preTokens,
    postTokens: live.reduce((n, e) => n + entryTokens(e), 0) + (input.overheadTokens ?? 0),
    ...(input.usage ? { usage: input.usage } : {}),
  };
}
