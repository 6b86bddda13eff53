import type { Closer } from '@engram/testkit/bullmq-helpers';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { inject } from 'vitest';
import { loadWorkersConfig, type WorkersConfig } from '../config.js';
import { createHandlers } from '../handlers.js';
import { createLogger } from '../logger.js';
import { startWorkerService, type WorkerService } from '../service.js';

// The worker service as integration tests run it: the production handlers against the scripted model server,
// the run's Redis (or the backend env given), a fresh namespace, no HTTP side, silent logs.

export interface TestServiceOptions {
  /** The scripted model server's base URL. */
  modelUrl: string;
  engramHome: string;
  /** ENGRAM_QUEUES: the queues this service consumes. */
  queues: string;
  /** Stops the service when it closes; without one, the caller stops it. */
  closer?: Closer;
  /** Queue backend env (default: `REDIS_URL` of the run's Redis). */
  backendEnv?: Record<string, string | undefined>;
  namespace?: string;
  /** Further worker env (lock durations, thresholds, …). */
  env?: Record<string, string>;
}

export function testWorkersConfig(opts: TestServiceOptions): WorkersConfig {
  return loadWorkersConfig({
    ...(opts.backendEnv ?? { REDIS_URL: inject('redisUrl') }),
    ENGRAM_HOME: opts.engramHome,
    ENGRAM_NAMESPACE:
      opts.namespace ?? uniquePrefix(opts.queues.replace(/[^a-z]/g, '').slice(0, 12) || 'svc'),
    ENGRAM_QUEUES: opts.queues,
    ENGRAM_WORKERS_PORT: '0',
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: opts.modelUrl,
    ENGRAM_MODEL_MAX_RETRIES: '0',
    LOG_LEVEL: 'silent',
    // In-process test services run the fork client's model calls on the jobs' thread: booting a model thread
    // (the SDK loaded again inside it) per service cost ~90 s of CPU in worker-service's suite alone. The threaded
    // path keeps its coverage where it runs in production: the client's own tests (agent-runtime
    // model/client.test.ts) hold both paths to one behaviour, and every suite that runs workers as processes
    // (CLI, dev stack, crash and telemetry suites) runs them with the default thread. `env` can ask for one.
    ENGRAM_MODEL_THREADS: '0',
    ...opts.env,
  });
}

export async function startTestWorkerService(opts: TestServiceOptions): Promise<WorkerService> {
  const service = await startWorkerService({
    config: testWorkersConfig(opts),
    logger: createLogger('silent'),
    handlers: createHandlers,
    http: false,
  });
  opts.closer?.defer(() => service.stop('test'));
  return service;
}
