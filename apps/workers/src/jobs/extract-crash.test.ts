import { existsSync, promises as fs, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import type { QueueBackendConfig } from '@engram/queue/backend-config';
import { startEmbeddedPostgres } from '@engram/queue/embedded-postgres';
import { openQueueEngine, type QueueEngine } from '@engram/queue/engine';
import type { ExtractResult } from '@engram/queue/jobs/extract';
import { startLocalRedis } from '@engram/queue/local-redis';
import { JobProducer } from '@engram/queue/producer';
import { SessionState } from '@engram/queue/state/session-state';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob, waitUntil } from '@engram/testkit/wait';
import { loadWorkersConfig } from '@engram/worker-service/config';
import { createHandlers } from '@engram/worker-service/handlers';
import { createLogger } from '@engram/worker-service/logger';
import { startWorkerService } from '@engram/worker-service/service';
import {
  WORKER_TEST_BACKENDS,
  type WorkerTestBackend,
} from '@engram/worker-service/testing/backends.test-helpers';
import {
  createForeground,
  type ForegroundSession,
  isExtractionRequest,
  lastUserText,
  scriptExtractionFork,
} from '@engram/worker-service/testing/foreground.test-helpers';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  assertWorkerBuilt,
  extractWorkerEnv,
  killWorkerProcess,
  spawnWorkerProcess,
} from '../testing/worker-process.test-helpers.js';

/** A saved memory without the metadata block the worker stamps (originSessionId, modified) after the fork. */
const unstamped = (text: string) => text.replace(/metadata:\n(?: {2}.*\n)+/, '');

// Crash safety with real processes, on both queue engines: a worker killed with SIGKILL mid-fork, and the
// engine's server (Redis, or the embedded PostgreSQL) stopped and restarted mid-batch.

beforeAll(assertWorkerBuilt);
const scripted = useModelServer();
const { closer } = scripted;

const MEMORY =
  '---\nname: Use pnpm\ndescription: The user wants pnpm, never npm\ntype: feedback\n---\nUse pnpm.\n\n**Why:** npm breaks workspace links.\n**How to apply:** pnpm install / pnpm test.\n';

const spawnWorker = (env: Record<string, string>, opts?: { productionNice?: boolean }) =>
  spawnWorkerProcess(env, closer, opts);

/**
 * An extraction of `leaf` taken by a first worker process (fast lock expiry and stall checks, so a second
 * worker recovers the job soon after the first dies), returned once `hanging` says its fork has written and
 * hangs. The engine is opened (on PostgreSQL: migrated) before the first worker starts, so the enqueue never
 * races the worker's own migration; both migrate under an advisory lock, the second one is a no-op.
 */
async function startHangingExtraction(
  backend: WorkerTestBackend,
  fg: ForegroundSession,
  leaf: { leafUuid: string; leafSeq: number },
  prefix: string,
  opts: { hanging: () => boolean; productionNice?: boolean },
) {
  const namespace = uniquePrefix(prefix);
  backend.cleanUpAfter(namespace, closer);
  const env = extractWorkerEnv(
    { engramHome: fg.engramHome, namespace, modelUrl: scripted.server.url },
    backend.env(),
  );
  const engine: QueueEngine = closer.add(
    await openQueueEngine({ config: backend.config(), profile: 'worker', namespace }),
  );
  const producer = closer.add(new JobProducer(engine));
  const first = spawnWorker(env, { productionNice: opts.productionNice });
  const receipt = await producer.enqueue('extract', fg.extractPayload(leaf));
  await waitUntil(opts.hanging, 'first fork to write and hang', { timeoutMs: 30_000, ignoreErrors: true });
  return { env, engine, producer, receipt, first };
}

describe.each(WORKER_TEST_BACKENDS)('crash safety on %s', (_kind, backend) => {
  it('a worker killed mid-fork: another worker recovers the job; one memory, cursor advanced, no temp file', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('pnpm it is.')]);
    let forkRuns = 0;
    let secondTurns = 0;
    scriptExtractionFork(
      scripted.server,
      () => {
        forkRuns++;
        return { file: 'feedback_pnpm.md', content: MEMORY };
      },
      {
        // The first run hangs here (after its Write landed) long enough to be killed.
        after: () => textReply('Saved.', ++secondTurns === 1 ? { latencyMs: 8_000 } : {}),
      },
    );
    const leaf = await fg.turn('always use pnpm in this repo, never npm');

    const {
      env,
      engine,
      producer,
      receipt,
      first: a,
    } = await startHangingExtraction(backend, fg, leaf, 'crash', {
      hanging: () => secondTurns === 1,
    });
    expect(existsSync(join(fg.paths.memoryDir, 'feedback_pnpm.md'))).toBe(true);
    spawnWorker(env);
    await killWorkerProcess(a);

    const job = await waitForFinishedJob(producer.queue('extract'), receipt.jobId, 30_000);
    expect(await job.getState()).toBe('completed');
    expect((job.returnvalue as ExtractResult | undefined)?.outcome).toBe('extracted');
    expect(forkRuns).toBe(2);

    const files = readdirSync(fg.paths.memoryDir).sort();
    // The memory and its index, plus the record of the pointer titles Engram wrote (memdir/index-file.ts).
    expect(files).toEqual(['.index-titles.json', 'MEMORY.md', 'feedback_pnpm.md']);
    const index = await fs.readFile(fg.paths.memoryIndexPath, 'utf8');
    expect(parseIndexEntries(index).filter((e) => e.file === 'feedback_pnpm.md')).toHaveLength(1);
    expect(unstamped(await fs.readFile(join(fg.paths.memoryDir, 'feedback_pnpm.md'), 'utf8'))).toBe(MEMORY);
    const state = new SessionState(engine.state, fg.extractPayload(leaf));
    expect(await state.extractCursor()).toEqual({ leafUuid: leaf.leafUuid, leafSeq: leaf.leafSeq });
  }, 60_000);
});

describe('a dedicated worker process', () => {
  it('yields the CPU to the foreground: the process and the model thread its fork started run at nice 10', async () => {
    const [, backend] = WORKER_TEST_BACKENDS[0]!;
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('pnpm it is.')]);
    let secondTurns = 0;
    scriptExtractionFork(scripted.server, () => ({ file: 'feedback_pnpm.md', content: MEMORY }), {
      // The fork hangs here, its model thread started, while the test reads the priorities.
      after: () => textReply('Saved.', ++secondTurns === 1 ? { latencyMs: 8_000 } : {}),
    });
    const leaf = await fg.turn('always use pnpm in this repo, never npm');
    const { first: a } = await startHangingExtraction(backend, fg, leaf, 'nice', {
      hanging: () => secondTurns === 1,
      productionNice: true,
    });
    // A dedicated worker process yields the CPU to the foreground (ENGRAM_WORKERS_NICE, default 10); its
    // model thread, started by the fork, inherited that (niceness is per thread on Linux).
    const niceOf = (path: string) =>
      Number(
        readFileSync(path, 'utf8')
          .replace(/^.*\) /s, '')
          .split(' ')[16],
      );
    expect(niceOf(`/proc/${a.pid}/stat`)).toBe(10);
    const threads = readdirSync(`/proc/${a.pid}/task`).map((t) => niceOf(`/proc/${a.pid}/task/${t}/stat`));
    expect(threads.filter((n) => n === 10).length).toBeGreaterThanOrEqual(2);

    await killWorkerProcess(a);
  }, 60_000);
});

describe.each(WORKER_TEST_BACKENDS)('exactly once under retries on %s', (_kind, backend) => {
  it('an extraction killed mid-fork, 250 newer memories written meanwhile: the retry writes the fact once', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('pnpm it is.')]);
    // A model that checks what is saved, as the instruction asks: it saves the pnpm fact under a new name
    // unless the file that holds it is listed (in the manifest, or as already written by an earlier attempt).
    const instructions: string[] = [];
    let secondTurns = 0;
    scripted.server.route(
      'extract',
      (r) => isExtractionRequest(r.body),
      (r): ScriptStep => {
        const last = lastUserText(r.body);
        if (last.includes('You are now the memory extraction subagent')) {
          instructions.push(last);
          if (instructions.length > 1 && last.includes('feedback_pnpm.md')) {
            return textReply('That fact is already saved.');
          }
          const name =
            instructions.length === 1 ? 'feedback_pnpm.md' : `feedback_pnpm_${instructions.length}.md`;
          return reply(
            text('Saving.'),
            toolUse('Write', { file_path: join(fg.paths.memoryDir, name), content: MEMORY }),
          );
        }
        secondTurns++;
        // The first attempt hangs here (after its Write landed) long enough to be killed.
        return textReply('Saved.', secondTurns === 1 ? { latencyMs: 8_000 } : {});
      },
      { sticky: true },
    );
    const leaf = await fg.turn('always use pnpm in this repo, never npm');

    const { env, producer, receipt, first } = await startHangingExtraction(backend, fg, leaf, 'once', {
      hanging: () => secondTurns === 1,
    });
    await killWorkerProcess(first);

    // Other sessions save 250 newer memories meanwhile: the first attempt's file drops out of the newest 200.
    const later = Date.now() / 1000 + 60;
    for (let i = 0; i < 250; i++) {
      const file = join(fg.paths.memoryDir, `project_note_${String(i).padStart(3, '0')}.md`);
      await fs.writeFile(
        file,
        `---\nname: Note ${i}\ndescription: Unrelated project note ${i}\ntype: project\n---\nNote ${i}.\n`,
      );
      await fs.utimes(file, later + i, later + i);
    }

    spawnWorker(env);
    const job = await waitForFinishedJob(producer.queue('extract'), receipt.jobId, 30_000);
    expect(await job.getState()).toBe('completed');
    const result = job.returnvalue as ExtractResult;
    expect(instructions).toHaveLength(2);
    // The retry was told what its first attempt wrote, although the manifest window no longer held it.
    expect(instructions[1]).toContain('Already saved by an earlier attempt');
    expect(instructions[1]).toContain('feedback_pnpm.md');

    const withFact = [];
    for (const file of readdirSync(fg.paths.memoryDir)) {
      if (!file.endsWith('.md') || file === 'MEMORY.md') continue;
      if ((await fs.readFile(join(fg.paths.memoryDir, file), 'utf8')).includes('Use pnpm'))
        withFact.push(file);
    }
    expect(withFact).toEqual(['feedback_pnpm.md']);
    const index = await fs.readFile(fg.paths.memoryIndexPath, 'utf8');
    expect(parseIndexEntries(index).filter((e) => e.file.startsWith('feedback_pnpm'))).toHaveLength(1);
    // The receipt credits the first attempt's write once.
    expect(result.memories).toEqual([{ path: 'feedback_pnpm.md', type: 'feedback', action: 'created' }]);
  }, 90_000);
});

interface RestartableServer {
  /** The variables that point a worker service at this server. */
  env: Record<string, string>;
  stop(): Promise<void>;
  start(): Promise<void>;
}

/**
 * A private server of `kind`, so stopping it disturbs no other test: a persistent local Redis, or an embedded
 * PostgreSQL in a temporary data directory, restarted on the same port (the workers' URL stays valid).
 */
async function restartableServer(kind: QueueBackendConfig['kind']): Promise<RestartableServer> {
  const dir = mkdtempSync(join(tmpdir(), `engram-restart-${kind}-`));
  closer.defer(async () => rmSync(dir, { recursive: true, force: true }));
  if (kind === 'redis') {
    const redis = await startLocalRedis({ dir, persist: true });
    closer.defer(() => redis.stop());
    return { env: { REDIS_URL: redis.url }, stop: () => redis.stop(), start: () => redis.start() };
  }
  // As root the server runs as the `postgres` user: the data directory is handed to it (mkdtemp's parent,
  // the system temp directory, is world-searchable).
  let postgres = await startEmbeddedPostgres({ dataDir: dir, durable: false });
  const { port, url } = postgres;
  closer.defer(() => postgres.stop());
  return {
    env: { ENGRAM_QUEUE_URL: url },
    stop: () => postgres.stop(),
    start: async () => {
      postgres = await startEmbeddedPostgres({ dataDir: dir, port, durable: false });
    },
  };
}

describe.each(WORKER_TEST_BACKENDS)('engine restart on %s', (kind) => {
  it('the scripted.server stopped and restarted during a batch: every job completes after reconnect, each session saved once', async () => {
    const engine = await restartableServer(kind);
    scripted.server.route(
      'parent',
      (r) => !isExtractionRequest(r.body),
      (r) => textReply(`ok ${r.index}`),
      { sticky: true },
    );
    // Each fork saves the same memory in its session's project; a run repeated because the outage hid its
    // completion must leave exactly the same files behind.
    const forkRuns = new Map<string, number>();
    scriptExtractionFork(
      scripted.server,
      (memoryDir) => {
        forkRuns.set(memoryDir, (forkRuns.get(memoryDir) ?? 0) + 1);
        return { file: 'feedback_pnpm.md', content: MEMORY };
      },
      { latencyMs: 150, after: () => textReply('Saved.', { latencyMs: 150 }) },
    );
    const engramHome = mkdtempSync(join(tmpdir(), 'engram-home-'));
    const sessions = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const fg = createForeground(scripted.server, { engramHome });
        return { fg, leaf: await fg.turn(`turn number ${i} with words`) };
      }),
    );
    const namespace = uniquePrefix('restart');
    const config = loadWorkersConfig({
      ...engine.env,
      ENGRAM_HOME: engramHome,
      ENGRAM_NAMESPACE: namespace,
      ENGRAM_QUEUES: 'extract',
      ENGRAM_CONCURRENCY_EXTRACT: '2',
      // A job whose completion was lost in the outage is found stalled and run again within seconds.
      ENGRAM_LOCK_DURATION_MS: '1500',
      ENGRAM_STALLED_INTERVAL_MS: '500',
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: scripted.server.url,
      ENGRAM_MODEL_MAX_RETRIES: '0',
      LOG_LEVEL: 'silent',
    });
    expect(config.backend.kind).toBe(kind);
    const service = await startWorkerService({
      config,
      logger: createLogger('silent'),
      handlers: createHandlers,
      http: false,
    });
    closer.defer(() => service.stop('test'));
    const producer = closer.add(
      new JobProducer(service.engine, {
        config: { extract: { backoff: { type: 'exponential', delayMs: 100, jitter: 0 } } },
      }),
    );
    for (const { fg, leaf } of sessions) await producer.enqueue('extract', fg.extractPayload(leaf));

    await waitUntil(() => scripted.server.messageRequests('extract').length >= 1, 'first fork in flight', {
      timeoutMs: 30_000,
      ignoreErrors: true,
    });
    await engine.stop();
    await new Promise((r) => setTimeout(r, 1_000));
    await engine.start();

    const queue = producer.queue('extract');
    await waitUntil(
      async () => (await queue.getJobCounts('completed')).completed === sessions.length,
      'all jobs completed',
      { timeoutMs: 60_000, ignoreErrors: true },
    );
    expect((await queue.getJobCounts('failed')).failed).toBe(0);
    for (const { fg, leaf } of sessions) {
      const cursor = await new SessionState(service.engine.state, fg.extractPayload(leaf)).extractCursor();
      expect(cursor?.leafSeq).toBe(leaf.leafSeq);
      expect(readdirSync(fg.paths.memoryDir).sort()).toEqual([
        '.index-titles.json',
        'MEMORY.md',
        'feedback_pnpm.md',
      ]);
      const index = await fs.readFile(fg.paths.memoryIndexPath, 'utf8');
      expect(parseIndexEntries(index).map((e) => e.file)).toEqual(['feedback_pnpm.md']);
      expect(unstamped(await fs.readFile(join(fg.paths.memoryDir, 'feedback_pnpm.md'), 'utf8'))).toBe(MEMORY);
    }
    // Every session was extracted at least once (a run repeated after the outage is allowed, not required).
    expect(forkRuns.size).toBe(sessions.length);
  }, 90_000);
});
