import { EngramError } from '@engram/errors/engram-error';
import type { JobsOptions, Queue, QueueEvents } from 'bullmq';
import { JOB_CATALOG, type JobDefinition, type JobKind, type PayloadOf, type ResultOf } from './catalog.js';
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

/** What one look at a job says: finished or not, and its result or why it failed. */
export interface JobOutcome<R> {
  finished: boolean;
  result?: R;
  failedReason?: string;
}

/** How long a queue's completion listener stays open after its last wait, for the next one to reuse. */
const RESULT_LISTENER_LINGER_MS = 10_000;
/** A waiting caller also looks at the job's state: first this soon, then at doubling intervals up to the max. */
const BACKSTOP_FIRST_MS = 50;
const BACKSTOP_MAX_MS = 500;
/**
 * A listener whose connection has been up this long is reading the queue's events (its first read goes out
 * right after connecting): a job enqueued since cannot finish unseen, so a wait skips the look at once.
 */
const LISTENER_SETTLED_MS = 1_000;

/** One queue's completion events, shared by every wait of this producer on that queue. */
interface ResultListener {
  events: QueueEvents;
  /** When its connection was ready (undefined until then). */
  readyAt: number | undefined;
  waiters: Map<string, Set<(event: { returnvalue?: unknown; failed?: boolean }) => void>>;
  linger: NodeJS.Timeout | undefined;
}

/** How long closing a listener may wait for its connection to say goodbye. */
const LISTENER_CLOSE_MS = 1_000;

/**
 * Closes a listener without hanging on a connection that is down: BullMQ's close waits for the connection to
 * come up first, so past LISTENER_CLOSE_MS (or at once, when it never came up) it is closed by force, which
 * also stops its reconnect attempts (a short-lived process must be able to exit).
 */
async function closeListener(listener: ResultListener): Promise<void> {
  const closing = listener.events.close().catch(() => {});
  if (listener.readyAt !== undefined)
    await Promise.race([closing, new Promise((r) => setTimeout(r, LISTENER_CLOSE_MS).unref())]);
  await listener.events
    .getBackend()
    .close(true)
    .catch(() => {});
}

export class JobProducer {
  private readonly queues = new Map<JobKind, Queue>();
  private readonly listeners = new Map<JobKind, ResultListener>();
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

  /** One non-blocking look at a job: finished or not, and its result or failure reason. */
  async outcome<K extends JobKind>(kind: K, jobId: string): Promise<JobOutcome<ResultOf<K>>> {
    const job = await this.queue(kind).getJob(jobId);
    if (!job?.finishedOn) return { finished: false };
    return job.failedReason
      ? { finished: true, failedReason: job.failedReason }
      : { finished: true, result: job.returnvalue as ResultOf<K> };
  }

  /**
   * Waits up to `timeoutMs` for a job to finish and says how it ended (`finished: false` when time ran out).
   * The queue's completion event answers at once; a look at the job's state at doubling intervals finds what
   * an event does not deliver (PostgreSQL can skip an event committed out of order, engine.test.ts), and a
   * look as soon as a new listener is up finds a job that finished before it read the queue's events. An
   * engine that cannot be reached makes the wait end at its deadline, unfinished.
   */
  async waitFor<K extends JobKind>(
    kind: K,
    jobId: string,
    timeoutMs: number,
  ): Promise<JobOutcome<ResultOf<K>>> {
    const listener = this.resultListener(kind);
    if (listener.linger) clearTimeout(listener.linger);
    listener.linger = undefined;
    let settle!: (outcome: JobOutcome<ResultOf<K>>) => void;
    const settled = new Promise<JobOutcome<ResultOf<K>>>((resolve) => {
      settle = resolve;
    });
    let done = false;
    const finish = (outcome: JobOutcome<ResultOf<K>>) => {
      if (done) return;
      done = true;
      settle(outcome);
    };
    const onEvent = (event: { returnvalue?: unknown; failed?: boolean }) => {
      if (!event.failed) finish({ finished: true, result: event.returnvalue as ResultOf<K> });
      // A failure event is confirmed by the job's state (and carries its reason there).
      else
        void this.outcome(kind, jobId).then(
          (o) => o.finished && finish(o),
          () => {},
        );
    };
    const waiters = listener.waiters.get(jobId) ?? new Set();
    waiters.add(onEvent);
    listener.waiters.set(jobId, waiters);
    const deadline = setTimeout(() => finish({ finished: false }), timeoutMs);
    const settledListener =
      listener.readyAt !== undefined && Date.now() - listener.readyAt >= LISTENER_SETTLED_MS;
    void (async () => {
      await listener.events.waitUntilReady().catch(() => {});
      let delay = BACKSTOP_FIRST_MS;
      if (settledListener) await Promise.race([settled, new Promise((r) => setTimeout(r, delay))]);
      while (!done) {
        // An engine that cannot answer now may answer at the next look; the deadline ends the wait.
        const outcome = await this.outcome(kind, jobId).catch(() => undefined);
        if (outcome?.finished) return finish(outcome);
        await Promise.race([settled, new Promise((r) => setTimeout(r, delay))]);
        delay = Math.min(delay * 2, BACKSTOP_MAX_MS);
      }
    })();
    try {
      return await settled;
    } finally {
      clearTimeout(deadline);
      waiters.delete(onEvent);
      if (waiters.size === 0) listener.waiters.delete(jobId);
      if (listener.waiters.size === 0) this.lingerListener(kind, listener);
    }
  }

  private resultListener(kind: JobKind): ResultListener {
    let listener = this.listeners.get(kind);
    if (listener) return listener;
    const events = this.engine.createQueueEvents(JOB_CATALOG[kind].queue);
    // Connection trouble surfaces as waits that end at their deadline, never as a crash.
    events.on('error', () => {});
    const created: ResultListener = { events, readyAt: undefined, waiters: new Map(), linger: undefined };
    events.waitUntilReady().then(
      () => {
        created.readyAt = Date.now();
      },
      () => {},
    );
    const dispatch = (jobId: string, event: { returnvalue?: unknown; failed?: boolean }) => {
      for (const waiter of created.waiters.get(jobId) ?? []) waiter(event);
    };
    events.on('completed', ({ jobId, returnvalue }) => dispatch(jobId, { returnvalue }));
    events.on('failed', ({ jobId }) => dispatch(jobId, { failed: true }));
    this.listeners.set(kind, created);
    listener = created;
    return listener;
  }

  /** Closes `kind`'s listener after RESULT_LISTENER_LINGER_MS unless a wait comes first. */
  private lingerListener(kind: JobKind, listener: ResultListener): void {
    if (listener.linger) clearTimeout(listener.linger);
    listener.linger = setTimeout(() => {
      if (listener.waiters.size > 0 || this.listeners.get(kind) !== listener) return;
      this.listeners.delete(kind);
      void closeListener(listener);
    }, RESULT_LISTENER_LINGER_MS);
    listener.linger.unref();
  }

  async close(): Promise<void> {
    const listeners = [...this.listeners.values()];
    this.listeners.clear();
    for (const listener of listeners) if (listener.linger) clearTimeout(listener.linger);
    await Promise.allSettled(listeners.map(closeListener));
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
