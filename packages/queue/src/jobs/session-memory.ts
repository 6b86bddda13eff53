import { z } from 'zod';
import { leafRef, projectRef, sessionId } from './common.js';

// session-memory: keep the session's rolling summary.md current, serially per session (DESIGN §5, §7).

export const sessionMemoryPayload = projectRef.extend(leafRef.shape).extend({
  sessionId,
  /** Context size (tokens) the foreground measured when it decided to enqueue; the worker re-gates on it. */
  contextTokens: z.number().int().nonnegative(),
  requestedAt: z.iso.datetime(),
});
export type SessionMemoryPayload = z.infer<typeof sessionMemoryPayload>;

export const sessionMemoryResult = z.object({
  outcome: z.enum(['updated', 'skipped-not-due', 'skipped-stale']),
  sessionId,
  summaryChars: z.number().int().nonnegative(),
  turns: z.number().int().nonnegative(),
  lastSummarizedUuid: z.string().optional(),
});
export type SessionMemoryResult = z.infer<typeof sessionMemoryResult>;

export const sessionMemoryJob = {
  kind: 'session-memory',
  queue: 'memory-session',
  payload: sessionMemoryPayload,
  /** Not coalesced: serial per session through a per-session lease in the worker. */
  deduplicationId: undefined,
} as const;
