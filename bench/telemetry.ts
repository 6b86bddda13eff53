// What OpenTelemetry costs a served turn: `engram serve`'s turn (HTTP request span, turn span, the extract
// enqueue through BullMQ's add-on, the model call's SDK span) with telemetry on — exporting OTLP/HTTP to a
// receiver in this process — against the same turn with telemetry off, in the same run. The model is the
// scripted server answering at once, so a turn's time is its non-model time. Telemetry is per process, so
// each series runs in a child process (same code, same Redis); the children alternate, round by round, so
// drift hits both alike. No workers run: the enqueued jobs wait, which costs an add nothing.
// Run: npm run bench:telemetry -w @engram/bench

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startLocalRedis } from '@engram/queue/local-redis';
import { startOtlpReceiver } from '@engram/testkit/otlp-receiver';
import { percentile } from './lib/stats.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const TURNS_PER_ROUND = Number(process.env.BENCH_TURNS ?? 150);
/** The exporter's protocol: the default, http/protobuf, unless BENCH_OTEL_PROTOCOL says otherwise. */
const PROTOCOL = process.env.BENCH_OTEL_PROTOCOL ?? 'http/protobuf';
const WARMUP = 30;
const TARGET_P50_RATIO = 1.05;

async function child(): Promise<void> {
  const { startTelemetry } = await import('@engram/telemetry/setup');
  const telemetry = await startTelemetry('serve');
  const { startModelServer } = await import('@engram/testkit/model-server');
  const { textReply } = await import('@engram/testkit/replies');
  const { TenantStore } = await import('@engram/tenants/tenant-store');
  const { startServer } = await import('@engram/agent/commands/serve');
  const { loadAgentConfig } = await import('@engram/agent/config');
  const model = await startModelServer();
  model.respond(() => textReply('Noted.'));
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
    ANTHROPIC_BASE_URL: model.url,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
  };
  const server = await startServer(loadAgentConfig(env), { port: 0, host: '127.0.0.1' }, env);
  const post = (path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then((r) => r.json() as Promise<{ id: string }>);
  const samples: number[] = [];
  for (let i = 0; i < WARMUP + TURNS_PER_ROUND; i++) {
    // A fresh session per turn keeps every turn the same size (one prompt, one reply).
    const session = await post('/v1/sessions', { cwd: workspace });
    const start = process.hrtime.bigint();
    await post(`/v1/sessions/${session.id}/turns`, { prompt: `Remember step ${i}.` });
    if (i >= WARMUP) samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  await server.stop();
  await telemetry.shutdown();
  await model.close();
  process.stdout.write(`${JSON.stringify(samples)}\n`);
}

function runChild(env: Record<string, string>): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const p = spawn(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', fileURLToPath(import.meta.url), '--child'],
      { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    p.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    p.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1)!)) : reject(new Error(`child ${code}`)),
    );
  });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'engram-bench-otel-'));
  const redis = await startLocalRedis({ dir: join(dir, 'redis'), persist: false });
  const receiver = await startOtlpReceiver();
  const base = { BENCH_REDIS_URL: redis.url, LOG_LEVEL: 'silent' };
  const off: number[] = [];
  const on: number[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const offEnv = { ...base, BENCH_DIR: join(dir, `off-${round}`) };
      const onEnv = {
        ...base,
        BENCH_DIR: join(dir, `on-${round}`),
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: PROTOCOL,
        OTEL_METRICS_EXPORTER: 'none',
        OTEL_LOGS_EXPORTER: 'none',
      };
      // Alternate which series goes first.
      const order = round % 2 === 0 ? ([offEnv, onEnv] as const) : ([onEnv, offEnv] as const);
      for (const env of order) (env === onEnv ? on : off).push(...(await runChild(env)));
    }
  } finally {
    await receiver.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const p50Off = percentile(off, 50);
  const p50On = percentile(on, 50);
  const ratio = p50On / p50Off;
  console.log(
    `served turns: ${off.length} off, ${on.length} on; ${PROTOCOL}; trace export requests: ${receiver.requests().get('/v1/traces') ?? 0}`,
  );
  console.log(`p50 off ${p50Off.toFixed(2)} ms, on ${p50On.toFixed(2)} ms → ratio ${ratio.toFixed(3)}`);
  console.log(
    `p90 off ${percentile(off, 90).toFixed(2)} ms, on ${percentile(on, 90).toFixed(2)} ms → ratio ${(percentile(on, 90) / percentile(off, 90)).toFixed(3)}`,
  );
  console.log(`target p50 ratio ≤ ${TARGET_P50_RATIO}: ${ratio <= TARGET_P50_RATIO ? 'met' : 'NOT met'}`);
}

if (process.argv.includes('--child')) await child();
else await main();
