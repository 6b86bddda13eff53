import type { QueueConfig } from './queue-config.js';

export const reconcileQueueConfig: QueueConfig = {
  // One sweep at a time per process; the scheduler produces one per interval for the whole fleet.
  concurrency: 1,
  // A sweep reads transcripts of idle sessions only; a minute between renewals is plenty.
  lockDurationMs: 60_000,
  stalledIntervalMs: 30_000,
  maxStalledCount: 1,
  // The next interval is the retry: a failed sweep is not repeated in a loop.
  attempts: 1,
  backoff: { type: 'exponential', delayMs: 5_000, jitter: 0.5 },
  // One job per interval: keep the last few for the dashboard, not a day's worth.
  removeOnComplete: { ageSeconds: 3600, count: 20 },
  removeOnFail: { ageSeconds: 24 * 3600, count: 100 },
  eventsMaxLen: 500,
};
