import type { QueueConfig } from './queue-config.js';

export const extractQueueConfig: QueueConfig = {
  // A fork is LLM-bound: it spends >95% of its time waiting on the model (a few ms of CPU per model turn:
  // reading the transcript tail, rendering the request, writing a file). Sizing is by in-flight model calls,
  // not cores: 100 per process keeps ~100 extractions moving with a 0.5–5 s model while one core stays under
  // half busy (bench/soak.ts measures jobs/s at 100 with a 500 ms model). Lower it (ENGRAM_CONCURRENCY_EXTRACT)
  // when the model's rate limit, not the fleet, is the bottleneck.
  concurrency: 100,
  // A fork runs ≤5 model turns; 60 s covers a slow turn between renewals without hiding a dead worker long.
  lockDurationMs: 60_000,
  // Check for dead workers twice a lock period: a killed worker's job resumes within ~1.5 lock periods.
  stalledIntervalMs: 30_000,
  // A job that stalls twice is probably killing its worker (OOM); fail it rather than loop.
  maxStalledCount: 2,
  // Overload (429/529) and connection errors are transient; five tries span ~1 min with the backoff below.
  attempts: 5,
  // 2 s, 4 s, 8 s, 16 s … with ±50% jitter so a fleet does not retry in lockstep after an outage.
  backoff: { type: 'exponential', delayMs: 2_000, jitter: 0.5 },
  // Completed receipts are read by the agent within seconds; keep a day for the dashboard, bounded.
  removeOnComplete: { ageSeconds: 24 * 3600, count: 1_000 },
  // Failures are kept a week for diagnosis, bounded so a failure storm cannot fill Redis.
  removeOnFail: { ageSeconds: 7 * 24 * 3600, count: 5_000 },
  // One completed/failed pair per turn; 10k events is hours of history for QueueEvents listeners.
  eventsMaxLen: 10_000,
};
