import type { QueueConfig } from './queue-config.js';

export const teamSyncQueueConfig: QueueConfig = {
  // A sync is a few HTTP requests and file writes; one process can run several projects' syncs at once.
  concurrency: 4,
  // The HTTP client's own timeout is 30 s per request with retries; 60 s between renewals covers one.
  lockDurationMs: 60_000,
  stalledIntervalMs: 30_000,
  maxStalledCount: 2,
  // Network errors and 5xx are transient (a later attempt usually succeeds); permanent 4xx fail at once.
  attempts: 5,
  // 2 s, 4 s, 8 s, 16 s with jitter: an outage of the service is ridden out in about half a minute.
  backoff: { type: 'exponential', delayMs: 2_000, jitter: 0.5 },
  // Receipts are read by `engram team status` and the session that asked; a day, bounded, is plenty.
  removeOnComplete: { ageSeconds: 24 * 3600, count: 1_000 },
  removeOnFail: { ageSeconds: 7 * 24 * 3600, count: 1_000 },
  eventsMaxLen: 2_000,
};
