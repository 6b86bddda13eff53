import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JOB_KINDS } from '@engram/queue/catalog';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { loadWorkersConfig } from '@engram/worker-service/config';
import { createHandlers } from '@engram/worker-service/handlers';
import { createLogger } from '@engram/worker-service/logger';
import { startWorkerService } from '@engram/worker-service/service';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadAgentConfig } from '../config.js';
import { doctorCommand } from './doctor.js';

// `engram doctor` against workers started without a model (real Redis, every queue consumed): the queues have
// workers, yet doctor fails on the workers' model with "no model configured". Positive control: workers with a
// model, same checks, no such line.

const closer = new Closer();
let server: ModelServer;
beforeAll(async () => {
  server = await startModelServer();
});
afterAll(async () => {
  await closer.closeAll();
  await server?.close();
});

async function doctorWith(model: string | undefined) {
  const engramHome = mkdtempSync(join(tmpdir(), 'engram-doctor-model-'));
  const namespace = uniquePrefix('doctormodel');
  const service = await startWorkerService({
    config: loadWorkersConfig({
      REDIS_URL: inject('redisUrl'),
      ENGRAM_HOME: engramHome,
      ENGRAM_NAMESPACE: namespace,
      ENGRAM_QUEUES: JOB_KINDS.join(','),
      ENGRAM_WORKERS_PORT: '0',
      LOG_LEVEL: 'silent',
      ...(model ? { ANTHROPIC_API_KEY: 'test', ANTHROPIC_BASE_URL: model } : {}),
    }),
    logger: createLogger('silent'),
    handlers: createHandlers,
    http: false,
  });
  closer.defer(() => service.stop('test'));
  const json: string[] = [];
  await doctorCommand(
    loadAgentConfig({
      HOME: engramHome,
      ENGRAM_HOME: engramHome,
      ENGRAM_NAMESPACE: namespace,
      REDIS_URL: inject('redisUrl'),
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: server.url,
    }),
    { json: true },
    { out: (t) => json.push(t), err: () => {} },
  );
  return JSON.parse(json.join('')) as { checks: Array<{ ok: boolean; name: string; detail: string }> };
}

describe('engram doctor: the workers’ model', () => {
  it('fails with "no model configured" when the workers have none, and not when they have one', async () => {
    const keyless = await doctorWith(undefined);
    expect(
      keyless.checks.filter((c) => c.name.startsWith('workers: ') && c.name !== 'workers: model'),
    ).toSatisfy(
      (checks: Array<{ ok: boolean }>) => checks.length === JOB_KINDS.length && checks.every((c) => c.ok),
    );
    const model = keyless.checks.find((c) => c.name === 'workers: model');
    expect(model?.ok).toBe(false);
    expect(model?.detail).toContain('no model configured');

    const configured = await doctorWith(server.url);
    expect(configured.checks.find((c) => c.name === 'workers: model')).toBeUndefined();
  }, 60_000);
});
