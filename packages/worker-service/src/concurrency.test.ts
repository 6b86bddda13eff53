import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobProducer } from '@engram/queue/producer';
import { extractQueueConfig } from '@engram/queue/queues/extract.config';
import { Closer } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { textReply } from '@engram/testkit/replies';
import { waitUntil } from '@engram/testkit/wait';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createForeground, isExtractionRequest } from './testing/foreground.test-helpers.js';
import { startTestWorkerService } from './testing/service.test-helpers.js';

// Memory jobs are LLM-bound: one worker process must keep ≥100 forks waiting on the model at once, with lock
// renewals on time (no job is taken for stalled while its worker is alive and waiting).

const SESSIONS = 120;
const MODEL_LATENCY_MS = 5_000;

let model: ModelServer;
const closer = new Closer();
beforeAll(async () => {
  model = await startModelServer();
});
afterAll(async () => {
  await closer.closeAll();
  await model.close();
});

describe('worker concurrency for LLM-bound jobs', () => {
  it('holds 100+ concurrent extraction forks in one process with no false stalls', {
    timeout: 120_000,
  }, async () => {
    expect(extractQueueConfig.concurrency).toBeGreaterThanOrEqual(100);
    const engramHome = mkdtempSync(join(tmpdir(), 'engram-concurrency-'));
    model.respond((r) =>
      isExtractionRequest(r.body)
        ? textReply('Nothing to save.', { latencyMs: MODEL_LATENCY_MS })
        : textReply('ok'),
    );
    const sessions = [];
    for (let i = 0; i < SESSIONS; i++) {
      const s = createForeground(model, { engramHome });
      sessions.push({ s, leaf: await s.turn(`turn ${i}`) });
    }
    // A lock period shorter than one model call: every job survives only if its lock is renewed on time.
    const service = await startTestWorkerService({
      modelUrl: model.url,
      engramHome,
      queues: 'extract',
      closer,
      env: { ENGRAM_LOCK_DURATION_MS: '3000', ENGRAM_STALLED_INTERVAL_MS: '1500' },
    });
    const events = closer.add(service.engine.createQueueEvents('memory-extract'));
    await events.waitUntilReady();
    const stalled: string[] = [];
    events.on('stalled', ({ jobId }) => stalled.push(jobId));
    let completed = 0;
    const allDone = new Promise<void>((resolve) => {
      events.on('completed', () => {
        if (++completed === SESSIONS) resolve();
      });
    });
    const producer = new JobProducer(service.engine);
    closer.defer(() => producer.close());
    model.reset();
    model.respond((r) =>
      isExtractionRequest(r.body)
        ? textReply('Nothing to save.', { latencyMs: MODEL_LATENCY_MS })
        : textReply('ok'),
    );
    await Promise.all(sessions.map(({ s, leaf }) => producer.enqueue('extract', s.extractPayload(leaf))));
    await allDone;

    const forks = model.messageRequests().filter((r) => isExtractionRequest(r.body));
    expect(forks).toHaveLength(SESSIONS);
    // Peak overlap of model calls: requests that arrived within one model latency of each other were in
    // flight together.
    const arrivals = forks.map((r) => r.receivedAt).sort((a, b) => a - b);
    let peak = 0;
    for (let i = 0, j = 0; i < arrivals.length; i++) {
      while (arrivals[i]! - arrivals[j]! >= MODEL_LATENCY_MS) j++;
      peak = Math.max(peak, i - j + 1);
    }
    expect(peak).toBeGreaterThanOrEqual(100);
    expect(stalled).toEqual([]);
    // The queue's completion event can reach the test before the worker's own counter moves.
    const completedLine = `engram_jobs_total{queue="extract",outcome="completed"} ${SESSIONS}`;
    await waitUntil(
      async () => (await service.metrics.registry.metrics()).includes(completedLine),
      'every extraction counted as completed',
    );
    const metrics = await service.metrics.registry.metrics();
    expect(metrics).not.toMatch(/engram_job_lock_lost_total\{[^}]*\} [1-9]/);
  });
});
