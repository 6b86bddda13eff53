import { EngramError } from '@engram/errors/engram-error';
import {
  type ConnectionOptions,
  createPostgresBackend,
  type Processor,
  Queue,
  QueueEvents,
  type QueueOptions,
  type Telemetry,
  Worker,
  type WorkerOptions,
  withBackend,
} from 'bullmq';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { type QueueBackendConfig, redactUrl } from './backend-config.js';
import {
  bullmqPostgresConnection,
  migratePostgres,
  type PreparedPostgres,
  postgresPoolConfig,
  postgresSchemaFor,
} from './postgres-backend.js';
import { bullmqConnectionOptions, createRedisClient, isCluster, topologyNamespace } from './redis-client.js';
import { PostgresStateStore } from './state/postgres-state-store.js';
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
  /**
   * Namespace of every queue and state key. Redis: the key prefix. PostgreSQL: the schema, as
   * postgresSchemaFor(namespace) (`engram` → schema `engram`). Tests use a fresh one each.
   */
  namespace?: string;
  /**
   * BullMQ's telemetry option for every Queue and Worker of this engine (`@engram/telemetry`'s add-on when
   * OpenTelemetry is on): a job then carries its producer's trace context and the worker's span continues it.
   */
  telemetry?: Telemetry | undefined;
}

export const DEFAULT_NAMESPACE = 'engram';

export interface QueueEngine {
  readonly config: QueueBackendConfig;
  readonly profile: ConnectionProfile;
  readonly namespace: string;
  /** PostgreSQL only: the schema holding this namespace's queues and state. */
  readonly schema?: string;
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
  /**
   * A state store whose commands travel on `queue`'s own connection (Redis, queues of this engine): a record
   * sent just before an add on that queue reaches the server before it (one connection keeps its order) and
   * in the same round trip. Undefined where the two share no connection (PostgreSQL): the caller awaits the
   * record before the add.
   */
  orderedState(queue: Queue): StateStore | undefined;
  close(): Promise<void>;
}

export class UnsupportedBackendError extends EngramError {
  constructor(message: string) {
    super('QUEUE_BACKEND_UNSUPPORTED', message, { retryable: false });
  }
}

export class QueueBackendPrepareError extends EngramError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('QUEUE_BACKEND_PREPARE_FAILED', message, { retryable: true, ...options });
  }
}

export type PreparedBackend = { kind: 'redis' } | ({ kind: 'postgres' } & PreparedPostgres);

/**
 * Makes the backend ready for engines of `namespace`. PostgreSQL: runs BullMQ's migrations and the state
 * tables' migrations in the namespace's schema, once, under advisory locks (safe when many processes start
 * together). Redis: nothing to do. Call it once at process start, before createQueueEngine; engines never
 * migrate implicitly.
 */
export async function prepareBackend(
  config: QueueBackendConfig,
  namespace: string = DEFAULT_NAMESPACE,
): Promise<PreparedBackend> {
  if (config.kind === 'redis') return { kind: 'redis' };
  try {
    return { kind: 'postgres', ...(await migratePostgres(config.url, postgresSchemaFor(namespace))) };
  } catch (error) {
    throw new QueueBackendPrepareError(
      `Could not prepare the PostgreSQL queue schema "${postgresSchemaFor(namespace)}" at ` +
        `${redactUrl(config.url)}: ${(error as Error).message}. Check that the server is running and ` +
        'ENGRAM_QUEUE_URL is right (the user needs CREATE on the database).',
      { cause: error },
    );
  }
}

/** prepareBackend, then createQueueEngine: what a process does at start. */
export async function openQueueEngine(options: QueueEngineOptions): Promise<QueueEngine> {
  await prepareBackend(options.config, options.namespace ?? DEFAULT_NAMESPACE);
  return createQueueEngine(options);
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
  if (options.config.kind === 'redis') return createRedisEngine(options, options.config);
  if (options.config.kind === 'postgres')
    return createPostgresEngine(options, options.namespace ?? DEFAULT_NAMESPACE);
  throw new UnsupportedBackendError(
    `Unknown queue backend ${JSON.stringify((options.config as { kind: unknown }).kind)}; set REDIS_URL or ENGRAM_QUEUE_URL.`,
  );
}

/**
 * A BullMQ object on its own connection. One node / Sentinel: options BullMQ turns into a client it owns.
 * Cluster: BullMQ needs a client instance, which it does not close, so it is closed with the object.
 */
function withOwnConnection<T extends { close(): Promise<void> }>(
  config: Extract<QueueBackendConfig, { kind: 'redis' }>,
  make: (connection: ConnectionOptions) => T,
): T {
  const profile = redisConnectionOptions('worker');
  if (!isCluster(config)) return make(bullmqConnectionOptions(config, profile) as ConnectionOptions);
  const client = createRedisClient(config, profile);
  client.on('error', () => {});
  return closingClient(make(client as unknown as ConnectionOptions), client);
}

/** BullMQ does not close a client it was given: `made` closes it after itself. */
function closingClient<T extends { close(): Promise<void> }>(made: T, client: Redis | Cluster): T {
  const close = made.close.bind(made);
  made.close = async () => {
    try {
      await close();
    } finally {
      client.disconnect();
    }
  };
  return made;
}

function createRedisEngine(
  options: QueueEngineOptions,
  config: Extract<QueueBackendConfig, { kind: 'redis' }>,
): QueueEngine {
  const namespace = topologyNamespace(config, options.namespace ?? DEFAULT_NAMESPACE);
  const traced = options.telemetry ? { telemetry: options.telemetry } : {};
  const base = redisConnectionOptions(options.profile);
  // Producers (the agent) auto-pipeline the state store's commands: the records of a turn batch into few
  // writes. Their queues get connections of their own, never auto-pipelined: a queue loads BullMQ's 64 Lua
  // commands onto its connection, and ioredis copies every command of a connection onto each pipeline it
  // builds (53 µs per batch instead of 3.5) — on a shared auto-pipelined connection that ran for every batch,
  // ~4% of a replica's CPU (BENCHMARKS.md, hosted soak). An enqueue's bookkeeping travels on its queue's
  // connection instead (`orderedState`), just ahead of the add.
  const state = new RedisStateStore(
    createRedisClient(
      config,
      options.profile === 'producer' ? { ...base, enableAutoPipelining: true } : base,
    ),
    namespace,
  );
  // Each queue's connection also carries a state store, so the bookkeeping an enqueue records before its add
  // goes out on the add's connection, ahead of it (JobProducer.enqueue).
  const ordered = new WeakMap<Queue, StateStore>();
  return {
    config,
    profile: options.profile,
    namespace,
    state,
    createQueue: <D, R>(name: string, queueOptions?: Omit<QueueOptions, 'connection' | 'prefix'>) => {
      const client = createRedisClient(config, redisConnectionOptions(options.profile));
      client.on('error', () => {});
      const queue = closingClient(
        new Queue<D, R>(name, {
          ...queueOptions,
          ...traced,
          connection: client as unknown as ConnectionOptions,
          prefix: namespace,
        }),
        client,
      );
      ordered.set(
        queue as unknown as Queue,
        new RedisStateStore(client, namespace, {}, { borrowed: true, writeWithNext: true }),
      );
      return queue;
    },
    orderedState: (queue) => ordered.get(queue),
    createWorker: (name, processor, workerOptions) =>
      // Workers always use the worker profile: their blocking connection must wait out outages.
      withOwnConnection(
        config,
        (connection) =>
          new Worker(name, processor, { ...workerOptions, ...traced, connection, prefix: namespace }),
      ),
    createQueueEvents: (name) =>
      withOwnConnection(config, (connection) => new QueueEvents(name, { connection, prefix: namespace })),
    close: () => state.close(),
  };
}

/**
 * During an outage, PostgreSQL commands fail at once (pg has no offline queue like ioredis), so a worker's
 * retry delay after a failed fetch or completion is in effect its reconnect interval: 1 s instead of BullMQ's
 * 15 s default, so workers resume within a second of the database coming back.
 */
const POSTGRES_WORKER_RETRY_DELAY_MS = 1_000;

/**
 * BullMQ on PostgreSQL: the same Queue/Worker/QueueEvents classes bound to BullMQ's PostgreSQL backend. The
 * schema must have been migrated by prepareBackend; these classes only check it is compatible.
 * The returned objects are typed as the Redis-bound classes so callers stay backend-agnostic; nothing in
 * Engram touches their backend-specific members (`client`), which on this backend are not ioredis clients.
 */
function createPostgresEngine(options: QueueEngineOptions, namespace: string): QueueEngine {
  if (options.config.kind !== 'postgres') throw new UnsupportedBackendError('not a PostgreSQL backend');
  const { url } = options.config;
  const schema = postgresSchemaFor(namespace);
  const pg = withBackend(createPostgresBackend);
  // The PostgreSQL classes are BullMQ's own with another backend: the same telemetry option, the context
  // stored with the job as on Redis.
  const traced = options.telemetry ? { telemetry: options.telemetry } : {};
  const state = new PostgresStateStore(postgresPoolConfig(url, options.profile), schema);
  return {
    config: options.config,
    profile: options.profile,
    namespace,
    schema,
    state,
    createQueue: <D, R>(name: string, queueOptions?: Omit<QueueOptions, 'connection' | 'prefix'>) =>
      new pg.Queue<D, R>(name, {
        ...queueOptions,
        ...traced,
        connection: bullmqPostgresConnection(url, options.profile, schema),
      }) as unknown as Queue<D, R>,
    createWorker: <D, R>(
      name: string,
      processor: Processor<D, R>,
      workerOptions?: Omit<WorkerOptions, 'connection' | 'prefix'>,
    ) =>
      // Workers always use the worker profile, as on Redis.
      new pg.Worker<D, R>(name, processor as never, {
        runRetryDelay: POSTGRES_WORKER_RETRY_DELAY_MS,
        ...workerOptions,
        ...traced,
        connection: bullmqPostgresConnection(url, 'worker', schema),
      }) as unknown as Worker<D, R>,
    createQueueEvents: (name) =>
      new pg.QueueEvents(name, {
        connection: bullmqPostgresConnection(url, 'worker', schema),
      }) as unknown as QueueEvents,
    // The state tables and BullMQ's share no connection whose order an add could follow.
    orderedState: () => undefined,
    close: () => state.close(),
  };
}
