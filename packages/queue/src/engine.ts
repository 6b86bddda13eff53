import {
  type ConnectionOptions,
  type Processor,
  Queue,
  QueueEvents,
  type QueueOptions,
  Worker,
  type WorkerOptions,
} from 'bullmq';
import type { RedisOptions } from 'ioredis';
import type { QueueBackendConfig } from './backend-config.js';
import { RedisStateStore } from './state/redis-state-store.js';
import type { StateStore } from './state/state-store.js';

// The connection factory: the one place that turns a backend choice into BullMQ classes, connection
// profiles and a state store. Everything else asks an engine for queues and workers.

export type ConnectionProfile = 'producer' | 'worker';

export interface QueueEngineOptions {
  config: QueueBackendConfig;
  /**
   * producer: agent replicas — fail fast (no offline queue, one retry) so a Redis outage never hangs a turn.
   * worker: reconnect forever and never give up on a command (BullMQ requires maxRetriesPerRequest: null).
   */
  profile: ConnectionProfile;
  /** Key namespace (Redis key prefix). Tests use a fresh one each; production uses the default. */
  namespace?: string;
}

export const DEFAULT_NAMESPACE = 'engram';

export interface QueueEngine {
  readonly config: QueueBackendConfig;
  readonly profile: ConnectionProfile;
  readonly namespace: string;
  readonly state: StateStore;
  createQueue<D = unknown, R = unknown>(
    name: string,
    options?: Omit<QueueOptions, 'connection' | 'prefix'>,
  ): Queue<D, R>;
  createWorker<D = unknown, R = unknown>(
    name: string,
    processor: Processor<D, R>,
    options?: Omit<WorkerOptions, 'connection' | 'prefix'>,
  ): Worker<D, R>;
  createQueueEvents(name: string): QueueEvents;
  close(): Promise<void>;
}

export class UnsupportedBackendError extends Error {
  readonly code = 'QUEUE_BACKEND_UNSUPPORTED';
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedBackendError';
  }
}

export function redisConnectionOptions(profile: ConnectionProfile): RedisOptions {
  if (profile === 'producer') {
    return {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 3_000,
      // Keep trying to reconnect in the background, but never make a caller wait for it.
      retryStrategy: (times: number) => Math.min(200 * times, 2_000),
    };
  }
  return {
    maxRetriesPerRequest: null,
    enableOfflineQueue: true,
    connectTimeout: 10_000,
    retryStrategy: (times: number) => Math.min(250 * 2 ** Math.min(times, 6), 10_000),
  };
}

export function createQueueEngine(options: QueueEngineOptions): QueueEngine {
  const namespace = options.namespace ?? DEFAULT_NAMESPACE;
  if (options.config.kind === 'redis') {
    const base = redisConnectionOptions(options.profile);
    const connection = { url: options.config.url, ...base } as ConnectionOptions;
    const state = new RedisStateStore(options.config.url, namespace, base);
    return {
      config: options.config,
      profile: options.profile,
      namespace,
      state,
      createQueue: (name, queueOptions) =>
        new Queue(name, { ...queueOptions, connection, prefix: namespace }),
      createWorker: (name, processor, workerOptions) =>
        // Workers always use the worker profile: their blocking connection must wait out outages.
        new Worker(name, processor, {
          ...workerOptions,
          connection: { url: options.config.url, ...redisConnectionOptions('worker') } as ConnectionOptions,
          prefix: namespace,
        }),
      createQueueEvents: (name) =>
        new QueueEvents(name, {
          connection: { url: options.config.url, ...redisConnectionOptions('worker') } as ConnectionOptions,
          prefix: namespace,
        }),
      close: () => state.close(),
    };
  }
  throw new UnsupportedBackendError(
    'The PostgreSQL queue backend (ENGRAM_QUEUE_URL=postgres://…) is not available in this build; set REDIS_URL.',
  );
}
