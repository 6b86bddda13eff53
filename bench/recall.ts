// Recall latency as the foreground sees it: `awaitRecall` (memory-client's bounded recall wait, what Claude
// Code's UserPromptSubmit hook, the Agent SDK hooks and search_memories use) from the call to the result in the
// caller's hands, with a 0 ms model (the testkit server answering at once), against baselines measured in
// the same run on the same Redis and worker process, each awaited through a QueueEvents completion listener:
//   raw   — a no-op job added to a plain queue with the recall queue's job options and concurrency;
//   floor — the same no-op job whose processor makes one plain `fetch` POST of the selector's exact request
//           body to the same model server: what any recall through an HTTP model costs at least.
//   io    — the floor plus the file work every recall must do on a local disk: the scan of the memory
//           directory (a stat per file, heads cached) before the call and the contained reads of the three
//           picks after it, returned as the job's result (the same ~5 KB a recall returns). Not a target: it
//           shows how much of the 0.5× budget over the floor the required I/O alone takes on this machine.
//   sdk   — io with the model call made through the SDK (the recall handler's own selector function and
//           client), as every model call in Engram is: the required I/O plus the required client. What
//           recall adds over it is Engram's own logic (the producer's checks, the worker's validation, prompt,
//           selection, logging).
// The recall side is the production foreground (MemoryQueue + awaitRecall) and the production recall handler
// (scan of 40 memories, selector side query over HTTP with the SDK, reads of the 3 picks). The series
// alternate, their order rotating every round, so machine noise hits all alike. Every round is split into
// before the handler starts (enqueue + pickup), the handler (recall: scan / selector / reads from its log
// line), and after it returns (completion write + the caller noticing the result).
// Target: recall p50 ≤ floor + 0.5× (1.5× the floor). The last line splits what recall spends over the floor
// into io − floor, sdk − io and recall − sdk (BENCHMARKS.md: the first two alone use the budget here).
// SERIES=sdk,recall runs only the named series (to profile one path); RUNS=n sets the rounds (default 300).
// Run: npm run bench:recall -w @engram/bench

import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryQueue, type SessionRef } from '@engram/memory-client/memory-queue';
import { awaitRecall } from '@engram/memory-client/queued-recall';
import { formatMemoryManifest, scanMemoryDir } from '@engram/memory-core/memdir/scan';
import { engramPathsFor } from '@engram/memory-core/paths/memory-paths';
import { readMemoriesForSurfacing } from '@engram/memory-core/recall/read-for-surfacing';
import type { SelectorRequest } from '@engram/memory-core/recall/select';
import {
  buildSelectionUserMessage,
  MEMORY_SELECTION_SYSTEM_PROMPT,
  SELECTION_OUTPUT_JSON_SCHEMA,
  SELECTOR_MAX_TOKENS,
} from '@engram/memory-core/recall/selection-prompt';
import { createQueueEngine } from '@engram/queue/engine';
import type { RecallPayload } from '@engram/queue/jobs/recall';
import { startLocalRedis } from '@engram/queue/local-redis';
import { jobOptionsFor } from '@engram/queue/producer';
import { recallQueueConfig } from '@engram/queue/queues/recall.config';
import type { HandlerContext } from '@engram/queue/worker';
import { startModelServer } from '@engram/testkit/model-server';
import { jsonReply } from '@engram/testkit/replies';
import { loadWorkersConfig } from '@engram/worker-service/config';
import {
  createRecallHandler,
  createRecallModelClient,
  modelSelector,
} from '@engram/worker-service/jobs/recall';
import { createLogger } from '@engram/worker-service/logger';
import { startWorkerService } from '@engram/worker-service/service';
import type { Job, QueueEvents } from 'bullmq';
import { pino } from 'pino';
import { percentile } from './lib/stats.js';

const RUNS = Number(process.env.RUNS ?? 300);
const WARMUP = 30;
const MEMORIES = 40;
const REPO = '/bench/repo';
const PICKS = ['feedback_5.md', 'project_6.md', 'reference_11.md'];
const TARGET_FLOOR_RATIO = 1.5;
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

// One subject per memory: names and descriptions that differed only in a number ("user memory 0",
// "user memory 4") are near-duplicates to recall's supersession rule, which hid all but the newest of each type.
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

/** When each job's handler started and returned (performance.now(), this process), by queue and job id. */
const handlerTimes = new Map<string, { start: number; end: number }>();
function timed<R>(fn: (job: Job) => Promise<R>) {
  return async (job: Job): Promise<R> => {
    const start = performance.now();
    try {
      return await fn(job);
    } finally {
      handlerTimes.set(`${job.queueName}:${job.id}`, { start, end: performance.now() });
    }
  };
}

interface Round {
  total: number;
  before: number;
  handler: number;
  after: number;
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
  const paths = engramPathsFor({ engramHome, cwd: REPO, projectRoot: REPO });
  seedMemories(paths.memoryDir);
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
  const phases = new Map<string, { scan: number; select: number; read: number }>();
  const phaseLogger = pino(
    { level: 'info' },
    {
      write(line: string) {
        const entry = JSON.parse(line) as {
          jobId?: string;
          phasesMs?: { scan: number; select: number; read: number };
        };
        if (entry.phasesMs && entry.jobId) phases.set(entry.jobId, entry.phasesMs);
      },
    },
  );
  const service = await startWorkerService({
    config,
    logger: createLogger('silent'),
    handlers: (deps) => {
      const recall = createRecallHandler({
        ...deps,
        logger: phaseLogger,
        client: createRecallModelClient(deps.config),
      });
      return {
        recall: (payload: RecallPayload, ctx: HandlerContext) => timed(() => recall(payload, ctx))(ctx.job),
      };
    },
    http: false,
  });
  // The foreground: the agent's MemoryQueue (producer connection profile) and the bounded recall wait.
  const memory = new MemoryQueue({
    engramHome,
    backend: config.backend,
    namespace,
    enqueueTimeoutMs: 2_000,
    cleanupPeriodDays: 30,
  });
  const ref: SessionRef = { sessionId: 'bench-session', paths };
  const producerEngine = createQueueEngine({ config: config.backend, profile: 'producer', namespace });

  // The request the selector sends (prompt, manifest, structured output): as the SDK gets it, and as the body a
  // plain `fetch` posts.
  const { headers } = await scanMemoryDir(paths.memoryDir);
  const selectorRequest: SelectorRequest = {
    system: MEMORY_SELECTION_SYSTEM_PROMPT,
    user: buildSelectionUserMessage({
      query: QUERY,
      manifest: formatMemoryManifest(headers),
      recentTools: RECENT_TOOLS,
    }),
    schema: SELECTION_OUTPUT_JSON_SCHEMA,
    maxTokens: SELECTOR_MAX_TOKENS,
    signal: new AbortController().signal,
  };
  const floorBody = JSON.stringify({
    model: config.smallModel,
    max_tokens: SELECTOR_MAX_TOKENS,
    system: [{ type: 'text', text: MEMORY_SELECTION_SYSTEM_PROMPT }],
    messages: [{ role: 'user', content: selectorRequest.user }],
    output_config: { format: { type: 'json_schema', schema: SELECTION_OUTPUT_JSON_SCHEMA } },
  });
  const plainCall = () =>
    fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': 'bench',
        'anthropic-version': '2023-06-01',
      },
      body: floorBody,
    });
  const split = (t0: number, t4: number, queue: string, jobId: string): Round => {
    const h = handlerTimes.get(`${queue}:${jobId}`);
    if (!h) throw new Error(`bench: no handler timing for job ${queue}:${jobId}`);
    handlerTimes.delete(`${queue}:${jobId}`);
    return { total: t4 - t0, before: h.start - t0, handler: h.end - h.start, after: t4 - h.end };
  };
  // A baseline: a queue with the recall queue's job options, a worker with its concurrency running `processor`,
  // and the completion events its rounds wait on.
  const closables: Array<{ close(): Promise<unknown> }> = [];
  const baseline = async (name: string, processor: () => Promise<unknown>) => {
    const queue = producerEngine.createQueue(`bench-${name}`, {
      defaultJobOptions: jobOptionsFor(recallQueueConfig),
    });
    const worker = service.engine.createWorker(`bench-${name}`, timed(processor), {
      concurrency: recallQueueConfig.concurrency,
    });
    const events = producerEngine.createQueueEvents(`bench-${name}`);
    closables.push(worker, events, queue);
    await Promise.all([queue, worker, events].map((x) => x.waitUntilReady()));
    const done = completionWaiter(events);
    /** One round: the add, then the completion event; `check` throws on a wrong result. */
    return async (check: (result: unknown) => void) => {
      const t0 = performance.now();
      const job = await queue.add(name, {});
      const result = await done(job.id!);
      const t4 = performance.now();
      check(result);
      return { round: split(t0, t4, queue.name, job.id!), jobId: job.id! };
    };
  };
  // io and sdk: the floor's call (a plain fetch, or the SDK through the recall handler's selector function)
  // between the scan and the reads a recall makes, returning what a recall returns.
  const sdkSelector = modelSelector(createRecallModelClient(config), config.smallModel);
  const withIo = (call: () => Promise<unknown>) => async () => {
    const scan = await scanMemoryDir(paths.memoryDir);
    const reply = await call();
    const read = await readMemoriesForSurfacing({ memoryDir: paths.memoryDir, filenames: PICKS });
    return { ok: reply !== undefined, scanned: scan.headers.length, attachments: read.memories };
  };
  const ioCheck = (name: string) => (value: unknown) => {
    const result = value as { ok: boolean; scanned: number; attachments: unknown[] };
    if (!result.ok || result.scanned !== MEMORIES || result.attachments.length !== PICKS.length) {
      throw new Error(`bench: ${name} answered ${JSON.stringify(result).slice(0, 200)}`);
    }
  };
  const rawRound = await baseline('noop', async () => ({ ok: true }));
  const floorRound = await baseline('floor', async () => {
    const response = await plainCall();
    return { status: response.status, body: await response.json() };
  });
  const ioRound = await baseline(
    'io',
    withIo(async () => {
      const response = await plainCall();
      return response.status === 200 ? await response.json() : undefined;
    }),
  );
  const sdkRound = await baseline(
    'sdk',
    withIo(() => sdkSelector(selectorRequest)),
  );

  const series: Record<string, () => Promise<{ round: Round; jobId: string }>> = {
    raw: () => rawRound(() => {}),
    floor: () =>
      floorRound((result) => {
        const { status } = result as { status: number };
        if (status !== 200) throw new Error(`bench: floor call answered ${status}`);
      }),
    io: () => ioRound(ioCheck('io')),
    sdk: () => sdkRound(ioCheck('sdk')),
    recall: async () => {
      const t0 = performance.now();
      const recall = await awaitRecall(memory, ref, { query: QUERY, waitMs: 10_000 });
      const t4 = performance.now();
      if (
        recall.status !== 'answered' ||
        recall.result.outcome !== 'model' ||
        recall.result.attachments.length !== PICKS.length
      ) {
        throw new Error(`bench: unexpected recall ${JSON.stringify(recall).slice(0, 300)}`);
      }
      return { round: split(t0, t4, 'memory-recall', recall.jobId), jobId: recall.jobId };
    },
  };
  const names = process.env.SERIES ? process.env.SERIES.split(',') : Object.keys(series);
  for (const name of names) if (!series[name]) throw new Error(`bench: no series ${name}`);
  const rounds = new Map<string, Round[]>(names.map((n) => [n, []]));
  const recallPhases: Array<{ scan: number; select: number; read: number }> = [];
  const load = [loadavg()[0]!];
  try {
    for (let i = 0; i < WARMUP + RUNS; i++) {
      for (let k = 0; k < names.length; k++) {
        const name = names[(i + k) % names.length]!;
        const { round, jobId } = await series[name]!();
        if (i < WARMUP) continue;
        rounds.get(name)!.push(round);
        if (name === 'recall') {
          const p = phases.get(jobId);
          if (p) recallPhases.push(p);
        }
      }
    }
    load.push(loadavg()[0]!);
  } finally {
    await Promise.allSettled(closables.map((x) => x.close()));
    await memory.close();
    await service.stop('bench done');
    await producerEngine.close();
    await server.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }

  const p = (xs: number[], q: number) => percentile(xs, q);
  const stat = (name: string, part: keyof Round, q = 50) => {
    const xs = rounds.get(name);
    return xs
      ? p(
          xs.map((r) => r[part]),
          q,
        )
      : Number.NaN;
  };
  console.log(
    `bench/recall — ${RUNS} rounds (${names.join(', ')}; order rotating) after ${WARMUP} warm-up, ${MEMORIES} memories, ` +
      `${PICKS.length} picks, 0 ms model, local redis-server; ${new Date().toISOString().slice(0, 10)}, ` +
      `nproc ${cpus().length}, ${cpus()[0]?.model.trim()}, Node ${process.versions.node}, ` +
      `load average ${load.map((l) => l.toFixed(1)).join(' → ')}`,
  );
  console.log('series   total p50 / p99    | p50 parts: before handler · handler · after handler');
  for (const name of names) {
    console.log(
      `${name.padEnd(8)} ${stat(name, 'total').toFixed(2)} / ${stat(name, 'total', 99).toFixed(2)} ms | ` +
        `${stat(name, 'before').toFixed(2)} · ${stat(name, 'handler').toFixed(2)} · ${stat(name, 'after').toFixed(2)} ms`,
    );
  }
  const phase = (k: 'scan' | 'select' | 'read') =>
    p(
      recallPhases.map((x) => x[k]),
      50,
    ).toFixed(2);
  console.log(
    `recall handler phases (p50): scan ${phase('scan')} ms, selector side query ${phase('select')} ms, reads ${phase('read')} ms`,
  );
  const floorRatio = stat('recall', 'total') / stat('floor', 'total');
  console.log(
    `recall/floor p50 ${floorRatio.toFixed(2)}× (target ≤${TARGET_FLOOR_RATIO}×) ${floorRatio <= TARGET_FLOOR_RATIO ? 'PASS' : 'MISS'}; ` +
      `recall/raw p50 ${(stat('recall', 'total') / stat('raw', 'total')).toFixed(2)}×, ` +
      `floor/raw p50 ${(stat('floor', 'total') / stat('raw', 'total')).toFixed(2)}×, ` +
      `recall/floor p99 ${(stat('recall', 'total', 99) / stat('floor', 'total', 99)).toFixed(2)}×`,
  );
  // Where the 0.5× over the floor goes: the required file work, the required model client, and the rest.
  const over = (from: string, to: string) =>
    (stat(to, 'total') - stat(from, 'total')) / stat('floor', 'total');
  console.log(
    `over the floor (p50, in floors; budget 0.50): ${over('floor', 'recall').toFixed(2)} = ` +
      `scan + reads ${over('floor', 'io').toFixed(2)} + the SDK ${over('io', 'sdk').toFixed(2)} + ` +
      `Engram's own logic ${over('sdk', 'recall').toFixed(2)} (producer checks, worker validation, prompt, ` +
      `selection, logging)`,
  );
}

await main();
