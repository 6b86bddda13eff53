// Recall latency as the foreground sees it: enqueue a recall job → its result is available (the completion
// event with the return value arrives), with a 0 ms model (the testkit server answering at once), against a
// raw BullMQ round trip on the same Redis in the same run: add a no-op job to a plain queue, await its
// completion event. Both sides wait the same way (one QueueEvents listener per queue, keyed by job id) and
// alternate, so machine noise hits both alike. The recall side runs the production recall handler (scan of
// 40 memories, selector side query over HTTP with the SDK, reads of the 3 picks), with its log lines captured
// for a per-phase breakdown. A third series, printed for context, is the floor any HTTP-model recall has:
// the same no-op job whose processor makes one plain `fetch` POST of the selector's exact request body to the
// same model server (no scan, no SDK, no reads).
// Run: npm run bench:recall -w @engram/bench

import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatMemoryManifest, scanMemoryDir } from '@engram/memory-core/memdir/scan';
import { engramPathsFromDirNames } from '@engram/memory-core/paths/memory-paths';
import {
  buildSelectionUserMessage,
  MEMORY_SELECTION_SYSTEM_PROMPT,
  SELECTION_OUTPUT_JSON_SCHEMA,
  SELECTOR_MAX_TOKENS,
} from '@engram/memory-core/recall/selection-prompt';
import { createQueueEngine } from '@engram/queue/engine';
import type { RecallPayload, RecallResult } from '@engram/queue/jobs/recall';
import { startLocalRedis } from '@engram/queue/local-redis';
import { JobProducer, jobOptionsFor } from '@engram/queue/producer';
import { recallQueueConfig } from '@engram/queue/queues/recall.config';
import { startModelServer } from '@engram/testkit/model-server';
import { jsonReply } from '@engram/testkit/replies';
import { loadWorkersConfig } from '@engram/worker-service/config';
import { createRecallHandler, createRecallModelClient } from '@engram/worker-service/jobs/recall';
import { createLogger } from '@engram/worker-service/logger';
import { startWorkerService } from '@engram/worker-service/service';
import type { QueueEvents } from 'bullmq';
import { pino } from 'pino';
import { percentile } from './lib/stats.js';

const RUNS = 200;
const WARMUP = 20;
const MEMORIES = 40;
const PROJECT = '-bench-repo';
const PICKS = ['feedback_5.md', 'project_6.md', 'reference_11.md'];
const TARGET_P50_RATIO = 2;
const QUERY = 'what did the team decide about topic 7 and the deploy habits';
const RECENT_TOOLS = ['Bash', 'Read'];

/** Resolves with a job's parsed return value when its completion event arrives (even if it came first). */
function completionWaiter(events: QueueEvents) {
  const arrived = new Map<string, unknown>();
  const waiting = new Map<string, { resolve(v: unknown): void; reject(e: Error): void }>();
  events.on('completed', ({ jobId, returnvalue }) => {
    const value = typeof returnvalue === 'string' ? JSON.parse(returnvalue) : returnvalue;
    const w = waiting.get(jobId);
    if (w) {
      waiting.delete(jobId);
      w.resolve(value);
    } else arrived.set(jobId, value);
  });
  events.on('failed', ({ jobId, failedReason }) => {
    const w = waiting.get(jobId);
    waiting.delete(jobId);
    w?.reject(new Error(`bench: job ${jobId} failed: ${failedReason}`));
  });
  return (jobId: string): Promise<unknown> => {
    if (arrived.has(jobId)) {
      const value = arrived.get(jobId);
      arrived.delete(jobId);
      return Promise.resolve(value);
    }
    return new Promise((resolve, reject) => {
      waiting.set(jobId, { resolve, reject });
    });
  };
}

// One subject per memory: names and descriptions that differed only in a number ("user memory 0", "user
// memory 4") are near-duplicates to recall's supersession rule, which hid all but the newest of each type.
const SUBJECTS = (
  'kafka redis postgres docker terraform grafana sentry webpack vite eslint prettier jest vitest playwright ' +
  'storybook tailwind graphql openapi oauth stripe adyen cloudinary opensearch airflow spark snowflake ' +
  'bigquery looker kotlin swiftui firebase testflight fastlane gradle cocoapods pnpm turborepo biome ' +
  'pagerduty linear'
).split(' ');

function seedMemories(memoryDir: string): void {
  mkdirSync(memoryDir, { recursive: true });
  const types = ['user', 'feedback', 'project', 'reference'] as const;
  const now = Date.now();
  for (let i = 0; i < MEMORIES; i++) {
    const type = types[i % 4]!;
    const body = `${`Fact ${i}: a realistic line of memory content about the project and its habits.\n`.repeat(20)}`;
    const file = join(memoryDir, `${type}_${i}.md`);
    writeFileSync(
      file,
      `---\nname: ${type} ${SUBJECTS[i]}\ndescription: What the team decided about ${SUBJECTS[i]} (topic ${i}) and why it matters\ntype: ${type}\n---\n${body}`,
    );
    const t = (now - i * 3_600_000) / 1000;
    utimesSync(file, t, t);
  }
  writeFileSync(join(memoryDir, 'MEMORY.md'), '# Memory\n');
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'engram-bench-recall-'));
  const redis = await startLocalRedis({ dir: join(dir, 'redis'), persist: false });
  const server = await startModelServer();
  // The 0 ms model: every selector request is answered at once with the same three picks.
  server.route(
    'selector',
    () => true,
    () => jsonReply({ selected_memories: PICKS }),
  );
  const engramHome = join(dir, 'home');
  const { memoryDir } = engramPathsFromDirNames({
    engramHome,
    projectDirName: PROJECT,
    transcriptDirName: PROJECT,
  });
  seedMemories(memoryDir);
  const namespace = `bench-recall-${Date.now().toString(36)}`;
  const config = loadWorkersConfig({
    REDIS_URL: redis.url,
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: namespace,
    ENGRAM_QUEUES: 'recall',
    ANTHROPIC_API_KEY: 'bench',
    ANTHROPIC_BASE_URL: server.url,
    LOG_LEVEL: 'silent',
  });
  // The handler as handlers.ts composes it, with its 'recall done' lines collected for the phase breakdown.
  const phases: Array<{ scan: number; select: number; read: number }> = [];
  const phaseLogger = pino(
    { level: 'info' },
    {
      write(line: string) {
        const entry = JSON.parse(line) as { phasesMs?: { scan: number; select: number; read: number } };
        if (entry.phasesMs) phases.push(entry.phasesMs);
      },
    },
  );
  const service = await startWorkerService({
    config,
    logger: createLogger('silent'),
    handlers: (deps) => ({
      recall: createRecallHandler({
        ...deps,
        logger: phaseLogger,
        client: createRecallModelClient(deps.config),
      }),
    }),
    http: false,
  });
  const producerEngine = createQueueEngine({ config: config.backend, profile: 'producer', namespace });
  const producer = new JobProducer(producerEngine);

  // The baseline: a plain queue with the recall queue's job options and concurrency, a no-op processor.
  const noopQueue = producerEngine.createQueue('bench-noop', {
    defaultJobOptions: jobOptionsFor(recallQueueConfig),
  });
  const noopWorker = service.engine.createWorker('bench-noop', async () => ({ ok: true }), {
    concurrency: recallQueueConfig.concurrency,
  });
  // The floor: the same no-op job, plus one plain HTTP POST to the model server from the processor.
  const floorQueue = producerEngine.createQueue('bench-floor', {
    defaultJobOptions: jobOptionsFor(recallQueueConfig),
  });
  // The same request body the selector sends (prompt, manifest, structured output), minus the SDK.
  const { headers } = await scanMemoryDir(memoryDir);
  const floorBody = JSON.stringify({
    model: config.smallModel,
    max_tokens: SELECTOR_MAX_TOKENS,
    system: [{ type: 'text', text: MEMORY_SELECTION_SYSTEM_PROMPT }],
    messages: [
      {
        role: 'user',
        content: buildSelectionUserMessage({
          query: QUERY,
          manifest: formatMemoryManifest(headers),
          recentTools: RECENT_TOOLS,
        }),
      },
    ],
    output_config: { format: { type: 'json_schema', schema: SELECTION_OUTPUT_JSON_SCHEMA } },
  });
  const floorWorker = service.engine.createWorker(
    'bench-floor',
    async () => {
      const response = await fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': 'bench',
          'anthropic-version': '2023-06-01',
        },
        body: floorBody,
      });
      return { status: response.status, body: await response.json() };
    },
    { concurrency: recallQueueConfig.concurrency },
  );
  const recallEvents = producerEngine.createQueueEvents('memory-recall');
  const noopEvents = producerEngine.createQueueEvents('bench-noop');
  const floorEvents = producerEngine.createQueueEvents('bench-floor');
  await Promise.all(
    [recallEvents, noopEvents, floorEvents, noopWorker, floorWorker].map((x) => x.waitUntilReady()),
  );
  const recallDone = completionWaiter(recallEvents);
  const noopDone = completionWaiter(noopEvents);
  const floorDone = completionWaiter(floorEvents);

  const raw: number[] = [];
  const floor: number[] = [];
  const recall: number[] = [];
  const inWorker: number[] = [];
  try {
    for (let i = 0; i < WARMUP + RUNS; i++) {
      let t0 = performance.now();
      const noop = await noopQueue.add('noop', { i });
      await noopDone(noop.id!);
      const rawMs = performance.now() - t0;

      t0 = performance.now();
      const floorJob = await floorQueue.add('floor', { i });
      const floorResult = (await floorDone(floorJob.id!)) as { status: number };
      const floorMs = performance.now() - t0;
      if (floorResult.status !== 200) throw new Error(`bench: floor call answered ${floorResult.status}`);

      const payload: RecallPayload = {
        projectDir: PROJECT,
        transcriptDir: PROJECT,
        sessionId: 'bench-session',
        query: QUERY,
        alreadySurfaced: [],
        alreadyRead: [],
        recentTools: RECENT_TOOLS,
        requestedAt: new Date().toISOString(),
      };
      t0 = performance.now();
      const receipt = await producer.enqueue('recall', payload);
      const result = (await recallDone(receipt.jobId)) as RecallResult;
      const recallMs = performance.now() - t0;
      if (result.outcome !== 'model' || result.attachments.length !== PICKS.length) {
        throw new Error(`bench: unexpected recall result ${JSON.stringify(result).slice(0, 300)}`);
      }
      if (i >= WARMUP) {
        raw.push(rawMs);
        floor.push(floorMs);
        recall.push(recallMs);
        inWorker.push(result.latencyMs);
      }
    }
  } finally {
    await Promise.allSettled(
      [noopWorker, floorWorker, recallEvents, noopEvents, floorEvents].map((x) => x.close()),
    );
    await Promise.allSettled([noopQueue.close(), floorQueue.close(), producer.close()]);
    await service.stop('bench done');
    await producerEngine.close();
    await server.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }

  const p50 = percentile(recall, 50) / percentile(raw, 50);
  const p99 = percentile(recall, 99) / percentile(raw, 99);
  const measured = phases.slice(-RUNS);
  const phase = (k: 'scan' | 'select' | 'read') =>
    percentile(
      measured.map((p) => p[k]),
      50,
    ).toFixed(2);
  console.log(
    `bench/recall — ${RUNS} sequential rounds (raw, floor, recall) after ${WARMUP} warm-up, ${MEMORIES} memories, ${PICKS.length} picks, ` +
      `0 ms model; ${new Date().toISOString().slice(0, 10)}, nproc ${cpus().length}, ${cpus()[0]?.model.trim()}, ` +
      `Node ${process.versions.node}`,
  );
  console.log(
    `raw BullMQ round trip:   p50 ${percentile(raw, 50).toFixed(2)} ms, p99 ${percentile(raw, 99).toFixed(2)} ms`,
  );
  console.log(
    `recall enqueue→result:   p50 ${percentile(recall, 50).toFixed(2)} ms, p99 ${percentile(recall, 99).toFixed(2)} ms ` +
      `(inside the worker: p50 ${percentile(inWorker, 50).toFixed(2)} ms, p99 ${percentile(inWorker, 99).toFixed(2)} ms)`,
  );
  console.log(
    `  worker phases (p50): scan ${phase('scan')} ms, selector side query ${phase('select')} ms, ` +
      `reads ${phase('read')} ms`,
  );
  console.log(
    `floor (no-op job + one plain POST of the selector body): p50 ${percentile(floor, 50).toFixed(2)} ms, ` +
      `p99 ${percentile(floor, 99).toFixed(2)} ms`,
  );
  console.log(
    `ratio to the raw round trip: p50 ${p50.toFixed(2)}× (target ≤${TARGET_P50_RATIO}×) ` +
      `${p50 <= TARGET_P50_RATIO ? 'PASS' : 'MISS'}, p99 ${p99.toFixed(2)}×; ` +
      `floor/raw p50 ${(percentile(floor, 50) / percentile(raw, 50)).toFixed(2)}×, ` +
      `recall/floor p50 ${(percentile(recall, 50) / percentile(floor, 50)).toFixed(2)}×`,
  );
}

await main();
