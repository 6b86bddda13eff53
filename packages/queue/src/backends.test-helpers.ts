import { type Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { quoteSchemaName } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { inject } from 'vitest';
import type { QueueBackendConfig } from './backend-config.js';
import { type ConnectionProfile, createQueueEngine, prepareBackend, type QueueEngine } from './engine.js';
import { postgresSchemaFor } from './postgres-backend.js';

// The engines the queue's integration tests run against: each suite is written once and parametrised with
// describe.each(TEST_BACKENDS), so both backends are held to the same behaviour.

export interface TestBackend {
  kind: QueueBackendConfig['kind'];
  config(): QueueBackendConfig;
  /** A config that points at nothing listening, for fail-fast tests. */
  unreachableConfig(): QueueBackendConfig;
  /**
   * Makes a fresh namespace usable (PostgreSQL: migrates its schema, as a process does at start) and
   * registers its removal with `closer` (PostgreSQL: drops the schema after everything in it is closed).
   */
  prepare(namespace: string, closer: Closer): Promise<void>;
  /** Gives a running job's lock to someone else, as a second worker taking over a stalled job would. */
  stealJobLock(namespace: string, queue: string, jobId: string, closer: Closer): Promise<void>;
}

const redisBackend: TestBackend = {
  kind: 'redis',
  config: () => ({ kind: 'redis', url: inject('redisUrl'), implicit: false }),
  unreachableConfig: () => ({ kind: 'redis', url: 'redis://127.0.0.1:1', implicit: false }),
  prepare: async () => {},
  async stealJobLock(namespace, queue, jobId, closer) {
    const redis = new Redis(inject('redisUrl'));
    closer.defer(async () => redis.quit());
    await redis.set(`${namespace}:${queue}:${jobId}:lock`, 'someone-else');
  },
};

async function withClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: inject('postgresUrl') });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Drops a namespace's schema (queues and state) from the test server. */
export async function dropPostgresNamespace(namespace: string): Promise<void> {
  await withClient((c) =>
    c.query(`DROP SCHEMA IF EXISTS ${quoteSchemaName(postgresSchemaFor(namespace))} CASCADE`),
  );
}

const postgresBackend: TestBackend = {
  kind: 'postgres',
  config: () => ({ kind: 'postgres', url: inject('postgresUrl'), implicit: false }),
  unreachableConfig: () => ({
    kind: 'postgres',
    url: 'postgres://engram:secret@127.0.0.1:1/engram',
    implicit: false,
  }),
  async prepare(namespace, closer) {
    // Registered first so it runs last: after every queue, worker and engine of the test is closed.
    closer.defer(() => dropPostgresNamespace(namespace));
    await prepareBackend(this.config(), namespace);
  },
  async stealJobLock(namespace, queue, jobId) {
    const schema = quoteSchemaName(postgresSchemaFor(namespace));
    await withClient((c) =>
      c.query(`UPDATE ${schema}.job SET lock_token = 'someone-else' WHERE queue = $1 AND id = $2`, [
        queue,
        jobId,
      ]),
    );
  },
};

export const TEST_BACKENDS: Array<[QueueBackendConfig['kind'], TestBackend]> = [
  ['redis', redisBackend],
  ['postgres', postgresBackend],
];

/** A producer engine and a worker engine on a fresh, prepared namespace of `backend`. */
export async function testEngines(
  backend: TestBackend,
  closer: Closer,
  namespace = uniquePrefix('q'),
): Promise<{ producer: QueueEngine; worker: QueueEngine; namespace: string }> {
  await backend.prepare(namespace, closer);
  const make = (profile: ConnectionProfile) =>
    closer.add(createQueueEngine({ config: backend.config(), profile, namespace }));
  return { producer: make('producer'), worker: make('worker'), namespace };
}
