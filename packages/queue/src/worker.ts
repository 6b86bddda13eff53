import { EngramError, isEngramError } from '@engram/errors/engram-error';
import { withScope } from '@engram/telemetry/scope';
import { DelayedError, type Job, type Queue, UnrecoverableError, type Worker } from 'bullmq';
import { JOB_CATALOG, type JobDefinition, type JobKind, type PayloadOf, type ResultOf } from './catalog.js';
import type { QueueEngine } from './engine.js';
import type { QueueConfig } from './queues/queue-config.js';

// The base processor every worker runs: validate the payload (a validation failure can never succeed, so it
// fails at once without retries), run the typed handler with an AbortSignal that fires when the job's lock is
// lost, and turn errors that say they are not retryable into BullMQ UnrecoverableErrors.

export interface HandlerContext {
  job: Job;
  /** Aborted when this worker loses the job's lock (another worker may now own it) or on shutdown. */
  signal: AbortSignal;
  /** 1 for the first attempt. */
  attempt: number;
  progress(data: Record<string, unknown>): Promise<void>;
  /**
   * Puts the job back as delayed for `delayMs` without counting an attempt (e.g. the project's memory is busy).
   * Returns a value to throw: `throw await ctx.defer(1000)`.
   */
  defer(delayMs: number): Promise<Error>;
}

export type JobHandler<K extends JobKind> = (
  payload: PayloadOf<K>,
  ctx: HandlerContext,
) => Promise<ResultOf<K>>;

export interface JobEvents {
  onCompleted?(info: { kind: JobKind; job: Job; durationMs: number; result: unknown }): void;
  /** `final` is true when BullMQ will not retry it. */
  onFailed?(info: {
    kind: JobKind;
    job: Job | undefined;
    durationMs: number;
    error: Error;
    final: boolean;
  }): void;
  onError?(info: { kind: JobKind; error: Error }): void;
  onLockLost?(info: { kind: JobKind; jobId: string }): void;
}

export interface CreateJobWorkerOptions extends JobEvents {
  /** Overrides of the queue's configured numbers (tests shorten lock and stall periods). */
  config?: Partial<QueueConfig>;
  autorun?: boolean;
}

/** An error that can never succeed on retry (bad input, auth); any EngramError with `retryable: false` is one too. */
export class PermanentJobError extends EngramError {
  constructor(code: string, message: string, options: { cause?: unknown } = {}) {
    super(code, message, { ...options, retryable: false });
  }
}

/**
 * The worker's one retry decision: BullMQ's own UnrecoverableError, or an EngramError that says it is not
 * retryable. Any other error (a Node system error, a driver's, a bug's TypeError) is retried with back-off: an
 * unknown failure is treated as transient, and every error Engram makes states which it is at construction.
 */
export function isPermanent(error: unknown): boolean {
  if (error instanceof UnrecoverableError) return true;
  return isEngramError(error) && !error.retryable;
}

export function createJobWorker<K extends JobKind>(
  engine: QueueEngine,
  kind: K,
  handler: JobHandler<K>,
  options: CreateJobWorkerOptions = {},
): Worker {
  const def = JOB_CATALOG[kind] as JobDefinition<K>;
  const config: QueueConfig = { ...def.config, ...options.config };

  const processor = async (job: Job, token?: string, signal?: AbortSignal): Promise<ResultOf<K>> => {
    const parsed = def.payload.safeParse(job.data);
    if (!parsed.success) {
      throw new UnrecoverableError(`Invalid ${kind} payload: ${parsed.error.message}`);
    }
    const ctx: HandlerContext = {
      job,
      signal: signal ?? new AbortController().signal,
      attempt: job.attemptsMade + 1,
      progress: (data) => job.updateProgress(data),
      defer: async (delayMs) => {
        await job.moveToDelayed(Date.now() + delayMs, token);
        return new DelayedError();
      },
    };
    try {
      // Every span the handler starts (fork, model calls, commit) carries the job's tenant and project.
      const scope = parsed.data as { tenant?: string; projectDir?: string };
      return await withScope({ tenant: scope.tenant, project: scope.projectDir }, () =>
        handler(parsed.data, ctx),
      );
    } catch (error) {
      if (error instanceof DelayedError) throw error;
      if (isPermanent(error) && !(error instanceof UnrecoverableError)) {
        const e = error as Error & { code?: string };
        throw new UnrecoverableError(`${e.code ?? e.name}: ${e.message}`);
      }
      throw error;
    }
  };

  const worker = engine.createWorker(def.queue, processor, {
    concurrency: config.concurrency,
    lockDuration: config.lockDurationMs,
    stalledInterval: config.stalledIntervalMs,
    maxStalledCount: config.maxStalledCount,
    autorun: options.autorun ?? true,
  }) as Worker;

  worker.on('completed', (job, result) => {
    options.onCompleted?.({ kind, job, durationMs: duration(job), result });
  });
  worker.on('failed', (job, error) => {
    const attempts = job?.opts.attempts ?? 1;
    const final = !job || isPermanent(error) || job.attemptsMade >= attempts;
    options.onFailed?.({ kind, job, durationMs: job ? duration(job) : 0, error, final });
  });
  worker.on('error', (error) => options.onError?.({ kind, error }));
  worker.on('lockRenewalFailed', (jobIds) => {
    for (const jobId of jobIds) {
      // Someone else may own the job now: stop our copy of the work before it writes anything more.
      worker.cancelJob(jobId, 'job lock lost');
      options.onLockLost?.({ kind, jobId });
    }
  });
  return worker;
}

/**
 * Wakes delayed jobs early (a project's writer lease handed to a waiting job): moves the job from delayed to
 * waiting. One queue handle per job kind, opened on first use; `close` closes them.
 */
export interface JobWaker {
  /** True when the job was delayed and is now waiting; false when it was not delayed (or is gone). */
  wake(kind: JobKind, jobId: string): Promise<boolean>;
  close(): Promise<void>;
}

export function createJobWaker(engine: QueueEngine): JobWaker {
  const queues = new Map<JobKind, Queue>();
  const queue = (kind: JobKind): Queue => {
    let q = queues.get(kind);
    if (!q) {
      q = engine.createQueue(JOB_CATALOG[kind].queue) as Queue;
      queues.set(kind, q);
    }
    return q;
  };
  return {
    async wake(kind, jobId) {
      const job = await queue(kind).getJob(jobId);
      if (!job || !(await job.isDelayed())) return false;
      return job.promote().then(
        () => true,
        () => false,
      );
    },
    async close() {
      await Promise.allSettled([...queues.values()].map((q) => q.close()));
      queues.clear();
    },
  };
}

function duration(job: Job): number {
  return job.finishedOn && job.processedOn ? job.finishedOn - job.processedOn : 0;
}
