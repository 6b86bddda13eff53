import type { QueueConfig } from './queue-config.js';

export const sessionMemoryQueueConfig: QueueConfig = {
  // Serial per session is enforced by a lease, not by concurrency; many sessions can update at once. LLM-bound
  // like extraction (a fork waiting on the model), so sized by in-flight model calls: 50 per process.
  concurrency: 50,
  // A summary update is one fork with a few Edit calls; same budget as extraction.
  lockDurationMs: 60_000,
  stalledIntervalMs: 30_000,
  maxStalledCount: 2,
  // A missed update is repaired by the next trigger; three tries cover a transient overload.
  attempts: 3,
  backoff: { type: 'exponential', delayMs: 2_000, jitter: 0.5 },
  removeOnComplete: { ageSeconds: 24 * 3600, count: 1_000 },
  removeOnFail: { ageSeconds: 7 * 24 * 3600, count: 5_000 },
  eventsMaxLen: 10_000,
};
