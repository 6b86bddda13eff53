import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, describe, expect, it } from 'vitest';
import type { QueueBackendConfig } from './backend-config.js';
import { startEmbeddedPostgres } from './embedded-postgres.js';
import { createQueueEngine, prepareBackend } from './engine.js';
import { startLocalRedis } from './local-redis.js';
import { JobProducer } from './producer.js';
import { createJobWorker } from './worker.js';

// The engine goes away mid-batch and comes back: workers must reconnect on their own and every job must
// complete (at least once). Each backend gets a private, restartable server so the shared one is not disturbed.

const closer = new Closer();
afterEach(() => closer.closeAll());

interface RestartableServer {
  config: QueueBackendConfig;
  stop(): Promise<void>;
  start(): Promise<void>;
}

async function privateServer(kind: QueueBackendConfig['kind']): Promise<RestartableServer> {
  const dir = mkdtempSync(join(tmpdir(), `engram-outage-${kind}-`));
  closer.defer(async () => rmSync(dir, { recursive: true, force: true }));
  if (kind === 'redis') {
    const redis = await startLocalRedis({ dir, persist: true });
    closer.defer(() => redis.stop());
    return {
      config: { kind, url: redis.url, implicit: false },
      stop: () => redis.stop(),
      start: () => redis.start(),
    };
  }
  let server = await startEmbeddedPostgres({ dataDir: dir });
  const port = server.port;
  closer.defer(() => server.stop());
  return {
    config: { kind, url: server.url, implicit: false },
    stop: () => server.stop(),
    start: async () => {
      server = await startEmbeddedPostgres({ dataDir: dir, port });
    },
  };
}

const waitFor = async (check: () => boolean, what: string, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
};

const payload = (i: number) => ({
  sessionId: `s${i}`,
  projectDir: '-repo',
  transcriptDir: '-repo',
  leafUuid: `leaf-${i}`,
  leafSeq: i,
  requestedAt: new Date().toISOString(),
});

describe.each(['redis', 'postgres'] as const)('%s engine outage', (kind) => {
  it('workers reconnect after the engine restarts mid-batch and every job completes', async () => {
    const server = await privateServer(kind);
    const namespace = uniquePrefix('outage');
    await prepareBackend(server.config, namespace);
    const producerEngine = closer.add(
      createQueueEngine({ config: server.config, profile: 'producer', namespace }),
    );
    const workerEngine = closer.add(
      createQueueEngine({ config: server.config, profile: 'worker', namespace }),
    );
    const completed = new Set<string>();
    closer.add(
      createJobWorker(
        workerEngine,
        'extract',
        async (payload) => {
          await new Promise((r) => setTimeout(r, 40));
          return {
            outcome: 'extracted',
            sessionId: payload.sessionId,
            fromSeq: 0,
            toSeq: payload.leafSeq,
            memories: [],
            turns: 1,
            usage: { inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 },
            deniedToolCalls: 0,
          };
        },
        {
          // A job whose completion was lost in the outage is found stalled and run again, quickly.
          config: { concurrency: 2, lockDurationMs: 1_000, stalledIntervalMs: 500, maxStalledCount: 5 },
          onCompleted: ({ job }) => completed.add(String(job.id)),
          onError: () => {},
        },
      ),
    );
    const producer = closer.add(new JobProducer(producerEngine));
    const ids: string[] = [];
    for (let i = 1; i <= 8; i++) {
      const receipt = await producer.enqueue('extract', payload(i));
      ids.push(receipt.jobId);
    }
    await waitFor(() => completed.size >= 2, 'the first completions', 10_000);
    await server.stop();
    await new Promise((r) => setTimeout(r, 300));
    await server.start();
    // Judge by the jobs' stored state, not by 'completed' events: a completion whose reply was lost in the
    // outage is done in the engine although this worker never heard back.
    const queue = producer.queue('extract');
    const states = async () => Promise.all(ids.map((id) => queue.getJobState(id).catch(() => 'unknown')));
    const deadline = Date.now() + 25_000;
    let finalStates = await states();
    while (finalStates.some((state) => state !== 'completed') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      finalStates = await states();
    }
    expect(finalStates).toEqual(ids.map(() => 'completed'));
    // The producer recovers too: once its connection is back, enqueueing works again.
    let enqueued = false;
    for (let i = 0; i < 40 && !enqueued; i++) {
      enqueued = await producer.enqueue('extract', payload(99)).then(
        () => true,
        async () => {
          await new Promise((r) => setTimeout(r, 250));
          return false;
        },
      );
    }
    expect(enqueued).toBe(true);
  }, 40_000);
});
