import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startLocalRedis } from '@engram/queue/local-redis';

// `engram hook Stop` and `engram hook UserPromptSubmit` wall time, process start included, against `node -e 0`
// measured in the same run (the built CLI: `npm run build` first). Stop enqueues onto a private Redis; the
// UserPromptSubmit prompt is one word, so it measures the hook's own cost without the selector's model time.

const RUNS = Number(process.env.BENCH_RUNS ?? 30);
const bin = resolve(import.meta.dirname, '../apps/agent/dist/bin/engram.js');

function time(args: string[], input: string, env: NodeJS.ProcessEnv): number[] {
  const out: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t = process.hrtime.bigint();
    const r = spawnSync(process.execPath, args, { input, env });
    if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return out.sort((a, b) => a - b);
}
const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

const home = mkdtempSync(join(tmpdir(), 'engram-bench-hooks-'));
const redis = await startLocalRedis({ dir: join(home, 'redis'), persist: false });
try {
  const repo = join(home, 'repo');
  mkdirSync(join(repo, '.git'), { recursive: true });
  const dir = join(home, 'claude', 'projects', repo.replace(/[^A-Za-z0-9]/g, '-'));
  mkdirSync(dir, { recursive: true });
  const sessionId = '5f0c1a52-7d0e-4c56-9a43-0d9d2f7c1e01';
  const transcript = join(dir, `${sessionId}.jsonl`);
  writeFileSync(
    transcript,
    `${JSON.stringify({ type: 'user', uuid: 'u1', parentUuid: null, sessionId, cwd: repo, message: { role: 'user', content: 'We deploy to ams.' } })}\n${JSON.stringify({ type: 'assistant', uuid: 'a1', parentUuid: 'u1', sessionId, cwd: repo, message: { role: 'assistant', content: [{ type: 'text', text: 'Noted.' }], stop_reason: 'end_turn' } })}\n`,
  );
  const env = {
    ...process.env,
    ENGRAM_HOME: join(home, 'claude'),
    REDIS_URL: redis.url,
    ENGRAM_NAMESPACE: 'bench-hooks',
  };
  const input = (event: string, extra: object = {}) =>
    JSON.stringify({
      session_id: sessionId,
      transcript_path: transcript,
      cwd: repo,
      hook_event_name: event,
      ...extra,
    });
  const node = time(['-e', '0'], '', env);
  const stop = time([bin, 'hook', 'Stop'], input('Stop'), env);
  const ups = time([bin, 'hook', 'UserPromptSubmit'], input('UserPromptSubmit', { prompt: 'hi' }), env);
  const row = (name: string, xs: number[]) =>
    `${name.padEnd(24)} p50 ${pct(xs, 0.5).toFixed(1)} ms  p95 ${pct(xs, 0.95).toFixed(1)} ms  (+${(pct(xs, 0.5) - pct(node, 0.5)).toFixed(1)} ms p50 over node -e 0, ×${(pct(xs, 0.5) / pct(node, 0.5)).toFixed(2)})`;
  console.log(`runs: ${RUNS} each`);
  console.log(row('node -e 0', node));
  console.log(row('hook Stop', stop));
  console.log(row('hook UserPromptSubmit', ups));
} finally {
  await redis.stop();
}
