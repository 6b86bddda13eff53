import { z } from 'zod';
import { projectRef, sessionId } from './common.js';

// dream: consolidate a project's memories; one per project at a time (DESIGN §5).

export const dreamPayload = projectRef.extend({
  /** The session that triggered it (excluded from the "sessions since" list). */
  triggeredBy: sessionId.optional(),
  /** Sessions whose transcripts changed since the last consolidation (bounded; the worker re-lists). */
  sessionIds: z.array(sessionId).max(50),
  force: z.boolean().default(false),
  requestedAt: z.iso.datetime(),
});
export type DreamPayload = z.infer<typeof dreamPayload>;

export const dreamJob = {
  kind: 'dream',
  queue: 'memory-dream',
  payload: dreamPayload,
  deduplicationId: (p: DreamPayload) => `dream:${p.projectDir}`,
} as const;
