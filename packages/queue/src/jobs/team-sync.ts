import { z } from 'zod';
import { projectKey } from '../state/tenant-scope.js';
import { projectRef, sessionId } from './common.js';

// team-sync: pull a project's team memory from the team memory service, or push local changes to it
// (docs/team-memory.md). Pulls run at session start; pushes after writes into team/ (debounced) and at
// shutdown. The payload names the project and its repository; the service URL and key are the worker's own
// configuration (secrets never ride in payloads).

/** `owner/name` as parsed from the git origin remote (the same rule as the service's `repo` parameter). */
export const teamRepo = z
  .string()
  .max(200)
  .regex(/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/, 'must be "owner/name"')
  .refine((s) => s.split('/').every((part) => part !== '.' && part !== '..'), 'must not be "." or ".."');

/** Files one authored push names at most (a job that changed more: the rest go out unauthored, never misnamed). */
export const MAX_AUTHORED_KEYS = 500;

export const teamSyncPayload = projectRef.extend({
  repo: teamRepo,
  action: z.enum(['pull', 'push']),
  reason: z.enum(['session-start', 'write', 'shutdown', 'manual']),
  /**
   * A push runs no earlier than requestedAt + debounceMs: writes in quick succession coalesce into the one
   * pending push (the worker defers the job until then, without spending an attempt).
   */
  debounceMs: z.number().int().min(0).max(60_000).default(0),
  sessionId: sessionId.optional(),
  requestedAt: z.iso.datetime(),
  /**
   * The worker job whose writes this push carries (`extract:<job id>`, `dream:<job id>`): a memory store records
   * it in each new version's `created_by.job`. Only the workers set it (the seed protocol ignores it).
   */
  author: z
    .string()
    .regex(/^[a-z][a-z-]{0,31}:[A-Za-z0-9._:-]{1,128}$/)
    .optional(),
  /**
   * With `author`: the team files (relative to team/) that job changed, from its receipt. Only their versions
   * name the job; anything else the pass uploads (a person's edit made meanwhile) goes out unauthored.
   */
  authoredKeys: z.array(z.string().min(1).max(1024)).max(MAX_AUTHORED_KEYS).optional(),
});
export type TeamSyncPayload = z.infer<typeof teamSyncPayload>;

export const teamSyncResult = z.object({
  action: z.enum(['pull', 'push']),
  /** Which protocol the project synced with (absent: the seed `team-memory`). */
  protocol: z.enum(['team-memory', 'memory-store']).optional(),
  repo: z.string(),
  outcome: z.enum(['pulled', 'not-modified', 'no-data', 'pushed', 'up-to-date', 'suppressed']),
  /** pull: files written (created, updated or restored). */
  written: z.array(z.object({ key: z.string(), change: z.enum(['created', 'updated', 'restored']) })),
  /** push: entries sent. */
  pushed: z.array(z.string()),
  /** Why entries were not synced; a secret is named by its rule id, never its value. */
  skipped: z.array(z.object({ key: z.string(), reason: z.string(), ruleId: z.string().optional() })),
  keptLocal: z.array(z.string()),
  conflicts: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  checksum: z.string().nullable(),
});
export type TeamSyncResult = z.infer<typeof teamSyncResult>;

export const teamSyncJob = {
  kind: 'team-sync',
  queue: 'memory-team-sync',
  payload: teamSyncPayload,
  /**
   * One pending pull and one pending push per project: a request made while one waits joins it. Debounced
   * pushes (after writes) coalesce among themselves; an immediate push (shutdown, a person) is never held back
   * behind a debounce. An authored push is one per job (its id in the key): joining another job's push would
   * send its files unauthored.
   */
  deduplicationId: (p: TeamSyncPayload) =>
    projectKey(
      p,
      (dir) =>
        `team-sync:${p.action}${p.action === 'push' && p.debounceMs > 0 ? '-debounced' : ''}${p.author ? `-authored:${p.author}` : ''}:${dir}`,
    ),
} as const;
