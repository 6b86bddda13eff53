import type { QueueConfig } from './queue-config.js';

export const recallQueueConfig: QueueConfig = {
  // Recall is one short side query that waits on the small model; many at once keep its latency flat while
  // extraction is busy elsewhere (one per active turn: 100 per process covers 100 concurrent turns).
  concurrency: 100,
  // A recall either answers in seconds or is useless (the turn has moved on).
  lockDurationMs: 15_000,
  stalledIntervalMs: 10_000,
  maxStalledCount: 1,
  // The worker already degrades to lexical ranking on model errors; a retry would arrive too late to inject.
  attempts: 1,
  backoff: { type: 'exponential', delayMs: 500, jitter: 0.5 },
  // Results are consumed within the turn; keep little.
  removeOnComplete: { ageSeconds: 3600, count: 2_000 },
  removeOnFail: { ageSeconds: 24 * 3600, count: 2_000 },
  eventsMaxLen: 20_000,
};
