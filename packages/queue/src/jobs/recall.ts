import { z } from 'zod';
import { projectRef, sessionId } from './common.js';

// recall: pick up to five relevant memories for the user's prompt with a small-model side query (docs/design.md §5).

/** The prompt is the one payload field that carries text; it is capped to a bounded head and tail. */
export const RECALL_QUERY_HEAD_CHARS = 2_000;
export const RECALL_QUERY_TAIL_CHARS = 1_000;
const MAX_QUERY_CHARS = RECALL_QUERY_HEAD_CHARS + RECALL_QUERY_TAIL_CHARS + 64;

export function capRecallQuery(prompt: string): string {
  if (prompt.length <= RECALL_QUERY_HEAD_CHARS + RECALL_QUERY_TAIL_CHARS) return prompt;
  const omitted = prompt.length - RECALL_QUERY_HEAD_CHARS - RECALL_QUERY_TAIL_CHARS;
  return `${prompt.slice(0, RECALL_QUERY_HEAD_CHARS)}\n[… ${omitted} characters omitted …]\n${prompt.slice(-RECALL_QUERY_TAIL_CHARS)}`;
}

const relativeMemoryPath = z.string().min(1).max(300);
/** Per exclusion list; past it the foreground sends the most recent ones (the scan lists at most 200 files). */
export const MAX_EXCLUDED_PATHS = 400;

export const recallPayload = projectRef.extend({
  sessionId,
  query: z.string().min(1).max(MAX_QUERY_CHARS),
  /**
   * Memory files already injected in this context (relative to the memory directory). The 60 KiB budget
   * bounds their bytes, not their count: small files can add up to a few hundred.
   */
  alreadySurfaced: z.array(relativeMemoryPath).max(MAX_EXCLUDED_PATHS),
  /** Memory files the agent already read or wrote in this context (relative to the memory directory). */
  alreadyRead: z.array(relativeMemoryPath).max(MAX_EXCLUDED_PATHS),
  /** Tools used successfully since the previous user turn. */
  recentTools: z.array(z.string().max(64)).max(32),
  requestedAt: z.iso.datetime(),
});
export type RecallPayload = z.infer<typeof recallPayload>;

export const recallAttachment = z.object({
  /** Relative to the memory directory, forward slashes (the key of the surfaced and read sets). */
  path: z.string(),
  /** Precomputed once so the injected bytes never change between turns. */
  header: z.string(),
  /** The injected text, with a note pointing at the full file when it was cut. */
  content: z.string(),
  truncated: z.boolean(),
  mtimeMs: z.number(),
  /** Lines injected, when truncated: a partial view must not count as a full read of the file. */
  limit: z.number().int().positive().optional(),
});
export type RecallAttachment = z.infer<typeof recallAttachment>;

export const recallResult = z.object({
  outcome: z.enum(['model', 'fallback', 'empty']),
  attachments: z.array(recallAttachment),
  latencyMs: z.number().nonnegative(),
  /** Why the lexical ranking decided instead of the model: timeout, selector-error or invalid-output. */
  fallbackReason: z.string().optional(),
});
export type RecallResult = z.infer<typeof recallResult>;

export const recallJob = {
  kind: 'recall',
  queue: 'memory-recall',
  payload: recallPayload,
  deduplicationId: undefined,
} as const;
