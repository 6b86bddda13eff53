import type { z } from 'zod';
import { type DreamPayload, type DreamResult, dreamJob } from './jobs/dream.js';
import { type ExtractPayload, type ExtractResult, extractJob } from './jobs/extract.js';
import { type RecallPayload, type RecallResult, recallJob } from './jobs/recall.js';
import { type ReconcilePayload, type ReconcileResult, reconcileJob } from './jobs/reconcile.js';
import {
  type SessionMemoryPayload,
  type SessionMemoryResult,
  sessionMemoryJob,
} from './jobs/session-memory.js';
import { type TeamSyncPayload, type TeamSyncResult, teamSyncJob } from './jobs/team-sync.js';
import { dreamQueueConfig } from './queues/dream.config.js';
import { extractQueueConfig } from './queues/extract.config.js';
import type { QueueConfig } from './queues/queue-config.js';
import { recallQueueConfig } from './queues/recall.config.js';
import { reconcileQueueConfig } from './queues/reconcile.config.js';
import { sessionMemoryQueueConfig } from './queues/session-memory.config.js';
import { teamSyncQueueConfig } from './queues/team-sync.config.js';
import type { StateStore } from './state/state-store.js';

// The job catalog: one entry per job kind, mapping it to its queue, payload schema, dedup key and options.
// Both the producer (`enqueue`) and the worker handlers are typed from it.

/** The dream receipt; its schema (`dreamResult`) lives with the payload in jobs/dream.ts. */
export type { DreamResult };

export interface JobTypes {
  extract: { payload: ExtractPayload; result: ExtractResult };
  'session-memory': { payload: SessionMemoryPayload; result: SessionMemoryResult };
  dream: { payload: DreamPayload; result: DreamResult };
  recall: { payload: RecallPayload; result: RecallResult };
  reconcile: { payload: ReconcilePayload; result: ReconcileResult };
  'team-sync': { payload: TeamSyncPayload; result: TeamSyncResult };
}

export type JobKind = keyof JobTypes;
export type PayloadOf<K extends JobKind> = JobTypes[K]['payload'];
export type ResultOf<K extends JobKind> = JobTypes[K]['result'];

export interface JobDefinition<K extends JobKind> {
  kind: K;
  queue: string;
  payload: z.ZodType<PayloadOf<K>, unknown>;
  deduplicationId: ((payload: PayloadOf<K>) => string) | undefined;
  /**
   * Bookkeeping that must land before the job is added (e.g. recording the newest request). It must send its
   * command before its first await: the producer then adds the job on the same connection without waiting.
   */
  beforeEnqueue?: (payload: PayloadOf<K>, state: StateStore) => Promise<void>;
  config: QueueConfig;
}

export const JOB_CATALOG: { [K in JobKind]: JobDefinition<K> } = {
  extract: { ...extractJob, config: extractQueueConfig },
  'session-memory': { ...sessionMemoryJob, config: sessionMemoryQueueConfig },
  dream: { ...dreamJob, config: dreamQueueConfig },
  recall: { ...recallJob, config: recallQueueConfig },
  reconcile: { ...reconcileJob, config: reconcileQueueConfig },
  'team-sync': { ...teamSyncJob, config: teamSyncQueueConfig },
};

export const JOB_KINDS = Object.keys(JOB_CATALOG) as JobKind[];
