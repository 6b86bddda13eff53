import { EngramError } from '@engram/errors/engram-error';
import type { JobsOptions, Queue } from 'bullmq';
import { JOB_CATALOG, type JobDefinition, type JobKind, type PayloadOf } from './catalog.js';
import type { QueueEngine } from './engine.js';
import { MAX_PAYLOAD_BYTES, payloadBytes } from './jobs/common.js';
import type { QueueConfig } from './queues/queue-config.js';

// Typed enqueue for agent replicas. Enqueueing a wrong payload does not compile; a payload that is still wrong
// at run time (built from bad input) is refused here with the zod reason, before it reaches a worker.

export type EnqueueErrorCode =
  | 'INVALID_PAYLOAD'
  | 'PAYLOAD_TOO_LARGE'
  | 'QUEUE_UNAVAILABLE'
  | 'ENQUEUE_TIMEOUT';

export class EnqueueError extends EngramError {
  declare readonly code: EnqueueErrorCode;
  constructor(code: EnqueueErrorCode, message: string, options?: { cause?: unknown }) {
    // An engine outage or a slow engine passes; a payload that is wrong stays wrong.
    super(code, message, {
      ...options,
      retryable: code === 'QUEUE_UNAVAILABLE' || code === 'ENQUEUE_TIMEOUT',
    });
  }
}

export interface EnqueueReceipt {
  kind: JobKind;
  queue: string;
  jobId: string;
}

export interface JobProducerOptions {
  /** Upper bound on one enqueue, so a sick Redis costs a turn at most this long. */
  timeoutMs?: number;
  /** Per-kind overrides of the job options' numbers (attempts, backoff, retention); tests shorten backoff. */
  config?: { [K in JobKind]?: Partial<QueueConfig> };
}

export function jobOptionsFor(config: QueueConfig): JobsOptions {
  return {
    attempts: config.attempts,
    backoff: { type: 'exponential', delay: config.backoff.delayMs, jitter: config.backoff.jitter },
    removeOnComplete: { age: config.removeOnComplete.ageSeconds, count: config.removeOnComplete.count },
    removeOnFail: { age: config.removeOnFail.ageSeconds, count: config.removeOnFail.count },
  };
}

export class JobProducer {
  private readonly queues = new Map<JobKind, Queue>();
  private readonly timeoutMs: number;

  constructor(
    readonly engine: QueueEngine,
    private readonly options: JobProducerOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 2_000;
  }

  queue(kind: JobKind): Queue {
    let queue = this.queues.get(kind);
    if (!queue) {
      const def = JOB_CATALOG[kind];
      const config = { ...def.config, ...this.options.config?.[kind] };
      queue = this.engine.createQueue(def.queue, {
        defaultJobOptions: jobOptionsFor(config),
        streams: { events: { maxLen: config.eventsMaxLen } },
      });
      // A producer must never crash on a connection error; failures surface on enqueue.
      queue.on('error', () => {});
      this.queues.set(kind, queue);
    }
    return queue;
  }

  async enqueue<K extends JobKind>(kind: K, payload: PayloadOf<K>): Promise<EnqueueReceipt> {
    const def = JOB_CATALOG[kind] as JobDefinition<K>;
    const parsed = def.payload.safeParse(payload);
    if (!parsed.success) {
      throw new EnqueueError('INVALID_PAYLOAD', `Invalid ${kind} payload: ${parsed.error.message}`);
    }
    const data = parsed.data;
    if (kind !== 'recall' && payloadBytes(data) > MAX_PAYLOAD_BYTES) {
      throw new EnqueueError(
        'PAYLOAD_TOO_LARGE',
        `${kind} payload is ${payloadBytes(data)} bytes; job payloads carry references and must stay under ${MAX_PAYLOAD_BYTES}.`,
      );
    }
    const work = async (): Promise<EnqueueReceipt> => {
      await this.engine.state.ready();
      const queue = this.queue(kind);
      await queue.waitUntilReady();
      const dedupId = def.deduplicationId?.(data);
      const add = () =>
        queue.add(kind, data, dedupId ? { deduplication: { id: dedupId, keepLastIfActive: true } } : {});
      if (!def.beforeEnqueue) return receipt(await add());
      // The bookkeeping must land before the add: a worker may take a deduplicated waiting job the moment the
      // add is seen, and reads the bookkeeping then. On Redis both go out on the queue's connection, the
      // bookkeeping first and not awaited — the server runs them in that order, in one round trip.
      const ordered = this.engine.orderedState(queue);
      if (ordered) {
        const [, job] = await Promise.all([def.beforeEnqueue(data, ordered), add()]);
        return receipt(job);
      }
      await def.beforeEnqueue(data, this.engine.state);
      return receipt(await add());
    };
    const receipt = (job: { id?: string | undefined }): EnqueueReceipt => ({
      kind,
      queue: def.queue,
      jobId: String(job.id),
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new EnqueueError('ENQUEUE_TIMEOUT', `Enqueueing ${kind} took longer than ${this.timeoutMs} ms.`),
          ),
        this.timeoutMs,
      );
    });
    try {
      return await Promise.race([work(), timeout]);
    } catch (error) {
      if (error instanceof EnqueueError) throw error;
      throw new EnqueueError(
        'QUEUE_UNAVAILABLE',
        `Could not enqueue ${kind}: ${(error as Error).message}. Memory work for this turn was not queued.`,
        { cause: error },
      );
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    // disconnect() after close(): a queue closed while its client is reconnecting would otherwise keep a
    // client retrying forever (BullMQ's quit fails under enableOfflineQueue: false).
    await Promise.allSettled(
      [...this.queues.values()].map(async (q) => {
        await q.close().catch(() => {});
        await q.disconnect().catch(() => {});
      }),
    );
    this.queues.clear();
  }
}
