import { JobProducer } from '@engram/queue/producer';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { textReply } from '@engram/testkit/replies';
import { waitUntil } from '@engram/testkit/wait';
import { describe, expect, inject, it } from 'vitest';
import { loadWorkersConfig } from '../config.js';
import { createHandlers } from '../handlers.js';
import { createLogger } from '../logger.js';
import { startWorkerService } from '../service.js';
import { createForeground, isExtractionRequest } from '../testing/foreground.test-helpers.js';

// Workers with neither ANTHROPIC_API_KEY nor ANTHROPIC_BASE_URL, on a real Redis: a memory job fails on its
// first attempt with "no model configured" (no retries, no request to any host), and the session's transcript
// is left as it was for a later job. The positive control: the same session extracts once a model is set.

const scripted = useModelServer();
const { closer } = scripted;

function workersEnv(engramHome: string, namespace: string, model?: string) {
  return {
    REDIS_URL: inject('redisUrl'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: namespace,
    ENGRAM_QUEUES: 'extract,session-memory',
    ENGRAM_WORKERS_PORT: '0',
    ENGRAM_MODEL_MAX_RETRIES: '0',
    LOG_LEVEL: 'silent',
    ...(model ? { ANTHROPIC_API_KEY: 'test', ANTHROPIC_BASE_URL: model } : {}),
  };
}

async function start(env: Record<string, string | undefined>) {
  const service = await startWorkerService({
    config: loadWorkersConfig(env),
    logger: createLogger('silent'),
    handlers: createHandlers,
    http: false,
  });
  closer.defer(() => service.stop('test'));
  return service;
}

describe('memory jobs without a model', () => {
  it('fail at once with "no model configured", and succeed once a model is set', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('Sure.')]);
    scripted.server.route('fork', (r) => isExtractionRequest(r.body), [textReply('Nothing to save.')]);
    const leaf = await fg.turn('hello there friend');
    const before = scripted.server.messageRequests().length;
    const namespace = uniquePrefix('nomodel');

    const keyless = await start(workersEnv(fg.engramHome, namespace));
    const producer = closer.add(new JobProducer(keyless.engine));
    const receipt = await producer.enqueue('extract', fg.extractPayload(leaf));
    await waitUntil(
      async () => (await producer.queue('extract').getJob(receipt.jobId))?.failedReason !== undefined,
      'failure',
    );
    const job = await producer.queue('extract').getJob(receipt.jobId);
    expect(job?.attemptsMade).toBe(1);
    expect(job?.failedReason).toContain('no model configured');
    expect(await job?.getState()).toBe('failed');
    expect(scripted.server.messageRequests()).toHaveLength(before);
    await keyless.stop('test');

    // Positive control: the same payload, with a model, is extracted.
    const withModel = await start(workersEnv(fg.engramHome, namespace, scripted.server.url));
    const again = await closer.add(new JobProducer(withModel.engine)).enqueue('extract', {
      ...fg.extractPayload(leaf),
    });
    await waitUntil(
      async () => (await producer.queue('extract').getJob(again.jobId))?.finishedOn !== undefined,
      'extraction with a model',
    );
    expect((await producer.queue('extract').getJob(again.jobId))?.failedReason).toBeUndefined();
    expect(scripted.server.messageRequests().length).toBeGreaterThan(before);
  });
});
