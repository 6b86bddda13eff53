// Extract throughput through the queue against the same handler called in-process, with a 0 ms model (the
// testkit model server, in this process, answering at once). Every job does a full fork round trip: cursor and
// newest-request reads, transcript read + chain, project-writer lease, memory scan (10 memories), cache-safe
// params, one fork request answered "Nothing to save.", cursor advance, receipt, lease release.
//   in-process — the extract handler `createHandlers` composes, called directly for N sessions by 4 parallel
//                lanes (the worker's concurrency), with a fake HandlerContext (the default `auto`: a lone job
//                of its project runs serial);
//   staged     — the same with ENGRAM_EXTRACT_STAGED=1: every job forks on a staging copy (copy made and
//                removed per job), so staged / in-process is the copy's cost to a lone session;
//   queue      — `startWorkerService` (ENGRAM_QUEUES=extract, concurrency 4, the production composition) and a
//                separate producer engine: enqueue the N payloads one after another through `JobProducer`, as
//                agents would, until the worker's `completed` events say all N are done;
//   pre-queued — the same with the queue paused while enqueueing: time from `resume` to the last completion
//                (the drain rate alone, without the enqueue overlapping it);
//   no-op      — for context, the queue's own cost: N jobs with the same job options on a plain queue whose
//                worker (same engine, same concurrency) returns at once, pre-queued like the previous phase.
// Each session has its own project (so the per-project writer lease does not serialise them) and a real
// transcript written by the runtime's query loop (createForeground). Between phases the sessions' cursors (the
// engine's and the one beside the transcript), newest-request records and receipts are deleted, so every phase
// does the same work. Phases alternate their order across reps; jobs/s per phase and the median of the per-rep
// ratios are printed.
// Run: npm run bench:extract -w @engram/bench

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { EXTRACTED_FILENAME } from '@engram/memory-core/extraction/session-record';
import { createQueueEngine } from '@engram/queue/engine';
import type { ExtractPayload, ExtractResult } from '@engram/queue/jobs/extract';
import { startLocalRedis } from '@engram/queue/local-redis';
import { JobProducer, jobOptionsFor } from '@engram/queue/producer';
import { extractQueueConfig } from '@engram/queue/queues/extract.config';
import type { HandlerContext } from '@engram/queue/worker';
import { startModelServer } from '@engram/testkit/model-server';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { loadWorkersConfig } from '@engram/worker-service/config';
import { createHandlers } from '@engram/worker-service/handlers';
import { createLogger } from '@engram/worker-service/logger';
import { createWorkerMetrics } from '@engram/worker-service/metrics';
import { startWorkerService } from '@engram/worker-service/service';
import {
  createForeground,
  type ForegroundSession,
  lastUserText,
} from '@engram/worker-service/testing/foreground.test-helpers';
import type { Job } from 'bullmq';
import { median } from './lib/stats.js';

const SESSIONS = 200;
const TURNS = 6;
const MEMORIES = 10;
const REPS = 7;
const CONCURRENCY = extractQueueConfig.concurrency;
const TARGET = 0.8;
const EXTRACTION_MARK = 'You are now the memory extraction subagent';

type Phase = 'in-process' | 'staged' | 'queue' | 'pre-queued' | 'no-op';

function seedMemories(memoryDir: string): void {
  mkdirSync(memoryDir, { recursive: true });
  const types = ['user', 'feedback', 'project', 'reference'] as const;
  const index: string[] = [];
  for (let i = 0; i < MEMORIES; i++) {
    const type = types[i % 4]!;
    const file = `${type}_${i}.md`;
    writeFileSync(
      join(memoryDir, file),
      `---\nname: ${type} memory ${i}\ndescription: What the team decided about topic ${i}\ntype: ${type}\n---\n` +
        'A realistic line of memory content about the project and its habits.\n'.repeat(15),
    );
    index.push(`- [${type} memory ${i}](${file}) — what the team decided about topic ${i}`);
  }
  writeFileSync(join(memoryDir, 'MEMORY.md'), `${index.join('\n')}\n`);
}

/** Runs `fn` over `items` with `lanes` workers pulling from a shared index. */
async function pool<T>(items: readonly T[], lanes: number, fn: (item: T, i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < items.length) {
        const i = next++;
        await fn(items[i]!, i);
      }
    }),
  );
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'engram-bench-extract-'));
  const redis = await startLocalRedis({ dir: join(dir, 'redis'), persist: false });
  const server = await startModelServer();
  let forkRequests = 0;
  const forkCount = (): number => forkRequests;
  // Registered first, matched cheaply: the fork's first request ends with the extraction instruction.
  server.route(
    'extract',
    (r) => lastUserText(r.body).includes(EXTRACTION_MARK),
    () => {
      forkRequests++;
      return textReply('Nothing to save.');
    },
  );
  // The parent: reads the README when asked (a real tool round trip in the transcript), else a longer answer.
  server.route(
    'parent',
    () => true,
    (r) => {
      const last = r.body.messages.at(-1);
      const readme = /Read (\S+README\.md)/.exec(lastUserText(r.body));
      if (readme && typeof last?.content === 'string') {
        return reply(text('Reading it.'), toolUse('Read', { file_path: readme[1]! }));
      }
      return textReply(`Done. ${'The change touches the queue config and the worker tests; '.repeat(8)}`);
    },
  );

  const engramHome = join(dir, 'home');
  const sessions: ForegroundSession[] = [];
  const leaves: Array<{ leafUuid: string; leafSeq: number }> = [];
  const prepStart = performance.now();
  await pool(
    Array.from({ length: SESSIONS }, (_, i) => i),
    CONCURRENCY,
    async (i) => {
      const fg = createForeground(server, { engramHome, sessionId: `bench${i}` });
      writeFileSync(
        join(fg.cwd, 'README.md'),
        `# Project ${i}\n\n${'Build with npm run build.\n'.repeat(20)}`,
      );
      seedMemories(fg.paths.memoryDir);
      let leaf!: { leafUuid: string; leafSeq: number };
      for (let t = 0; t < TURNS; t++) {
        const prompt =
          t === 1
            ? `Read ${join(fg.cwd, 'README.md')} and tell me how to build.`
            : `Turn ${t}: ${'please adjust the worker concurrency and explain the trade-off; '.repeat(4)}`;
        leaf = await fg.turn(prompt);
      }
      sessions[i] = fg;
      leaves[i] = { leafUuid: leaf.leafUuid, leafSeq: leaf.leafSeq };
    },
  );
  const prepSeconds = (performance.now() - prepStart) / 1000;
  if (forkCount() !== 0) throw new Error('bench: a parent turn was routed as an extraction');
  const payloads: ExtractPayload[] = sessions.map((fg, i) => fg.extractPayload(leaves[i]!));

  const namespace = `bench-extract-${Date.now().toString(36)}`;
  const config = loadWorkersConfig({
    REDIS_URL: redis.url,
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: namespace,
    ENGRAM_QUEUES: 'extract',
    ENGRAM_CONCURRENCY_EXTRACT: String(CONCURRENCY),
    ANTHROPIC_API_KEY: 'bench',
    ANTHROPIC_BASE_URL: server.url,
    LOG_LEVEL: 'silent',
  });
  const service = await startWorkerService({
    config,
    logger: createLogger('silent'),
    handlers: createHandlers,
    http: false,
  });
  const worker = service.workers.get('extract')!;
  // The in-process side: the same composition (createHandlers) with its own metrics, on the same state store.
  const inProcess = createHandlers({
    config,
    engine: service.engine,
    metrics: createWorkerMetrics(),
    logger: createLogger('silent'),
  }).extract!;
  const inProcessStaged = createHandlers({
    config: { ...config, extractStaged: 'always' },
    engine: service.engine,
    metrics: createWorkerMetrics(),
    logger: createLogger('silent'),
  }).extract!;
  const producerEngine = createQueueEngine({ config: config.backend, profile: 'producer', namespace });
  const producer = new JobProducer(producerEngine);
  const queue = producer.queue('extract');
  const noopQueue = producerEngine.createQueue('bench-noop', {
    defaultJobOptions: jobOptionsFor(extractQueueConfig),
  });
  let noopCompleted = 0;
  let onNoopDone: (() => void) | undefined;
  const noopWorker = service.engine.createWorker('bench-noop', async () => ({ ok: true }), {
    concurrency: CONCURRENCY,
    lockDuration: extractQueueConfig.lockDurationMs,
  });
  noopWorker.on('completed', () => {
    if (++noopCompleted === SESSIONS) onNoopDone?.();
  });
  await Promise.all([
    queue.waitUntilReady(),
    noopQueue.waitUntilReady(),
    worker.waitUntilReady(),
    noopWorker.waitUntilReady(),
    producerEngine.state.ready(),
  ]);

  let completed = 0;
  let onAllDone: (() => void) | undefined;
  const failures: string[] = [];
  worker.on('completed', (_job, result: ExtractResult) => {
    if (result.outcome !== 'extracted' || result.turns !== 1) {
      failures.push(`unexpected result ${JSON.stringify(result).slice(0, 200)}`);
    }
    if (++completed === SESSIONS) onAllDone?.();
  });
  worker.on('failed', (job, error) => {
    failures.push(`job ${job?.id} failed: ${error.message}`);
    onAllDone?.();
  });

  const resetSessions = async () => {
    // The cursor beside the transcript too (the handler takes the further of it and the engine's).
    for (const fg of sessions)
      rmSync(join(fg.paths.sessionDir(fg.sessionId), EXTRACTED_FILENAME), { force: true });
    for (const p of payloads) {
      const scope = `session:${p.transcriptDir}:${p.sessionId}`;
      await Promise.all(
        ['extract-cursor', 'extract-requested', 'extract-receipts'].map((k) =>
          service.engine.state.delete(`${scope}:${k}`),
        ),
      );
    }
    server.requests.length = 0;
    forkRequests = 0;
    completed = 0;
    noopCompleted = 0;
  };
  const untilAllDone = () =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('bench: timed out waiting for the batch')), 120_000);
      onAllDone = () => {
        clearTimeout(timer);
        if (failures.length) reject(new Error(`bench: ${failures.join(' | ')}`));
        else resolve();
      };
    });

  const enqueueMs: number[] = [];
  const direct = (handler: typeof inProcess, name: string) => async (rep: number) => {
    const start = performance.now();
    await pool(payloads, CONCURRENCY, async (payload, i) => {
      const ctx: HandlerContext = {
        job: { id: `${name}-${rep}-${i}`, timestamp: Date.now() } as unknown as Job,
        signal: new AbortController().signal,
        attempt: 1,
        progress: async () => {},
        defer: async () => {
          throw new Error(`bench: the ${name} handler was deferred (a project lease was busy)`);
        },
      };
      const result = await handler(payload, ctx);
      if (result.outcome !== 'extracted' || result.turns !== 1) {
        throw new Error(`bench: unexpected ${name} result ${JSON.stringify(result).slice(0, 200)}`);
      }
    });
    return performance.now() - start;
  };
  const run: Record<Phase, (rep: number) => Promise<number>> = {
    'in-process': direct(inProcess, 'inproc'),
    staged: direct(inProcessStaged, 'staged'),
    queue: async () => {
      const done = untilAllDone();
      const start = performance.now();
      for (const p of payloads)
        await producer.enqueue('extract', { ...p, requestedAt: new Date().toISOString() });
      enqueueMs.push(performance.now() - start);
      await done;
      return performance.now() - start;
    },
    'pre-queued': async () => {
      await queue.pause();
      for (const p of payloads)
        await producer.enqueue('extract', { ...p, requestedAt: new Date().toISOString() });
      const done = untilAllDone();
      const start = performance.now();
      await queue.resume();
      await done;
      return performance.now() - start;
    },
    'no-op': async () => {
      await noopQueue.pause();
      for (const p of payloads) await noopQueue.add('extract', p);
      const done = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('bench: timed out waiting for no-op jobs')), 60_000);
        onNoopDone = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      const start = performance.now();
      await noopQueue.resume();
      await done;
      return performance.now() - start;
    },
  };
  const phases: Phase[] = ['in-process', 'staged', 'queue', 'pre-queued', 'no-op'];
  const perSec: Record<Phase, number[]> = {
    'in-process': [],
    staged: [],
    queue: [],
    'pre-queued': [],
    'no-op': [],
  };
  // One untimed warm-up round of each phase (JIT, connections, page cache), then REPS rounds whose phase order
  // alternates.
  const schedule: Array<{ rep: number; phase: Phase }> = phases.map((phase) => ({ rep: -1, phase }));
  for (let rep = 0; rep < REPS; rep++) {
    for (const phase of rep % 2 ? [...phases].reverse() : phases) schedule.push({ rep, phase });
  }
  try {
    for (const { rep, phase } of schedule) {
      await resetSessions();
      const elapsed = await run[phase](rep);
      if (phase !== 'no-op' && forkCount() !== SESSIONS) {
        throw new Error(`bench: ${phase} made ${forkCount()} fork requests for ${SESSIONS} jobs`);
      }
      if (rep >= 0) perSec[phase].push(SESSIONS / (elapsed / 1000));
    }
  } finally {
    await noopWorker.close();
    await Promise.allSettled([noopQueue.close(), producer.close()]);
    await producerEngine.close();
    await service.stop('bench done');
    await server.close();
    await redis.stop();
    for (const fg of sessions) rmSync(fg.cwd, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }

  const ratios = (phase: Phase) => perSec[phase].map((v, r) => v / perSec['in-process'][r]!);
  const fmt = (xs: number[], digits = 0) => xs.map((x) => x.toFixed(digits)).join(', ');
  console.log(
    `bench/extract — ${SESSIONS} sessions (own project each, ${TURNS}-turn transcript, ${MEMORIES} memories), ` +
      `concurrency ${CONCURRENCY}, ${REPS} reps after a warm-up round, 0 ms model, local redis-server (no AOF); ` +
      `prep ${prepSeconds.toFixed(1)} s; ${new Date().toISOString().slice(0, 10)}, nproc ${cpus().length}, ` +
      `${cpus()[0]?.model.trim()}, Node ${process.versions.node}`,
  );
  for (const phase of phases) {
    const line = `${phase.padEnd(11)} ${median(perSec[phase]).toFixed(0)} jobs/s (reps: ${fmt(perSec[phase])})`;
    console.log(
      phase === 'in-process' || phase === 'no-op'
        ? line
        : `${line} → ${median(ratios(phase)).toFixed(2)}× of in-process (reps: ${fmt(ratios(phase), 2)})`,
    );
  }
  const perJob = (phase: Phase) => (1000 / median(perSec[phase])).toFixed(2);
  console.log(
    `per job at saturation: in-process ${perJob('in-process')} ms, staged ${perJob('staged')} ms, queue ${perJob('queue')} ms, ` +
      `pre-queued ${perJob('pre-queued')} ms, no-op through the queue ${perJob('no-op')} ms; ` +
      `enqueueing the ${SESSIONS} payloads took ${median(enqueueMs.slice(1)).toFixed(0)} ms of the queue phase (median)`,
  );
  const headline = median(ratios('queue'));
  console.log(
    `queue / in-process: ${headline.toFixed(2)}× (target ≥${TARGET}×) ${headline >= TARGET ? 'PASS' : 'MISS'}`,
  );
}

await main();
