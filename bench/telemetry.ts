// What OpenTelemetry costs a served turn: `engram serve`'s turn (HTTP request span, turn span, the extract and
// recall enqueues through BullMQ's add-on, the model call's SDK span) with telemetry on — exporting OTLP to a
// receiver in this process — against the same turn with telemetry off, in the same run. The model is the
// scripted server answering at once, so a turn's time is its non-model time. No workers run: the enqueued
// jobs wait, which costs an add nothing.
//
// Telemetry is per process, so there are two long-lived children, one on and one off (same code, same Redis),
// each serving on its own port. This process drives them in short interleaved batches — off, on, on, off,
// off, on, … (ABBA, so neither side always goes first) — and times each turn from the client. Drift and the
// other load on a shared machine then fall on both sides within seconds of each other; each round gives one
// wall-clock ratio (the medians of its on and off batches), and the verdict is the median of those ratios with
// their interquartile range, next to the pooled p50 ratio. Wall time on a machine whose load is many times its
// cores is mostly waiting for a CPU, so the serving child's own CPU time is measured too (process.cpuUsage over
// the IPC channel, per batch and for the whole run): it holds everything telemetry adds — span work on the
// turn's path and the exporter's serialisation and HTTP on its 5 s schedule — and little of the machine's load.
// The Node version decides much of the result (docs/telemetry.md "Cost"); the first line of the output names it.
// Run: npm run bench:telemetry -w @engram/bench   (BENCH_ROUNDS, BENCH_TURNS, BENCH_OTEL_PROTOCOL; and
// BENCH_OFF_ASYNC_CONTEXT=1 to give the off side an AsyncLocalStorage too, which splits the cost into Node's
// async context tracking and the rest)

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startLocalRedis } from '@engram/queue/local-redis';
import { startModelServer } from '@engram/testkit/model-server';
import { startOtlpReceiver } from '@engram/testkit/otlp-receiver';
import { textReply } from '@engram/testkit/replies';
import { percentile } from './lib/stats.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 40);
const TURNS_PER_BATCH = Number(process.env.BENCH_TURNS ?? 25);
/** The exporter's protocol: the default, http/protobuf, unless BENCH_OTEL_PROTOCOL says otherwise. */
const PROTOCOL = process.env.BENCH_OTEL_PROTOCOL ?? 'http/protobuf';
const WARMUP_TURNS = 60;
const TARGET_P50_RATIO = 1.05;

interface ChildHello {
  url: string;
  key: string;
  workspace: string;
}

/** A child: one `engram serve` in this process (its model is the parent's scripted server), until stdin closes. */
async function child(): Promise<void> {
  if (process.env.BENCH_CHILD_ASYNC_CONTEXT === '1') {
    // The decomposition run: this side enables an AsyncLocalStorage (the SDK's context manager is one), so
    // Node's async context tracking costs both sides alike and the difference left is span work and export.
    const { AsyncLocalStorage } = await import('node:async_hooks');
    new AsyncLocalStorage<boolean>().enterWith(true);
  }
  const { startTelemetry } = await import('@engram/telemetry/setup');
  const telemetry = await startTelemetry('serve');
  const { TenantStore } = await import('@engram/tenants/tenant-store');
  const { startServer } = await import('@engram/agent/commands/serve');
  const { loadAgentConfig } = await import('@engram/agent/config');
  const dir = process.env.BENCH_DIR!;
  const workspace = join(dir, 'workspace');
  mkdirSync(workspace, { recursive: true });
  const tenant = await new TenantStore(join(dir, 'home')).add(`t${process.pid}`, workspace);
  const env = {
    PATH: process.env.PATH,
    HOME: join(dir, 'operator-home'),
    ENGRAM_HOME: join(dir, 'home'),
    ENGRAM_NAMESPACE: `bench-otel-${process.pid}`,
    REDIS_URL: process.env.BENCH_REDIS_URL,
    ANTHROPIC_API_KEY: 'bench',
    ANTHROPIC_BASE_URL: process.env.BENCH_MODEL_URL,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    ENGRAM_TEAM_MEMORY_DATABASE_URL: process.env.BENCH_PG_URL,
    ENGRAM_TEAM_MEMORY_SCHEMA: `bench_otel_${process.pid}`,
    // The serving logger writes JSON lines to stdout, which is the hello channel: quiet unless asked.
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
  };
  const server = await startServer(loadAgentConfig(env), { port: 0, host: '127.0.0.1' }, env);
  const hello: ChildHello = { url: server.url, key: tenant.key, workspace };
  process.stdout.write(`${JSON.stringify(hello)}\n`);
  // The parent asks for this process's CPU time around each batch (over the IPC channel), and closes stdin
  // when it is done.
  process.on('message', () => {
    const { user, system } = process.cpuUsage();
    process.send?.({ cpuMs: (user + system) / 1000 });
  });
  await new Promise<void>((resolve) => {
    process.stdin.on('end', resolve);
    process.stdin.resume();
  });
  process.disconnect?.();
  await server.stop();
  await telemetry.shutdown();
}

interface Side {
  process: ChildProcess;
  hello: ChildHello;
}

function startChild(env: Record<string, string>): Promise<Side> {
  return new Promise((resolve, reject) => {
    const p = spawn(
      process.execPath,
      [
        // BENCH_CPU_PROF=<dir>: each child writes a V8 CPU profile there when it exits.
        ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
        '--conditions=source',
        '--import',
        'tsx',
        fileURLToPath(import.meta.url),
        '--child',
      ],
      { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'inherit', 'ipc'] },
    );
    const lines = createInterface({ input: p.stdout! });
    // The hello is the first line holding a key (a log line the child's logger writes first is skipped).
    const onLine = (line: string) => {
      const parsed = (() => {
        try {
          return JSON.parse(line) as Partial<ChildHello>;
        } catch {
          return undefined;
        }
      })();
      if (!parsed?.key || !parsed.url || !parsed.workspace) return;
      lines.off('line', onLine);
      resolve({ process: p, hello: parsed as ChildHello });
    };
    lines.on('line', onLine);
    p.once('exit', (code) => reject(new Error(`child exited ${code} before it served`)));
  });
}

/** The child's CPU time so far (user + system), in ms. */
function cpuOf(side: Side): Promise<number> {
  return new Promise((resolve) => {
    side.process.once('message', (m: { cpuMs: number }) => resolve(m.cpuMs));
    side.process.send('cpu');
  });
}

async function stopChild(side: Side): Promise<void> {
  const exited = new Promise((r) => side.process.once('exit', r));
  side.process.stdin!.end();
  await exited;
}

/** `n` served turns against one child, each in a fresh session (one prompt, one reply), timed from here. */
async function batch(side: Side, n: number, label: string): Promise<number[]> {
  const { url, key, workspace } = side.hello;
  const post = (path: string, body: unknown) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then(async (r) => {
      if (!r.ok) throw new Error(`${label}: ${path} answered ${r.status}: ${await r.text()}`);
      return r.json() as Promise<{ id: string }>;
    });
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const session = await post('/v1/sessions', { cwd: workspace });
    const start = process.hrtime.bigint();
    await post(`/v1/sessions/${session.id}/turns`, { prompt: `Remember step ${i}.` });
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return samples;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'engram-bench-otel-'));
  const redis = await startLocalRedis({ dir: join(dir, 'redis'), persist: false });
  const { startEmbeddedPostgres } = await import('@engram/queue/embedded-postgres');
  // One PostgreSQL for both children's team memory routes (each its own schema), instead of one each.
  const pg = await startEmbeddedPostgres({ dataDir: join(dir, 'pg') });
  const receiver = await startOtlpReceiver();
  // The scripted model answers from this process, not the serving child: its HTTP and SSE work is the model's
  // side of the call (a real model is another host), so neither side's serving time or CPU holds it.
  const model = await startModelServer();
  model.respond(() => textReply('Noted.'));
  const base = {
    BENCH_REDIS_URL: redis.url,
    BENCH_PG_URL: pg.url,
    BENCH_MODEL_URL: model.url,
    LOG_LEVEL: 'silent',
  };
  const sides: Side[] = [];
  const off: number[] = [];
  const on: number[] = [];
  const ratios: number[] = [];
  const cpuRatios: number[] = [];
  const cpuTotal = { off: 0, on: 0 };
  try {
    const offSide = await startChild({
      ...base,
      BENCH_DIR: join(dir, 'off'),
      ...(process.env.BENCH_OFF_ASYNC_CONTEXT === '1' ? { BENCH_CHILD_ASYNC_CONTEXT: '1' } : {}),
    });
    sides.push(offSide);
    const onSide = await startChild({
      ...base,
      BENCH_DIR: join(dir, 'on'),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: PROTOCOL,
      OTEL_METRICS_EXPORTER: 'none',
      OTEL_LOGS_EXPORTER: 'none',
    });
    sides.push(onSide);
    await batch(offSide, WARMUP_TURNS, 'off');
    await batch(onSide, WARMUP_TURNS, 'on');
    const cpuStart = { off: await cpuOf(offSide), on: await cpuOf(onSide) };
    for (let round = 0; round < ROUNDS; round++) {
      // ABBA by batch: off first on even rounds, on first on odd ones. Each batch is timed per turn (wall
      // clock, from this process) and by the serving child's CPU time over the batch.
      const order = round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const);
      const wall: Record<'off' | 'on', number> = { off: 0, on: 0 };
      const cpu: Record<'off' | 'on', number> = { off: 0, on: 0 };
      for (const which of order) {
        const side = which === 'on' ? onSide : offSide;
        const before = await cpuOf(side);
        const samples = await batch(side, TURNS_PER_BATCH, which);
        cpu[which] = (await cpuOf(side)) - before;
        (which === 'on' ? on : off).push(...samples);
        wall[which] = percentile(samples, 50);
      }
      ratios.push(wall.on / wall.off);
      cpuRatios.push(cpu.on / cpu.off);
    }
    // Whole-run CPU per side, including what runs between batches (the on side's exporter, on its schedule).
    cpuTotal.off = (await cpuOf(offSide)) - cpuStart.off;
    cpuTotal.on = (await cpuOf(onSide)) - cpuStart.on;
  } finally {
    await Promise.allSettled(sides.map(stopChild));
    await receiver.close();
    await model.close();
    await pg.stop();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const p50Off = percentile(off, 50);
  const p50On = percentile(on, 50);
  const pooled = p50On / p50Off;
  const medianRatio = percentile(ratios, 50);
  const [q1, q3] = [percentile(ratios, 25), percentile(ratios, 75)];
  const spans = receiver.spans().length;
  console.log(
    `served turns: ${off.length} off, ${on.length} on, in ${ROUNDS} interleaved rounds of ${TURNS_PER_BATCH}; Node ${process.versions.node}; ${PROTOCOL}; trace export requests: ${receiver.requests().get('/v1/traces') ?? 0}${spans ? `, ${spans} spans (JSON)` : ''}`,
  );
  console.log(
    `pooled p50 off ${p50Off.toFixed(2)} ms, on ${p50On.toFixed(2)} ms → ratio ${pooled.toFixed(3)}`,
  );
  console.log(
    `pooled p90 off ${percentile(off, 90).toFixed(2)} ms, on ${percentile(on, 90).toFixed(2)} ms → ratio ${(percentile(on, 90) / percentile(off, 90)).toFixed(3)}`,
  );
  console.log(
    `per-round p50 ratio: median ${medianRatio.toFixed(3)}, IQR ${q1.toFixed(3)}–${q3.toFixed(3)}, range ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}`,
  );
  const cpuMedian = percentile(cpuRatios, 50);
  const [c1, c3] = [percentile(cpuRatios, 25), percentile(cpuRatios, 75)];
  const turns = ROUNDS * TURNS_PER_BATCH;
  const cpuWhole = cpuTotal.on / cpuTotal.off;
  console.log(
    `serving CPU per turn: off ${(cpuTotal.off / turns).toFixed(2)} ms, on ${(cpuTotal.on / turns).toFixed(2)} ms → whole-run ratio ${cpuWhole.toFixed(3)}; per-round median ${cpuMedian.toFixed(3)}, IQR ${c1.toFixed(3)}–${c3.toFixed(3)}`,
  );
  console.log(
    `target p50 ratio ≤ ${TARGET_P50_RATIO}: wall ${medianRatio <= TARGET_P50_RATIO ? 'met' : 'NOT met'} (median of per-round ratios; ${q3 <= TARGET_P50_RATIO ? 'the whole IQR is under it' : 'the IQR reaches past it'}); CPU ${cpuWhole <= TARGET_P50_RATIO ? 'met' : 'NOT met'} (whole run)`,
  );
}

if (process.argv.includes('--child')) await child();
else await main();
