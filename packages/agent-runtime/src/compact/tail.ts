import { estimateMessagesTokens } from '../model/tokens.js';
import type { ApiMessage } from '../model/types.js';
import {
  attachmentRenderedText,
  isCompactBoundary,
  isModelVisible,
  type TranscriptEntry,
} from '../transcript/entry.js';

// Which recent messages survive a session-memory compaction verbatim (docs/claude-code-memory.md §7.20.4–5): everything the
// summary has not covered yet, widened backwards until the tail is big enough to work from (≥10k tokens and
// ≥5 messages with text) or hits the 40k cap — never reaching behind the last compact boundary, and never
// separating a tool_result from the tool_use it answers (nor from sibling fragments of the same reply).

export const TAIL_MIN_TOKENS = 10_000;
export const TAIL_MIN_TEXT_MESSAGES = 5;
export const TAIL_MAX_TOKENS = 40_000;

export interface TailOptions {
  /** Last entry the summary covers; undefined (e.g. a resumed session) treats the whole chain as covered. */
  lastSummarizedUuid?: string | undefined;
  minTokens?: number;
  minTextMessages?: number;
  maxTokens?: number;
}

export interface TailSelection<T> {
  /** Index in `entries` of the first kept entry (`entries.length` when nothing is kept). */
  startIndex: number;
  kept: T[];
  tokens: number;
  textMessages: number;
}

/** Estimated tokens of one entry as the model sees it (0 for entries it never sees). */
export function entryTokens(entry: TranscriptEntry): number {
  if (!isModelVisible(entry)) return 0;
  const content = entry.message?.content ?? attachmentRenderedText(entry) ?? '';
  return estimateMessagesTokens([{ content: content as ApiMessage['content'] }]);
}

/** A user or assistant message carrying text (not only tool calls or tool results). */
export function hasTextBlocks(entry: TranscriptEntry): boolean {
  if (!isModelVisible(entry) || entry.type === 'attachment') return false;
  const content = entry.message!.content;
  if (typeof content === 'string') return content.length > 0;
  return content.some((b) => b.type === 'text');
}

function blockIds(entry: TranscriptEntry, type: 'tool_use' | 'tool_result'): string[] {
  const content = entry.message?.content;
  if (!Array.isArray(content)) return [];
  const out: string[] = [];
  for (const b of content) {
    if (type === 'tool_use' && b.type === 'tool_use') out.push(b.id);
    if (type === 'tool_result' && b.type === 'tool_result') out.push(b.tool_use_id);
  }
  return out;
}

function assistantMessageId(entry: TranscriptEntry): string | undefined {
  return entry.type === 'assistant' && typeof entry.message?.id === 'string' ? entry.message.id : undefined;
}

/**
 * Moves `start` back (not below `floor`) until every kept tool_result has its tool_use kept, and every kept
 * assistant fragment has its earlier fragments (same message id) kept. A tool_result whose tool_use lies
 * behind the floor can never be paired; it is ignored here (the renderer drops such orphans).
 */
export function adjustTailStart(entries: readonly TranscriptEntry[], start: number, floor: number): number {
  const reachableUses = new Set<string>();
  for (let i = floor; i < entries.length; i++)
    for (const id of blockIds(entries[i]!, 'tool_use')) reachableUses.add(id);
  let s = Math.max(start, floor);
  for (;;) {
    const before = s;
    const uses = new Set<string>();
    const needed = new Set<string>();
    const messageIds = new Set<string>();
    for (let i = s; i < entries.length; i++) {
      for (const id of blockIds(entries[i]!, 'tool_use')) uses.add(id);
      for (const id of blockIds(entries[i]!, 'tool_result')) if (reachableUses.has(id)) needed.add(id);
      const mid = assistantMessageId(entries[i]!);
      if (mid !== undefined) messageIds.add(mid);
    }
    for (const id of uses) needed.delete(id);
    for (let i = s - 1; i >= floor && (needed.size > 0 || messageIds.size > 0); i--) {
      const entry = entries[i]!;
      const holds = blockIds(entry, 'tool_use').filter((id) => needed.has(id));
      const mid = assistantMessageId(entry);
      if (holds.length > 0 || (mid !== undefined && messageIds.has(mid))) {
        s = i;
        for (const id of holds) needed.delete(id);
      }
    }
    // Moving back may have pulled in results of even earlier calls: repeat until nothing moves.
    if (s === before) return s;
  }
}

export function selectTailToKeep<T extends TranscriptEntry>(
  entries: readonly T[],
  options: TailOptions = {},
): TailSelection<T> | undefined {
  const minTokens = options.minTokens ?? TAIL_MIN_TOKENS;
  const minText = options.minTextMessages ?? TAIL_MIN_TEXT_MESSAGES;
  const maxTokens = options.maxTokens ?? TAIL_MAX_TOKENS;

  let lastSummarized = entries.length - 1;
  if (options.lastSummarizedUuid !== undefined) {
    lastSummarized = entries.findIndex((e) => e.uuid === options.lastSummarizedUuid);
    if (lastSummarized < 0) return undefined;
  }
  let floor = 0;
  for (let i = entries.length - 1; i >= 0; i--) {
    if (isCompactBoundary(entries[i]!)) {
      floor = i + 1;
      break;
    }
  }
  let start = Math.max(lastSummarized + 1, floor);
  let tokens = 0;
  let text = 0;
  for (let i = start; i < entries.length; i++) {
    tokens += entryTokens(entries[i]!);
    if (hasTextBlocks(entries[i]!)) text++;
  }
  const enough = () => tokens >= maxTokens || (tokens >= minTokens && text >= minText);
  for (let i = start - 1; i >= floor && !enough(); i--) {
    tokens += entryTokens(entries[i]!);
    if (hasTextBlocks(entries[i]!)) text++;
    start = i;
  }
  start = adjustTailStart(entries, start, floor);
  const kept = entries.slice(start);
  return {
    startIndex: start,
    kept,
    tokens: kept.reduce((n, e) => n + entryTokens(e), 0),
    textMessages: kept.filter(hasTextBlocks).length,
  };
}
