// The hosted stack under faults, on loopback only and bounded in time: R `engram serve` replicas and W worker
// processes on one Redis (AOF on), S tenant sessions each running turns against a scripted model (300 ms per
// reply), while a worker is SIGKILLed (and restarted) every ~20 s, Redis is restarted once and one replica is
// SIGKILLed for good. Then, after the queues drain: turns ok/failed, memories expected/present/doubled (each
// session's first turn states one fact the extraction fork saves), orphan MEMORY.md pointers, leftover temp
// files, Redis used memory at start and end, and served-turn latency against the model's (a turn is exactly
// one model call, so the ratio is the hosted path's overhead: auth, lease, transcript, enqueue).
// Second phase: extract jobs/s in ONE worker process at concurrency 100 with a 500 ms model (target ≥ 80% of
// 100 / 0.5 s = 160 jobs/s).
// Run: npm run bench:soak -w @engram/bench   (SOAK_SECONDS, SOAK_REPLICAS, SOAK_WORKERS, SOAK_SESSIONS,
//      SOAK_EXTRACT_JOBS override the defaults)

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isTempFileName } from '@engram/fs-atomic/atomic-write';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { startLocalRedis } from '@engram/queue/local-redis';
import { TenantStore } from '@engram/tenants/tenant-store';
import { type RecordedRequest, startModelServer } from '@engram/testkit/model-server';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { createForeground } from '@engram/worker-service/testing/foreground.test-helpers';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { percentile } from './lib/stats.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const REPLICAS = Number(process.env.SOAK_REPLICAS ?? 3);
const WORKERS = Number(process.env.SOAK_WORKERS ?? 2);
const SESSIONS = Number(process.env.SOAK_SESSIONS ?? 200);
const EXTRACT_JOBS = Number(process.env.SOAK_EXTRACT_JOBS ?? 600);
const MODEL_MS = 300;
const EXTRACT_MODEL_MS = 500;
const SMALL_MODEL = 'soak-small-model';
const NAMESPACE = 'soak';

const ENGRAM = fileURLToPath(new URL('../apps/agent/src/bin/engram.ts', import.meta.url));
const WORKERS_BIN = fileURLToPath(new URL('../apps/workers/src/bin/engram-workers.ts', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const EXTRACTION = 'You are now the memory extraction subagent';

function lastUserText(r: RecordedRequest): string {
  const last = r.body.messages.at(-1);
  if (!last) return '';
  return typeof last.content === 'string'
    ? last.content
    : (last.content as Array<{ text?: string }>).map((b) => b.text ?? '').join('\n');
}
const isExtraction = (r: RecordedRequest) => JSON.stringify(r.body.messages).includes(EXTRACTION);

function memoryFile(fact: string) {
  return `---\nname: ${fact}\ndescription: Soak fact ${fact}\ntype: project\n---\n${fact} holds.\n`;
}

function spawnNode(entry: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', entry, ...args], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr?.on('data', () => {});
  process.once('exit', () => child.kill('SIGKILL'));
  return child;
}

async function waitHttp(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not up yet
    }
    await sleep(200);
  }
  throw new Error(`${url} did not become ready`);
}

async function usedMemory(url: string): Promise<number> {
  const redis = new Redis(url, { maxRetriesPerRequest: 3 });
  try {
    return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? 0);
  } finally {
    redis.disconnect();
  }
}

function walk(dir: string, out: string[] = []): string[] {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

async function main(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), 'engram-soak-'));
  const engramHome = join(base, 'home');
  const redis = await startLocalRedis({ dir: join(base, 'redis'), persist: true });
  const model = await startModelServer();
  let factWrites = 0;
  model.respond((r) => {
    if (r.body.model === SMALL_MODEL) return textReply('{"selected_memories": []}', { latencyMs: 50 });
    if (isExtraction(r)) {
      const instruction = lastUserText(r);
      if (!instruction.includes(EXTRACTION)) return textReply('Saved.', { latencyMs: 50 });
      const fact = /SOAKFACT-\d+/.exec(JSON.stringify(r.body.messages))?.[0];
      const dir = /the memory directory `([^`]+)`/.exec(instruction)?.[1];
      if (!fact || !dir) return textReply('Nothing to save.', { latencyMs: 50 });
      // As a real model would: a fact already in the manifest of existing memory files is not saved again.
      if (instruction.includes(`project_${fact.toLowerCase()}_`))
        return textReply('Already saved.', { latencyMs: 50 });
      factWrites++;
      // A new file name per run: an extraction that ran twice for one fact shows up as a double.
      const name = `project_${fact.toLowerCase()}_${Math.random().toString(36).slice(2, 8)}.md`;
      return reply(
        text('Saving.'),
        toolUse('Write', { file_path: join(dir, name), content: memoryFile(fact) }),
      );
    }
    return textReply(`ok ${lastUserText(r).slice(0, 12)}`, { latencyMs: MODEL_MS });
  });

  const tenants = new TenantStore(engramHome);
  const workspace = join(base, 'workspace');
  mkdirSync(workspace, { recursive: true });
  const { key } = await tenants.add('soak', workspace);
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: join(base, 'operator'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: NAMESPACE,
    REDIS_URL: redis.url,
    ANTHROPIC_API_KEY: 'soak',
    ANTHROPIC_BASE_URL: model.url,
    ENGRAM_SMALL_MODEL: SMALL_MODEL,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
    ENGRAM_SESSION_LEASE_TTL_MS: '3000',
    ENGRAM_MODEL_MAX_RETRIES: '2',
    ENGRAM_WORKERS_PORT: '0',
    ENGRAM_DASHBOARD: 'false',
    ENGRAM_QUEUES: 'extract,recall',
    ENGRAM_LOCK_DURATION_MS: '10000',
    ENGRAM_STALLED_INTERVAL_MS: '5000',
    LOG_LEVEL: 'silent',
  };

  // Replicas on fixed free ports (so the driver knows them), workers as separate processes.
  const { freePort } = await import('@engram/queue/local-redis');
  const replicaPorts: number[] = [];
  const replicas: ChildProcess[] = [];
  for (let i = 0; i < REPLICAS; i++) {
    const port = await freePort();
    replicaPorts.push(port);
    replicas.push(spawnNode(ENGRAM, ['serve', '--port', String(port)], env));
  }
  const workers: ChildProcess[] = [];
  for (let i = 0; i < WORKERS; i++) workers.push(spawnNode(WORKERS_BIN, [], env));
  const urls = replicaPorts.map((p) => `http://127.0.0.1:${p}`);
  await Promise.all(urls.map((u) => waitHttp(u)));
  const alive = new Set(urls);
  const memStart = await usedMemory(redis.url);

  // Sessions, each in its own project directory of the tenant's workspace.
  const sessions: Array<{ id: string; cwd: string; n: number }> = [];
  for (let i = 0; i < SESSIONS; i++) {
    const cwd = join(workspace, `p${i}`);
    mkdirSync(cwd);
    const res = await fetch(`${urls[i % urls.length]}/v1/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ cwd }),
    });
    sessions.push({ id: ((await res.json()) as { id: string }).id, cwd, n: 0 });
  }

  const started = Date.now();
  const deadline = started + SECONDS * 1000;
  let ok = 0;
  let failed = 0;
  const failures = new Map<string, number>();
  const latencies: number[] = [];
  const events: string[] = [];

  // Faults: a worker SIGKILLed (and replaced) every ~20 s, Redis restarted at 40%, a replica killed at 60%.
  const faults = (async () => {
    let redisRestarted = false;
    let replicaKilled = false;
    let nextWorkerKill = started + 20_000;
    while (Date.now() < deadline) {
      await sleep(250);
      const t = Date.now() - started;
      if (Date.now() >= nextWorkerKill) {
        const victim = workers.shift()!;
        victim.kill('SIGKILL');
        workers.push(spawnNode(WORKERS_BIN, [], env));
        events.push(`${(t / 1000).toFixed(0)}s worker SIGKILL`);
        nextWorkerKill += 20_000;
      }
      if (!redisRestarted && t > SECONDS * 400) {
        redisRestarted = true;
        await redis.stop();
        await redis.start();
        events.push(`${(t / 1000).toFixed(0)}s Redis restart`);
      }
      if (!replicaKilled && t > SECONDS * 600 && replicas.length > 1) {
        replicaKilled = true;
        replicas[0]!.kill('SIGKILL');
        alive.delete(urls[0]!);
        events.push(`${(t / 1000).toFixed(0)}s replica SIGKILL`);
      }
    }
  })();

  // Each session: turns back to back on a random replica; a failed turn is counted and the next one retried
  // elsewhere after a short pause. The first turn states the session's fact.
  await Promise.all(
    sessions.map(async (s, i) => {
      while (Date.now() < deadline) {
        const targets = [...alive];
        const url = targets[Math.floor(Math.random() * targets.length)]!;
        const prompt = s.n === 0 ? `Remember SOAKFACT-${i}: it matters.` : `turn ${s.n} of session ${i}`;
        const t0 = performance.now();
        try {
          const res = await fetch(`${url}/v1/sessions/${s.id}/turns`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${key}`,
              'content-type': 'application/json',
              prefer: 'wait=10',
            },
            body: JSON.stringify({ prompt }),
            signal: AbortSignal.timeout(30_000),
          });
          const body = (await res.json()) as { endReason?: string; error?: { code: string } };
          if (res.ok && body.endReason === 'completed') {
            ok++;
            s.n++;
            latencies.push(performance.now() - t0);
          } else {
            failed++;
            const code = body.error?.code ?? `HTTP_${res.status}`;
            failures.set(code, (failures.get(code) ?? 0) + 1);
            await sleep(200);
          }
        } catch (error) {
          failed++;
          const code = (error as Error).name === 'TimeoutError' ? 'CLIENT_TIMEOUT' : 'CONNECTION';
          failures.set(code, (failures.get(code) ?? 0) + 1);
          await sleep(200);
        }
      }
    }),
  );
  await faults;

  // Let the queues drain (bounded).
  const queue = new Queue('memory-extract', { connection: { url: redis.url }, prefix: NAMESPACE });
  const drainDeadline = Date.now() + 60_000;
  let counts: Record<string, number> = {};
  while (Date.now() < drainDeadline) {
    counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    if (Object.values(counts).every((n) => n === 0)) break;
    await sleep(500);
  }
  const extractCounts = await queue.getJobCounts('completed', 'failed');
  await queue.close();
  const memEnd = await usedMemory(redis.url);

  // Memories: expected = sessions whose fact turn succeeded; present/doubled from the files.
  const expected = sessions.filter((s) => s.n > 0).length;
  let present = 0;
  let doubled = 0;
  let orphans = 0;
  for (const [i, s] of sessions.entries()) {
    const paths = await resolveEngramPaths({
      engramHome: join(engramHome, 'tenants', 'soak', 'home'),
      cwd: s.cwd,
    });
    const files = existsSync(paths.memoryDir) ? readdirSync(paths.memoryDir) : [];
    const facts = files.filter((f) => f.startsWith(`project_soakfact-${i}_`));
    if (facts.length > 0) present++;
    if (facts.length > 1) doubled++;
    if (existsSync(paths.memoryIndexPath)) {
      for (const m of readFileSync(paths.memoryIndexPath, 'utf8').matchAll(/\]\(([^)]+\.md)\)/g)) {
        if (!existsSync(join(paths.memoryDir, m[1]!))) orphans++;
      }
    }
  }
  const temps = walk(engramHome).filter((p) => isTempFileName(p.split('/').at(-1)!)).length;

  for (const r of replicas) r.kill('SIGTERM');
  for (const w of workers) w.kill('SIGTERM');
  await sleep(1_000);

  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  console.log(
    `soak: ${REPLICAS} replicas × ${WORKERS} worker processes × ${SESSIONS} sessions, ${SECONDS} s, ${cpus().length} cores`,
  );
  console.log(`faults: ${events.join(', ')}`);
  console.log(
    `turns ok ${ok}, failed ${failed} (${[...failures].map(([k, v]) => `${k} ${v}`).join(', ') || 'none'})`,
  );
  console.log(
    `extract jobs: completed ${extractCounts.completed}, failed ${extractCounts.failed}, left ${JSON.stringify(counts)}; fork writes ${factWrites}`,
  );
  console.log(
    `memories expected ${expected}, present ${present}, doubled ${doubled}; orphan index pointers ${orphans}; temp files ${temps}`,
  );
  console.log(
    `redis used_memory start ${(memStart / 1e6).toFixed(1)} MB, end ${(memEnd / 1e6).toFixed(1)} MB`,
  );
  console.log(
    `served turn p50 ${p50.toFixed(0)} ms (${(p50 / MODEL_MS).toFixed(2)}× the ${MODEL_MS} ms model), p99 ${p99.toFixed(0)} ms (${(p99 / MODEL_MS).toFixed(2)}×); target ≤ 1.10× at 200 sessions`,
  );
  await model.close();

  await extractThroughput(base);
  await redis.stop();
  rmSync(base, { recursive: true, force: true });
  process.exit(0);
}

/** One worker process, concurrency 100, a 500 ms model: extract jobs per second over EXTRACT_JOBS jobs. */
async function extractThroughput(base: string): Promise<void> {
  const redis = await startLocalRedis({ dir: join(base, 'redis-x') });
  const model = await startModelServer();
  model.respond((r) =>
    JSON.stringify(r.body.messages).includes(EXTRACTION)
      ? textReply('Nothing to save.', { latencyMs: EXTRACT_MODEL_MS })
      : textReply('ok'),
  );
  const engramHome = join(base, 'home-x');
  const prepared = [];
  for (let i = 0; i < EXTRACT_JOBS; i++) {
    const fg = createForeground(model, { engramHome });
    prepared.push(fg.extractPayload(await fg.turn(`session ${i}`)));
  }
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: 'soakx',
    REDIS_URL: redis.url,
    ANTHROPIC_API_KEY: 'soak',
    ANTHROPIC_BASE_URL: model.url,
    ENGRAM_QUEUES: 'extract',
    ENGRAM_CONCURRENCY_EXTRACT: '100',
    ENGRAM_WORKERS_PORT: '0',
    ENGRAM_DASHBOARD: 'false',
    LOG_LEVEL: 'silent',
  };
  const worker = spawnNode(WORKERS_BIN, [], env);
  const { createQueueEngine } = await import('@engram/queue/engine');
  const { JobProducer } = await import('@engram/queue/producer');
  const engine = createQueueEngine({
    config: { kind: 'redis', url: redis.url, implicit: false },
    profile: 'worker',
    namespace: 'soakx',
  });
  const producer = new JobProducer(engine);
  await Promise.all(prepared.map((p) => producer.enqueue('extract', p)));
  // Jobs wait until the worker is up; time from the first fork request to the last job's completion.
  const queue = producer.queue('extract');
  while (((await queue.getJobCounts('completed')).completed ?? 0) < EXTRACT_JOBS) await sleep(100);
  const forks = model.messageRequests().filter((r) => JSON.stringify(r.body.messages).includes(EXTRACTION));
  const first = Math.min(...forks.map((r) => r.receivedAt));
  const jobs = await queue.getJobs(['completed'], 0, EXTRACT_JOBS);
  const last = Math.max(...jobs.map((j) => j.finishedOn ?? 0));
  const seconds = (last - first) / 1000;
  const rate = EXTRACT_JOBS / seconds;
  const ideal = 100 / (EXTRACT_MODEL_MS / 1000);
  console.log(
    `extract throughput: ${EXTRACT_JOBS} jobs in ${seconds.toFixed(2)} s = ${rate.toFixed(1)} jobs/s at concurrency 100 with a ${EXTRACT_MODEL_MS} ms model (${((rate / ideal) * 100).toFixed(0)}% of ${ideal}/s; target ≥ 80%)`,
  );
  worker.kill('SIGTERM');
  await producer.close();
  await engine.close();
  await model.close();
  await redis.stop();
}

await main();
