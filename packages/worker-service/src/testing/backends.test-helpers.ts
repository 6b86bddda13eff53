import type { QueueBackendConfig } from '@engram/queue/backend-config';
import { dropPostgresNamespace } from '@engram/queue/backends.test-helpers';
import type { Closer } from '@engram/testkit/bullmq-helpers';
import { inject } from 'vitest';

// The queue engines the worker integration tests run against, chosen the way a deployment chooses them:
// through the environment. Redis through REDIS_URL (production), BullMQ's PostgreSQL backend through
// ENGRAM_QUEUE_URL (zero-install mode; the test run's embedded server). Suites are written once and
// parametrised with describe.each(WORKER_TEST_BACKENDS).

export type BackendKind = QueueBackendConfig['kind'];

export interface WorkerTestBackend {
  kind: BackendKind;
  /** The variables that select this engine, for loadWorkersConfig and for a spawned worker bin. */
  env(): Record<string, string>;
  config(): QueueBackendConfig;
  /**
   * Registers a namespace's removal with `closer` (PostgreSQL: drops its schema). Call it before anything is
   * opened in the namespace, so the removal runs after every worker, queue and engine in it is closed. The
   * namespace itself is prepared by whoever opens it first (the worker service migrates at start).
   */
  cleanUpAfter(namespace: string, closer: Closer): void;
}

const redis: WorkerTestBackend = {
  kind: 'redis',
  env: () => ({ REDIS_URL: inject('redisUrl') }),
  config: () => ({ kind: 'redis', url: inject('redisUrl'), implicit: false }),
  cleanUpAfter: () => {},
};

const postgres: WorkerTestBackend = {
  kind: 'postgres',
  env: () => ({ ENGRAM_QUEUE_URL: inject('postgresUrl') }),
  config: () => ({ kind: 'postgres', url: inject('postgresUrl'), implicit: false }),
  cleanUpAfter: (namespace, closer) => closer.defer(() => dropPostgresNamespace(namespace)),
};

/**
 * Both engines; the fast loop (`npm run test:fast`, ENGRAM_TEST_FAST=1) runs these job-level suites on Redis
 * only. The queue package's own suites hold both engines to one contract in every tier.
 */
export const WORKER_TEST_BACKENDS: Array<[BackendKind, WorkerTestBackend]> =
  process.env.ENGRAM_TEST_FAST === '1'
    ? [['redis', redis]]
    : [
        ['redis', redis],
        ['postgres', postgres],
      ];

/** `env` without any queue-engine selection inherited from the caller's environment. */
export function withoutBackendEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { REDIS_URL: _redis, ENGRAM_QUEUE_URL: _queue, ...rest } = env;
  return rest;
}
