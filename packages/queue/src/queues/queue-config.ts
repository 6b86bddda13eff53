// The shape of one queue's operational numbers. Each queue's values live in its own *.config.ts with the
// reason for every number beside it.

export interface QueueConfig {
  /** Jobs one worker process runs at once. Overridable per deployment through env. */
  concurrency: number;
  /** How long a job's lock lives without renewal; BullMQ renews it every lockDuration/2. */
  lockDurationMs: number;
  /** How often workers look for jobs whose lock expired (their worker died). */
  stalledIntervalMs: number;
  /** Stalls tolerated before a job is failed instead of retried. */
  maxStalledCount: number;
  attempts: number;
  backoff: { type: 'exponential'; delayMs: number; jitter: number };
  removeOnComplete: { ageSeconds: number; count: number };
  removeOnFail: { ageSeconds: number; count: number };
  /** Approximate cap of the queue's events stream. */
  eventsMaxLen: number;
}
