// The hosted stack under faults, on loopback only and bounded in time: R `engram serve` replicas and W worker
// processes on one Redis (AOF on), S tenant sessions each running turns against a scripted model (300 ms per
// reply, in a process of its own: bench/lib/soak-model.ts), while a worker is SIGKILLed (and restarted) every
// ~20 s, Redis is restarted once and one replica is SIGKILLed for good. Then, after the queues drain: turns
// ok/failed, memories expected/present/doubled (each session's first turn states one fact the extraction fork
// saves), orphan MEMORY.md pointers, leftover temp files, Redis used memory at start and end, and served-turn
// latency against the model's (a turn is exactly one model call, so the ratio is the hosted path's overhead:
// auth, lease, transcript, enqueue, and the wait for a CPU).
// Load model: each session is a user (or an agent) who reads the reply before sending the next prompt — an
// exponentially distributed think time (mean SOAK_THINK_MS, default 10 s) between a reply and the next turn, first
// turns staggered over one think time. The driver prints the offered load (S / (think + model)) and the achieved
// one. A closed-loop phase follows (SOAK_CLOSED_SECONDS, every session sends its next turn the moment the last
// one returns, no faults): its turns/s is the stack's capacity on this machine, for context. CPU seconds per turn
// of every process group (replicas, workers, Redis, model server, driver) are read from /proc for both phases.
// Last phase: extract jobs/s in ONE worker process at concurrency 100 with a 500 ms model (target ≥ 80% of
// 100 / 0.5 s = 160 jobs/s), the model server again in its own process.
// Run: npm run build && npm run bench:soak -w @engram/bench   (SOAK_FROM_SOURCE=1: no build, sources via tsx; SOAK_SECONDS, SOAK_REPLICAS, SOAK_WORKERS, SOAK_SESSIONS,
//      SOAK_THINK_MS, SOAK_CLOSED_SECONDS, SOAK_EXTRACT_JOBS override the defaults; SOAK_CPU_PROF_DIR writes a
//      CPU profile of every child that exits cleanly; SOAK_ONLY=extract runs the last phase alone)

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isTempFileName } from '@engram/fs-atomic/atomic-write';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { freePort, startLocalRedis } from '@engram/queue/local-redis';
import { TenantStore } from '@engram/tenants/tenant-store';
import type { ModelServer } from '@engram/testkit/model-server';
import { createForeground } from '@engram/worker-service/testing/foreground.test-helpers';
import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { percentile } from './lib/stats.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const REPLICAS = Number(process.env.SOAK_REPLICAS ?? 3);
const WORKERS = Number(process.env.SOAK_WORKERS ?? 2);
const SESSIONS = Number(process.env.SOAK_SESSIONS ?? 200);
const THINK_MS = Number(process.env.SOAK_THINK_MS ?? 10_000);
const CLOSED_SECONDS = Number(process.env.SOAK_CLOSED_SECONDS ?? 10);
const EXTRACT_JOBS = Number(process.env.SOAK_EXTRACT_JOBS ?? 2000);
const MODEL_MS = 300;
const EXTRACT_MODEL_MS = 500;
const SMALL_MODEL = 'soak-small-model';
const NAMESPACE = 'soak';

// The services run as production runs them (the Dockerfile's `node apps/…/dist/bin/…js`): compiled output, no
// TypeScript loader, so a restarted worker's start-up is not a TypeScript compile. SOAK_FROM_SOURCE=1 runs the
// sources through tsx instead (no build needed; start-up and steady state then include the loader).
const FROM_SOURCE = process.env.SOAK_FROM_SOURCE === '1';
const bin = (app: string, name: string) =>
  fileURLToPath(
    new URL(
      FROM_SOURCE ? `../apps/${app}/src/bin/${name}.ts` : `../apps/${app}/dist/bin/${name}.js`,
      import.meta.url,
    ),
  );
const ENGRAM = bin('agent', 'engram');
const WORKERS_BIN = bin('workers', 'engram-workers');
const MODEL_BIN = fileURLToPath(new URL('./lib/soak-model.ts', import.meta.url));
const BASELINE_BIN = fileURLToPath(new URL('./lib/soak-client-baseline.ts', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function spawnNode(entry: string, args: string[], env: NodeJS.ProcessEnv, ipc = false): ChildProcess {
  const prof = process.env.SOAK_CPU_PROF_DIR
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SOAK_CPU_PROF_DIR}`]
    : [];
  const loader = entry.endsWith('.ts') ? ['--conditions=source', '--import', 'tsx'] : [];
  const child = spawn(process.execPath, [...prof, ...loader, entry, ...args], {
    env,
    stdio: ['ignore', 'ignore', 'pipe', ...(ipc ? ['ipc' as const] : [])],
  });
  child.stderr?.on('data', () => {});
  process.once('exit', () => child.kill('SIGKILL'));
  return child;
}

interface ModelStats {
  factWrites: number;
  forkRequests: number;
  firstForkAt: number;
  requests: number;
}

/** The scripted model server (bench/lib/soak-model.ts) in its own process. */
async function startModelProcess(mode: 'soak' | 'extract') {
  const child = spawnNode(
    MODEL_BIN,
    [mode],
    {
      PATH: process.env.PATH,
      SOAK_MODEL_MS: String(MODEL_MS),
      SOAK_EXTRACT_MODEL_MS: String(EXTRACT_MODEL_MS),
      SOAK_SMALL_MODEL: SMALL_MODEL,
    },
    true,
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`model server exited (${code})`)));
    child.on('message', (m: { type: string; url?: string }) => {
      if (m.type === 'ready') resolve(m.url!);
    });
  });
  return {
    child,
    url,
    stats: () =>
      new Promise<ModelStats>((resolve) => {
        const on = (m: ModelStats & { type: string }) => {
          if (m.type !== 'stats') return;
          child.off('message', on);
          resolve(m);
        };
        child.on('message', on);
        child.send({ type: 'stats' });
      }),
    reset: () => child.send({ type: 'reset' }),
    close: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.disconnect();
      await Promise.race([exited, sleep(3_000)]);
      child.kill('SIGKILL');
    },
  };
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

async function redisInfo(url: string, section: string, field: string): Promise<number> {
  const redis = new Redis(url, { maxRetriesPerRequest: 3 });
  try {
    return Number(new RegExp(`${field}:(\\d+)`).exec(await redis.info(section))?.[1] ?? 0);
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

/** utime + stime of a live process in seconds (Linux /proc), or undefined once it is gone. */
function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds per process group over a window: every pid ever registered in a group is sampled every 250 ms
 * (the last sample of a killed process stands for its end), so replaced workers and a restarted Redis count.
 */
class CpuMeter {
  private readonly pids = new Map<number, { group: string; first: number; last: number }>();
  private timer: NodeJS.Timeout | undefined;
  private self = process.cpuUsage();
  add(group: string, pid: number | undefined): void {
    if (pid === undefined || this.pids.has(pid)) return;
    const now = cpuSeconds(pid) ?? 0;
    // A process born inside the window counts from zero: its start-up is part of the fault's cost.
    this.pids.set(pid, { group, first: this.timer ? 0 : now, last: now });
  }
  start(): void {
    // Read every process now: the window starts here, not when the process was added (a worker added right
    // after its spawn would otherwise charge its whole start-up, module loading included, to the window).
    this.sample();
    for (const p of this.pids.values()) p.first = p.last;
    this.self = process.cpuUsage();
    this.timer = setInterval(() => this.sample(), 250);
  }
  private sample(): void {
    for (const [pid, p] of this.pids) p.last = cpuSeconds(pid) ?? p.last;
  }
  stop(): Record<string, number> {
    this.sample();
    clearInterval(this.timer);
    this.timer = undefined;
    const out: Record<string, number> = {};
    for (const p of this.pids.values()) out[p.group] = (out[p.group] ?? 0) + (p.last - p.first);
    const self = process.cpuUsage(this.self);
    out.driver = (self.user + self.system) / 1e6;
    return out;
  }
}

function describeCpu(cpu: Record<string, number>, turns: number, seconds: number): string {
  const total = Object.values(cpu).reduce((a, b) => a + b, 0);
  const parts = Object.entries(cpu).map(([g, s]) => `${g} ${((s / turns) * 1000).toFixed(1)}`);
  return `CPU ms per turn: ${parts.join(', ')}; total ${((total / turns) * 1000).toFixed(1)} (${(total / seconds).toFixed(2)} of ${cpus().length} cores busy)`;
}

const expWait = (mean: number) => -Math.log(1 - Math.random()) * mean;
const load = () =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  for (const entry of [ENGRAM, WORKERS_BIN]) {
    if (!existsSync(entry)) {
      throw new Error(`${entry} is missing: run \`npm run build\` first (or set SOAK_FROM_SOURCE=1).`);
    }
  }
  const base = mkdtempSync(join(tmpdir(), 'engram-soak-'));
  if (process.env.SOAK_ONLY === 'extract') {
    await extractThroughput(base);
    rmSync(base, { recursive: true, force: true });
    process.exit(0);
  }
  const engramHome = join(base, 'home');
  const loadStart = load();
  const redis = await startLocalRedis({ dir: join(base, 'redis'), persist: true });
  const model = await startModelProcess('soak');

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
    ...(process.env.ENGRAM_MODEL_THREADS ? { ENGRAM_MODEL_THREADS: process.env.ENGRAM_MODEL_THREADS } : {}),
    ENGRAM_LOCK_DURATION_MS: '10000',
    ENGRAM_STALLED_INTERVAL_MS: '5000',
    LOG_LEVEL: 'silent',
  };

  const meter = new CpuMeter();
  // Replicas on fixed free ports (so the driver knows them), workers as separate processes.
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
  const memStart = await redisInfo(redis.url, 'memory', 'used_memory');
  for (const r of replicas) meter.add('replicas', r.pid);
  for (const w of workers) meter.add('workers', w.pid);
  meter.add('redis', await redisInfo(redis.url, 'server', 'process_id'));
  meter.add('model', model.child.pid);

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
  // Let the children finish loading modules before anything is measured.
  await sleep(2_000);

  let ok = 0;
  let failed = 0;
  const failures = new Map<string, number>();
  /** One message per failure code, printed at the end (what the faults did to a turn). */
  const failureSamples = new Map<string, string>();
  let latencies: number[] = [];
  const events: string[] = [];

  /** One turn of session `i` on a random live replica; false when it failed (counted). */
  const turn = async (s: (typeof sessions)[number], i: number): Promise<boolean> => {
    const targets = [...alive];
    const url = targets[Math.floor(Math.random() * targets.length)]!;
    const prompt = s.n === 0 ? `Remember SOAKFACT-${i}: it matters.` : `turn ${s.n} of session ${i}`;
    const t0 = performance.now();
    try {
      const res = await fetch(`${url}/v1/sessions/${s.id}/turns`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', prefer: 'wait=10' },
        body: JSON.stringify({ prompt }),
        signal: AbortSignal.timeout(30_000),
      });
      const body = (await res.json()) as { endReason?: string; error?: { code: string; message?: string } };
      if (res.ok && body.endReason === 'completed') {
        ok++;
        s.n++;
        latencies.push(performance.now() - t0);
        return true;
      }
      const code = body.error?.code ?? (res.ok ? `ENDED_${body.endReason}` : `HTTP_${res.status}`);
      failures.set(code, (failures.get(code) ?? 0) + 1);
      if (body.error?.message && !failureSamples.has(code)) failureSamples.set(code, body.error.message);
    } catch (error) {
      const code = (error as Error).name === 'TimeoutError' ? 'CLIENT_TIMEOUT' : 'CONNECTION';
      failures.set(code, (failures.get(code) ?? 0) + 1);
    }
    failed++;
    return false;
  };

  // Phase 1 — think time and faults. A failed turn is retried (on any live replica) after a short pause.
  const started = Date.now();
  const deadline = started + SECONDS * 1000;
  meter.start();
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
        const fresh = spawnNode(WORKERS_BIN, [], env);
        workers.push(fresh);
        meter.add('workers', fresh.pid);
        events.push(`${(t / 1000).toFixed(0)}s worker SIGKILL`);
        nextWorkerKill += 20_000;
      }
      if (!redisRestarted && t > SECONDS * 400) {
        redisRestarted = true;
        await redis.stop();
        await redis.start();
        meter.add('redis', await redisInfo(redis.url, 'server', 'process_id').catch(() => undefined));
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
  await Promise.all(
    sessions.map(async (s, i) => {
      // First turns are spread over one think time, as sessions of a running service would be.
      await sleep(Math.random() * THINK_MS);
      while (Date.now() < deadline) {
        if (!(await turn(s, i))) {
          await sleep(200);
          continue;
        }
        await sleep(Math.min(expWait(THINK_MS), Math.max(0, deadline - Date.now())));
      }
    }),
  );
  await faults;
  const thinkSeconds = (Date.now() - started) / 1000;
  const thinkCpu = meter.stop();
  const think = { ok, failed, failures: new Map(failures), latencies, seconds: thinkSeconds, load: load() };

  // Phase 2 — closed loop on the surviving replicas, no faults: the stack's capacity, for context.
  ok = 0;
  failed = 0;
  failures.clear();
  latencies = [];
  const closedStart = Date.now();
  const closedDeadline = closedStart + CLOSED_SECONDS * 1000;
  meter.start();
  await Promise.all(
    sessions.map(async (s, i) => {
      while (Date.now() < closedDeadline) if (!(await turn(s, i))) await sleep(200);
    }),
  );
  const closedSeconds = (Date.now() - closedStart) / 1000;
  const closedCpu = meter.stop();
  const closed = { ok, failed, failures: new Map(failures), latencies, seconds: closedSeconds, load: load() };

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
  const memEnd = await redisInfo(redis.url, 'memory', 'used_memory');
  const modelStats = await model.stats();

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

  const exits = [...replicas, ...workers].map((c) =>
    c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise((r) => c.once('exit', r)),
  );
  for (const r of replicas) r.kill('SIGTERM');
  for (const w of workers) w.kill('SIGTERM');
  await Promise.race([Promise.all(exits), sleep(10_000)]);
  await model.close();

  const cycle = THINK_MS + MODEL_MS;
  const ratio = (ms: number) => `${ms.toFixed(0)} ms = ${(ms / MODEL_MS).toFixed(2)}×`;
  console.log(
    `soak: ${REPLICAS} replicas × ${WORKERS} worker processes × ${SESSIONS} sessions, ${cpus().length} cores; load average at start ${loadStart}`,
  );
  console.log(`faults: ${events.join(', ')}`);
  console.log(
    `think-time phase (${thinkSeconds.toFixed(0)} s, mean think ${THINK_MS} ms, exponential): offered ${(SESSIONS / (cycle / 1000)).toFixed(1)} turns/s (S / (think + ${MODEL_MS} ms model)), achieved ${(think.ok / thinkSeconds).toFixed(1)} turns/s; load average at end ${think.load}`,
  );
  console.log(
    `  turns ok ${think.ok}, failed ${think.failed} (${[...think.failures].map(([k, v]) => `${k} ${v}`).join(', ') || 'none'})`,
  );
  console.log(
    `  served turn p50 ${ratio(percentile(think.latencies, 50))}, p90 ${ratio(percentile(think.latencies, 90))}, p99 ${ratio(percentile(think.latencies, 99))} the ${MODEL_MS} ms model; target p50 ≤ 1.10× at 200 sessions`,
  );
  console.log(`  ${describeCpu(thinkCpu, think.ok, thinkSeconds)}`);
  console.log(
    `closed-loop phase (${closedSeconds.toFixed(0)} s, no think time, no faults, ${alive.size} replicas): ${(closed.ok / closedSeconds).toFixed(1)} turns/s (capacity), ok ${closed.ok}, failed ${closed.failed} (${[...closed.failures].map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}); p50 ${ratio(percentile(closed.latencies, 50))}, p99 ${ratio(percentile(closed.latencies, 99))}; load average at end ${closed.load}`,
  );
  console.log(`  ${describeCpu(closedCpu, closed.ok, closedSeconds)}`);
  console.log(
    `extract jobs: completed ${extractCounts.completed}${(extractCounts.completed ?? 0) >= 1000 ? ' (kept: the queue keeps the newest 1,000)' : ''}, failed ${extractCounts.failed}, left ${JSON.stringify(counts)}; fork writes ${modelStats.factWrites}`,
  );
  console.log(
    `memories expected ${expected}, present ${present}, doubled ${doubled}; orphan index pointers ${orphans}; temp files ${temps}`,
  );
  console.log(
    `redis used_memory start ${(memStart / 1e6).toFixed(1)} MB, end ${(memEnd / 1e6).toFixed(1)} MB`,
  );
  for (const [code, message] of failureSamples) console.log(`failure ${code}: ${message.slice(0, 200)}`);

  await extractThroughput(base);
  await redis.stop();
  rmSync(base, { recursive: true, force: true });
  process.exit(0);
}

/** The model client alone in its own process at concurrency 100 against `url`: calls per second. */
async function clientBaseline(url: string, calls: number): Promise<{ rate: number; cpuMsPerCall: number }> {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', BASELINE_BIN, url], {
    env: { PATH: process.env.PATH, SOAK_BASELINE_CALLS: String(calls), SOAK_BASELINE_CONCURRENCY: '100' },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  await new Promise((r) => child.once('exit', r));
  const { seconds, cpuMs } = JSON.parse(out.trim()) as { seconds: number; cpuMs: number };
  return { rate: calls / seconds, cpuMsPerCall: cpuMs / calls };
}

/** One worker process, concurrency 100, a 500 ms model: extract jobs per second over EXTRACT_JOBS jobs. */
async function extractThroughput(base: string): Promise<void> {
  const redis = await startLocalRedis({ dir: join(base, 'redis-x') });
  const model = await startModelProcess('extract');
  const engramHome = join(base, 'home-x');
  const prepared = [];
  for (let i = 0; i < EXTRACT_JOBS; i++) {
    const fg = createForeground({ url: model.url } as ModelServer, { engramHome });
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
    ...(process.env.ENGRAM_MODEL_THREADS ? { ENGRAM_MODEL_THREADS: process.env.ENGRAM_MODEL_THREADS } : {}),
    ENGRAM_WORKERS_PORT: '0',
    ENGRAM_DASHBOARD: 'false',
    LOG_LEVEL: 'silent',
  };
  // Baseline in the same run, before and after the worker: what the bare model client reaches on this machine
  // now (the scripted server and the machine's other load bound it too).
  const baselineBefore = await clientBaseline(model.url, EXTRACT_JOBS);
  model.reset();
  const worker = spawnNode(WORKERS_BIN, [], env);
  const { createQueueEngine } = await import('@engram/queue/engine');
  const { JobProducer } = await import('@engram/queue/producer');
  const engine = createQueueEngine({
    config: { kind: 'redis', url: redis.url, implicit: false },
    profile: 'worker',
    namespace: 'soakx',
  });
  const producer = new JobProducer(engine);
  const queue = producer.queue('extract');
  // Completions are counted from the queue's event stream: the queue keeps only the newest 1,000 completed
  // jobs (removeOnComplete), so a count of kept jobs never reaches a larger SOAK_EXTRACT_JOBS.
  const events = new QueueEvents(queue.name, {
    connection: { url: redis.url },
    ...(queue.opts.prefix ? { prefix: queue.opts.prefix } : {}),
  });
  await events.waitUntilReady();
  let completed = 0;
  let failedJobs = 0;
  let lastCompletedAt = 0;
  events.on('completed', (_args, id) => {
    completed++;
    lastCompletedAt = Math.max(lastCompletedAt, Number(String(id).split('-')[0]));
  });
  events.on('failed', () => {
    failedJobs++;
  });
  await Promise.all(prepared.map((p) => producer.enqueue('extract', p)));
  // Jobs wait until the worker is up; time from the first fork request to the last job's completion.
  const meter = new CpuMeter();
  meter.add('worker', worker.pid);
  meter.add('model', model.child.pid);
  meter.add('redis', await redisInfo(redis.url, 'server', 'process_id'));
  let metering = false;
  while (completed + failedJobs < EXTRACT_JOBS) {
    if (!metering && (await model.stats()).forkRequests > 0) {
      meter.start();
      metering = true;
    }
    await sleep(50);
  }
  const cpu = meter.stop();
  await events.close();
  if (failedJobs > 0) console.log(`  ${failedJobs} extract jobs FAILED`);
  const { firstForkAt: first } = await model.stats();
  // Job times from the jobs the queue kept (the newest 1,000 completed).
  const jobs = await queue.getJobs(['completed'], 0, EXTRACT_JOBS);
  const seconds = (lastCompletedAt - first) / 1000;
  const rate = EXTRACT_JOBS / seconds;
  const ideal = 100 / (EXTRACT_MODEL_MS / 1000);
  console.log(
    `extract throughput: ${EXTRACT_JOBS} jobs in ${seconds.toFixed(2)} s = ${rate.toFixed(1)} jobs/s at concurrency 100 with a ${EXTRACT_MODEL_MS} ms model (${((rate / ideal) * 100).toFixed(0)}% of ${ideal}/s; target ≥ 80%); load average ${load()}`,
  );
  const durations = jobs.map((j) => (j.finishedOn ?? 0) - (j.processedOn ?? 0));
  const meanMs = durations.reduce((x, y) => x + y, 0) / durations.length;
  console.log(
    `  job time (processed → finished) p50 ${percentile(durations, 50).toFixed(0)} ms, p90 ${percentile(durations, 90).toFixed(0)} ms, mean ${meanMs.toFixed(0)} ms against the ${EXTRACT_MODEL_MS} ms model; jobs in flight on average ${((rate * meanMs) / 1000).toFixed(0)} of 100`,
  );
  console.log(
    `  CPU ms per job: ${Object.entries(cpu)
      .map(([g, s]) => `${g} ${((s / EXTRACT_JOBS) * 1000).toFixed(2)}`)
      .join(', ')} (the driver only polls here)`,
  );
  worker.kill('SIGTERM');
  await new Promise((r) => (worker.exitCode !== null ? r(undefined) : worker.once('exit', r)));
  const baselineAfter = await clientBaseline(model.url, EXTRACT_JOBS);
  const baseRate = (baselineBefore.rate + baselineAfter.rate) / 2;
  console.log(
    `  baseline: the model client alone (own process, same server, concurrency 100) ${baselineBefore.rate.toFixed(1)} / ${baselineAfter.rate.toFixed(1)} calls/s before / after (${((baseRate / ideal) * 100).toFixed(0)}% of ${ideal}/s, ${((baselineBefore.cpuMsPerCall + baselineAfter.cpuMsPerCall) / 2).toFixed(2)} CPU ms per call); worker / baseline = ${((rate / baseRate) * 100).toFixed(0)}%`,
  );
  await producer.close();
  await engine.close();
  await model.close();
  await redis.stop();
}

await main();
