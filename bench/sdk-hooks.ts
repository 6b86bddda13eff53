import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { StopHookInput } from '@anthropic-ai/claude-agent-sdk';
import { engramHooks } from '@engram/agent-sdk/hooks';
import { startLocalRedis } from '@engram/queue/local-redis';

// The Agent SDK adapter's in-process Stop callback (engramHooks: one MemoryQueue for every call, no process
// per hook) against `engram hook Stop` as a process (the built CLI: `npm run build` first), same transcript,
// same private Redis, measured in the same run. The ratio is process / in-process at p50.

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const bin = resolve(import.meta.dirname, '../apps/agent/dist/bin/engram.js');
const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

const home = mkdtempSync(join(tmpdir(), 'engram-bench-sdk-hooks-'));
const redis = await startLocalRedis({ dir: join(home, 'redis'), persist: false });
try {
  const repo = join(home, 'repo');
  mkdirSync(join(repo, '.git'), { recursive: true });
  const claudeHome = join(home, 'claude');
  const dir = join(claudeHome, 'projects', repo.replace(/[^A-Za-z0-9]/g, '-'));
  mkdirSync(dir, { recursive: true });
  const sessionId = '5f0c1a52-7d0e-4c56-9a43-0d9d2f7c1e02';
  const transcript = join(dir, `${sessionId}.jsonl`);
  writeFileSync(
    transcript,
    `${JSON.stringify({ type: 'user', uuid: 'u1', parentUuid: null, sessionId, cwd: repo, message: { role: 'user', content: 'We deploy to ams.' } })}\n${JSON.stringify({ type: 'assistant', uuid: 'a1', parentUuid: 'u1', sessionId, cwd: repo, message: { role: 'assistant', content: [{ type: 'text', text: 'Noted.' }], stop_reason: 'end_turn' } })}\n`,
  );
  const input: StopHookInput = {
    session_id: sessionId,
    transcript_path: transcript,
    cwd: repo,
    hook_event_name: 'Stop',
    stop_hook_active: false,
  };
  const namespace = 'bench-sdk-hooks';
  const env = { ...process.env, ENGRAM_HOME: claudeHome, REDIS_URL: redis.url, ENGRAM_NAMESPACE: namespace };

  const processRuns: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t = process.hrtime.bigint();
    const r = spawnSync(process.execPath, [bin, 'hook', 'Stop'], { input: JSON.stringify(input), env });
    if (r.status !== 0) throw new Error(`engram hook Stop exited ${r.status}: ${r.stderr}`);
    processRuns.push(Number(process.hrtime.bigint() - t) / 1e6);
  }

  const notes: string[] = [];
  const engram = engramHooks({
    engramHome: claudeHome,
    queue: { url: redis.url, namespace },
    onNote: (_e, n) => notes.push(n),
  });
  const stop = engram.hooks.Stop![0]!.hooks[0]!;
  const signal = new AbortController().signal;
  await stop(input, undefined, { signal }); // warm: the connection and the cache-safe parameters
  const inProcess: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t = process.hrtime.bigint();
    await stop(input, undefined, { signal });
    inProcess.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  await engram.close();
  if (!notes.every((n) => /memory extraction queued/.test(n)))
    throw new Error(`a callback did not enqueue: ${notes}`);

  processRuns.sort((a, b) => a - b);
  inProcess.sort((a, b) => a - b);
  const row = (name: string, xs: number[]) =>
    `${name.padEnd(30)} p50 ${pct(xs, 0.5).toFixed(1)} ms  p95 ${pct(xs, 0.95).toFixed(1)} ms`;
  console.log(`runs: ${RUNS} each`);
  console.log(row('engram hook Stop (process)', processRuns));
  console.log(row('engramHooks Stop (in-process)', inProcess));
  console.log(
    `ratio process / in-process at p50: ×${(pct(processRuns, 0.5) / pct(inProcess, 0.5)).toFixed(1)}`,
  );
} finally {
  await redis.stop();
}
