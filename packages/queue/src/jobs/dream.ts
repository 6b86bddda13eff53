import { z } from 'zod';
import { type ProjectScope, projectKey } from '../state/tenant-scope.js';
import { entryUuid, forkUsage, projectRef, sessionId } from './common.js';

// dream: consolidate a project's memories; one per project at a time (docs/design.md §5).

export const dreamPayload = projectRef
  .extend({
    /** The session that triggered it (excluded from the "sessions since" list). */
    triggeredBy: sessionId.optional(),
    /** Sessions whose transcripts changed since the last consolidation (bounded; the worker re-lists). */
    sessionIds: z.array(sessionId).max(50),
    force: z.boolean().default(false),
    requestedAt: z.iso.datetime(),
    /**
     * The session and leaf to fork from (its cache-safe parameters and conversation up to the leaf), so the
     * consolidation shares the triggering turn's prompt cache. Both or neither; without them (e.g. a forced
     * run from a CLI with no session) the worker runs the fork from a minimal context: the memory prompt as
     * the system prompt and the consolidation prompt as the only message.
     */
    sessionId: sessionId.optional(),
    leafUuid: entryUuid.optional(),
    /** The thresholds the foreground's gate used, so the worker re-checks with the same ones (default 24 / 5). */
    minHours: z
      .number()
      .positive()
      .max(24 * 365)
      .optional(),
    minSessions: z.number().int().positive().max(10_000).optional(),
  })
  .refine((p) => (p.sessionId === undefined) === (p.leafUuid === undefined), {
    message: 'sessionId and leafUuid go together: give both (fork from that leaf) or neither',
    path: ['leafUuid'],
  });
export type DreamPayload = z.infer<typeof dreamPayload>;

export const DREAM_PHASES = ['orient', 'gather', 'consolidate', 'prune', 'done'] as const;
export type DreamPhase = (typeof DREAM_PHASES)[number];

/** What a running dream reports through job progress (for `engram dream`'s progress bar). */
export const dreamProgress = z.object({
  phase: z.enum(DREAM_PHASES),
  /** Memory files the fork has asked to write so far (relative paths; Bash writes are impossible here). */
  filesTouched: z.array(z.string()),
  /** Model calls so far. */
  turns: z.number().int().nonnegative(),
  snapshotId: z.string().optional(),
});
export type DreamProgress = z.infer<typeof dreamProgress>;

export const dreamResult = z.object({
  /**
   * consolidated: the run's result was kept. skipped-locked: another consolidation of the project holds the
   * lock. skipped-not-due: the gate (re-checked under the lock) is shut. restored: kept for compatibility;
   * a refused run fails the job instead (with the reason), after restoring the snapshot.
   */
  outcome: z.enum(['consolidated', 'skipped-locked', 'skipped-not-due', 'restored']),
  projectDir: z.string(),
  /** Why it was skipped, in words. */
  reason: z.string().optional(),
  /** ISO start of this consolidation (the new "last consolidated at"), when it ran. */
  consolidatedAt: z.string().optional(),
  /** ISO "last consolidated at" before this run; absent when there was none. */
  previousConsolidatedAt: z.string().optional(),
  /** 'session': forked from the payload's session and leaf; 'minimal': memory prompt + instruction only. */
  forkedFrom: z.enum(['session', 'minimal']).optional(),
  sessionsReviewed: z.number().int().nonnegative(),
  files: z.object({
    created: z.array(z.string()),
    updated: z.array(z.string()),
    deleted: z.array(z.string()),
  }),
  indexLines: z.object({ before: z.number().int().nonnegative(), after: z.number().int().nonnegative() }),
  /** Which load cap (200 lines / 25,000 characters) the index still exceeds after the run, if any. */
  indexOverflow: z.enum(['lines', 'chars', 'both']).optional(),
  /** The pre-run snapshot under memory/.history (restore with `engram memory restore <id>`). */
  snapshotId: z.string().optional(),
  turns: z.number().int().nonnegative(),
  usage: forkUsage,
  deniedToolCalls: z.number().int().nonnegative(),
});
export type DreamResult = z.infer<typeof dreamResult>;

export const dreamJob = {
  kind: 'dream',
  queue: 'memory-dream',
  payload: dreamPayload,
  deduplicationId: (p: DreamPayload) => projectKey(p, (dir) => `dream:${dir}`),
} as const;

/** Where the dream worker leaves the last consolidation's receipt for the next foreground session. */
export function dreamReceiptKey(project: ProjectScope): string {
  return projectKey(project, (dir) => `dream-receipt:${dir}`);
}

/** Receipts outlive sessions by the transcript retention period. */
export const DREAM_RECEIPT_TTL_MS = 30 * 24 * 3600 * 1000;
