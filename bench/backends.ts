// BullMQ on its PostgreSQL backend (embedded server, the zero-install mode) vs BullMQ on Redis, in the same run:
//   throughput — 1,000 extract jobs with a no-op handler through one worker at concurrency 10 (jobs/s);
//   round trip — one recall job enqueued, awaited through QueueEvents, 200 in sequence (p50/p99 ms).
// Each engine is measured with and without per-commit durability (Redis AOF fsync always vs off; PostgreSQL
// synchronous_commit on vs off). `engram dev` runs PostgreSQL with synchronous_commit on.
// Run: npm run bench:backends -w @engram/bench

import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { QueueBackendConfig } from '@engram/queue/backend-config';
import { startEmbeddedPostgres } from '@engram/queue/embedded-postgres';
import { createQueueEngine, prepareBackend } from '@engram/queue/engine';
import type { ExtractPayload } from '@engram/queue/jobs/extract';
import type { RecallPayload } from '@engram/queue/jobs/recall';
import { startLocalRedis } from '@engram/queue/local-redis';
import { JobProducer } from '@engram/queue/producer';
import { createJobWorker } from '@engram/queue/worker';
import { percentile } from './lib/stats.js';

const JOBS = 1_000;
const CONCURRENCY = 10;
const ROUND_TRIPS = 200;
const WARMUP_ROUND_TRIPS = 20;

interface Engine {
  name: string;
  config: QueueBackendConfig;
  stop(): Promise<void>;
}

interface Result {
  name: string;
  enqueuePerSec: number;
  jobsPerSec: number;
  p50: number;
  p99: number;
  /** Round trips whose completion event never arrived (the job was found completed by polling). */
  missedEvents: number;
}

const cleanups: Array<() => void> = [];

const noUsage = { inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 };

async function waitUntil(check: () => boolean, what: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function measure(engine: Engine): Promise<Result> {
  const namespace = `bench-${Date.now().toString(36)}`;
  await prepareBackend(engine.config, namespace);
  const producerEngine = createQueueEngine({ config: engine.config, profile: 'producer', namespace });
  const workerEngine = createQueueEngine({ config: engine.config, profile: 'worker', namespace });
  const producer = new JobProducer(producerEngine, { timeoutMs: 30_000 });

  // Throughput: enqueue everything first (one session each, so no coalescing), then drain with one worker.
  const now = new Date().toISOString();
  let start = performance.now();
  for (let i = 1; i <= JOBS; i++) {
    const payload: ExtractPayload = {
      sessionId: `s${i}`,
      projectDir: '-bench',
      transcriptDir: '-bench',
      leafUuid: `leaf-${i}`,
      leafSeq: i,
      requestedAt: now,
    };
    await producer.enqueue('extract', payload);
  }
  const enqueueSeconds = (performance.now() - start) / 1000;
  let completed = 0;
  const extractWorker = createJobWorker(
    workerEngine,
    'extract',
    async (p) => ({
      outcome: 'skipped-no-new-messages',
      sessionId: p.sessionId,
      fromSeq: p.leafSeq,
      toSeq: p.leafSeq,
      memories: [],
      turns: 0,
      usage: noUsage,
      deniedToolCalls: 0,
    }),
    { config: { concurrency: CONCURRENCY }, autorun: false, onCompleted: () => completed++ },
  );
  start = performance.now();
  void extractWorker.run();
  await waitUntil(() => completed >= JOBS, 'the extract batch');
  const drainSeconds = (performance.now() - start) / 1000;
  await extractWorker.close();

  // Round trip: what an agent turn sees for recall — enqueue, a worker answers, the result arrives by event.
  const recallWorker = createJobWorker(workerEngine, 'recall', async () => ({
    outcome: 'empty',
    attachments: [],
    latencyMs: 0,
  }));
  const events = producerEngine.createQueueEvents('memory-recall');
  events.on('error', () => {});
  await events.waitUntilReady();
  await recallWorker.waitUntilReady();
  const queue = producer.queue('recall');
  const samples: number[] = [];
  let missedEvents = 0;
  for (let i = 0; i < WARMUP_ROUND_TRIPS + ROUND_TRIPS; i++) {
    const payload: RecallPayload = {
      sessionId: 'bench',
      projectDir: '-bench',
      transcriptDir: '-bench',
      query: 'which database did we pick for the queue and why',
      alreadySurfaced: [],
      alreadyRead: [],
      recentTools: [],
      requestedAt: new Date().toISOString(),
    };
    const t0 = performance.now();
    const receipt = await producer.enqueue('recall', payload);
    const job = await queue.getJob(receipt.jobId);
    // QueueEvents on BullMQ 6.7's PostgreSQL backend can skip an event committed out of id order; after 1 s
    // without the event, poll the job so one lost event costs a second, not the run (counted and printed).
    let settled = false;
    const byEvent = job!.waitUntilFinished(events, 10_000).then(
      () => 'event' as const,
      () => 'timeout' as const,
    );
    const byPoll = (async () => {
      await new Promise((r) => setTimeout(r, 1_000));
      while (!settled) {
        if ((await queue.getJobState(receipt.jobId)) === 'completed') return 'poll' as const;
        await new Promise((r) => setTimeout(r, 20));
      }
      return 'event' as const;
    })();
    const how = await Promise.race([byEvent, byPoll]);
    settled = true;
    if (how !== 'event') missedEvents++;
    if (i >= WARMUP_ROUND_TRIPS) samples.push(performance.now() - t0);
  }
  await Promise.allSettled([recallWorker.close(), events.close(), producer.close()]);
  await Promise.allSettled([producerEngine.close(), workerEngine.close()]);
  return {
    name: engine.name,
    enqueuePerSec: JOBS / enqueueSeconds,
    jobsPerSec: JOBS / drainSeconds,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    missedEvents,
  };
}

async function startEngines(dir: string): Promise<Engine[]> {
  // Each server's directory sits directly in the temp dir: as root, PostgreSQL runs as another user, which
  // must be able to reach it (a 0700 parent owned by root would not let it).
  const pgDir = (label: string) => {
    const d = mkdtempSync(join(tmpdir(), `engram-bench-${label}-`));
    cleanups.push(() => rmSync(d, { recursive: true, force: true }));
    return d;
  };
  const engines: Engine[] = [];
  const redis = await startLocalRedis({ dir: join(dir, 'redis'), persist: false });
  engines.push({
    name: 'redis (no AOF)',
    config: { kind: 'redis', url: redis.url, implicit: false },
    stop: redis.stop,
  });
  const redisAof = await startLocalRedis({ dir: join(dir, 'redis-aof'), persist: true });
  engines.push({
    name: 'redis (AOF fsync always)',
    config: { kind: 'redis', url: redisAof.url, implicit: false },
    stop: redisAof.stop,
  });
  const pgDurable = await startEmbeddedPostgres({ dataDir: pgDir('pg'), durable: true });
  engines.push({
    name: 'postgres (synchronous_commit on)',
    config: { kind: 'postgres', url: pgDurable.url, implicit: false },
    stop: pgDurable.stop,
  });
  const pgFast = await startEmbeddedPostgres({ dataDir: pgDir('pg-fast'), durable: false });
  engines.push({
    name: 'postgres (synchronous_commit off)',
    config: { kind: 'postgres', url: pgFast.url, implicit: false },
    stop: pgFast.stop,
  });
  return engines;
}

function row(cells: string[]): string {
  const widths = [34, 10, 8, 10, 10, 6];
  return cells.map((c, i) => c.padEnd(widths[i] ?? 10)).join(' ');
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'engram-bench-backends-'));
  const engines = await startEngines(dir);
  try {
    const results: Result[] = [];
    for (const engine of engines) {
      console.error(`measuring ${engine.name} …`);
      results.push(await measure(engine));
    }
    console.log(
      `bench/backends — ${JOBS} no-op extract jobs at concurrency ${CONCURRENCY}; ${ROUND_TRIPS} recall round trips ` +
        `(after ${WARMUP_ROUND_TRIPS} warm-up); ${new Date().toISOString().slice(0, 10)}, nproc ${cpus().length}, ` +
        `${cpus()[0]?.model.trim()}, Node ${process.versions.node}`,
    );
    console.log(row(['engine', 'enqueue/s', 'jobs/s', 'rt p50', 'rt p99', 'missed events']));
    for (const r of results) {
      console.log(
        row([
          r.name,
          r.enqueuePerSec.toFixed(0),
          r.jobsPerSec.toFixed(0),
          `${r.p50.toFixed(2)} ms`,
          `${r.p99.toFixed(2)} ms`,
          String(r.missedEvents),
        ]),
      );
    }
    // Ratios against the Redis run with the same durability.
    const pairs: Array<[number, number]> = [
      [2, 1],
      [3, 0],
    ];
    for (const [pg, redis] of pairs) {
      const p = results[pg]!;
      const r = results[redis]!;
      console.log(
        `${p.name} vs ${r.name}: throughput ${(p.jobsPerSec / r.jobsPerSec).toFixed(2)}×, ` +
          `enqueue ${(p.enqueuePerSec / r.enqueuePerSec).toFixed(2)}×, round trip p50 ${(p.p50 / r.p50).toFixed(2)}×, ` +
          `p99 ${(p.p99 / r.p99).toFixed(2)}×`,
      );
    }
  } finally {
    await Promise.allSettled(engines.map((e) => e.stop()));
    rmSync(dir, { recursive: true, force: true });
    for (const cleanup of cleanups) cleanup();
  }
}

await main();
