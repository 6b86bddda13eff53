import { z } from 'zod';
import { forkUsage, leafRef, projectRef, sessionId } from './common.js';

// session-memory: keep the session's rolling summary.md current, serially per session (docs/design.md §5, §7).

/** Trigger thresholds the foreground decided with, so the worker re-gates by the same rule. */
export const sessionMemoryThresholds = z
  .object({
    initTokens: z.number().int().positive(),
    minGrowthTokens: z.number().int().positive(),
    toolCalls: z.number().int().positive(),
  })
  .partial();

export const sessionMemoryPayload = projectRef.extend(leafRef.shape).extend({
  sessionId,
  /**
   * Context size (tokens) the foreground measured when it decided to enqueue; the worker re-gates on it.
   * When absent the worker estimates it from the transcript up to the leaf.
   */
  contextTokens: z.number().int().nonnegative().optional(),
  thresholds: sessionMemoryThresholds.optional(),
  requestedAt: z.iso.datetime(),
});
export type SessionMemoryPayload = z.infer<typeof sessionMemoryPayload>;

export const sessionMemoryResult = z.object({
  outcome: z.enum(['updated', 'skipped-not-due', 'skipped-stale']),
  sessionId,
  summaryChars: z.number().int().nonnegative(),
  turns: z.number().int().nonnegative(),
  lastSummarizedUuid: z.string().optional(),
  /** The context size this update (or skip decision) was judged at. */
  contextTokens: z.number().int().nonnegative().optional(),
  deniedToolCalls: z.number().int().nonnegative().optional(),
  usage: forkUsage.optional(),
});
export type SessionMemoryResult = z.infer<typeof sessionMemoryResult>;

export const sessionMemoryJob = {
  kind: 'session-memory',
  queue: 'memory-session',
  payload: sessionMemoryPayload,
  /** Not coalesced: serial per session through a per-session lease in the worker. */
  deduplicationId: undefined,
} as const;
