import type { QueueConfig } from './queue-config.js';

export const dreamQueueConfig: QueueConfig = {
  // At most one dream per project runs anyway (lock); two per process leaves room for other projects.
  concurrency: 2,
  // A consolidation may run many model turns; 5 min between renewals tolerates a long tool call.
  lockDurationMs: 5 * 60_000,
  stalledIntervalMs: 60_000,
  // A dream that kills its worker twice should not run a third time unattended.
  maxStalledCount: 1,
  // The gate re-opens after the throttle if this fails; a retry or two covers transient overload.
  attempts: 3,
  backoff: { type: 'exponential', delayMs: 30_000, jitter: 0.5 },
  removeOnComplete: { ageSeconds: 30 * 24 * 3600, count: 500 },
  removeOnFail: { ageSeconds: 30 * 24 * 3600, count: 500 },
  eventsMaxLen: 2_000,
};
