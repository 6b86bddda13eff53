import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startLocalRedis } from '@engram/queue/local-redis';

// `engram hook Stop` and `engram hook UserPromptSubmit` wall time, process start included, against `node -e 0`
// measured in the same run (the built CLI: `npm run build` first), through bin/engram.js as the `engram` on
// PATH runs it. Stop hands its work to a detached background process (what Claude Code waits for); "Stop,
// foreground" is the same work done in the hook process (ENGRAM_HOOK_FOREGROUND=1: the settled read and the
// enqueue onto a private Redis). The UserPromptSubmit prompt is one word, so it measures the hook's own cost
// without the selector's model time.

const RUNS = Number(process.env.BENCH_RUNS ?? 30);
const bin = resolve(import.meta.dirname, '../apps/agent/bin/engram.js');

interface Case {
  args: string[];
  input: string;
  env: NodeJS.ProcessEnv;
}

/** Runs the cases interleaved (one of each per round), so a change in the machine's load hits them alike. */
function time(cases: Case[]): number[][] {
  const out = cases.map(() => [] as number[]);
  for (let i = 0; i < RUNS; i++) {
    for (const [n, { args, input, env }] of cases.entries()) {
      const t = process.hrtime.bigint();
      const r = spawnSync(process.execPath, args, { input, env });
      if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
      out[n]!.push(Number(process.hrtime.bigint() - t) / 1e6);
      // A background hook's work finishes before the next run (one Stop per turn, as in Claude Code), so a
      // run's time never includes the previous run's background process competing for the CPU.
      const pid = Number(/background process \(pid (\d+)\)/.exec(String(r.stderr))?.[1]);
      if (pid) waitForExit(pid);
    }
  }
  return out.map((xs) => xs.sort((a, b) => a - b));
}
function waitForExit(pid: number): void {
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
  }
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
  const [node, stop, stopForeground, ups] = time([
    { args: ['-e', '0'], input: '', env },
    { args: [bin, 'hook', 'Stop'], input: input('Stop'), env },
    { args: [bin, 'hook', 'Stop'], input: input('Stop'), env: { ...env, ENGRAM_HOOK_FOREGROUND: '1' } },
    { args: [bin, 'hook', 'UserPromptSubmit'], input: input('UserPromptSubmit', { prompt: 'hi' }), env },
  ]) as [number[], number[], number[], number[]];
  const row = (name: string, xs: number[]) =>
    `${name.padEnd(24)} p50 ${pct(xs, 0.5).toFixed(1)} ms  p95 ${pct(xs, 0.95).toFixed(1)} ms  (+${(pct(xs, 0.5) - pct(node, 0.5)).toFixed(1)} ms p50 over node -e 0, ×${(pct(xs, 0.5) / pct(node, 0.5)).toFixed(2)})`;
  console.log(`runs: ${RUNS} each`);
  console.log(row('node -e 0', node));
  console.log(row('hook Stop', stop));
  console.log(row('hook Stop, foreground', stopForeground));
  console.log(row('hook UserPromptSubmit', ups));
} finally {
  await redis.stop();
}
