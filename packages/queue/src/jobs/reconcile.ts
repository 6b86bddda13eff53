import { z } from 'zod';

// reconcile: the periodic sweep (a BullMQ job scheduler) that makes memory work converge whatever was lost on
// the way — an enqueue that failed while the engine was away, a replica that died, a purged queue. It hands
// foreground outboxes to the queue and enqueues an extraction for every idle session whose transcript leaf is
// ahead of its extraction cursor. It never re-extracts a covered range: the extraction starts at the cursor.

export const reconcilePayload = z.object({
  /** Set by the scheduler's template; a manual run may leave it out. */
  requestedAt: z.iso.datetime().optional(),
});
export type ReconcilePayload = z.infer<typeof reconcilePayload>;

export const reconcileResult = z.object({
  /** Sessions with a memory record looked at. */
  sessions: z.number().int().nonnegative(),
  /** Sessions whose transcript had not changed since they were last found covered (not read again). */
  unchanged: z.number().int().nonnegative(),
  /** Outbox items handed to the queue. */
  outboxHanded: z.number().int().nonnegative(),
  /** Extractions enqueued for a leaf ahead of the cursor. */
  extractsEnqueued: z.number().int().nonnegative(),
  /** Sessions skipped: still active (changed within the quiet period) or unreadable. */
  skipped: z.number().int().nonnegative(),
});
export type ReconcileResult = z.infer<typeof reconcileResult>;

export const reconcileJob = {
  kind: 'reconcile',
  queue: 'memory-reconcile',
  payload: reconcilePayload,
  deduplicationId: undefined,
} as const;

/** The job scheduler's id: one sweep per interval per namespace, whatever the number of workers. */
export const RECONCILE_SCHEDULER_ID = 'engram-reconcile';
