#!/usr/bin/env node
// `npm test`: Biome, one type check of every package, and every package's Vitest suite through turbo.
//
// Why not one `turbo run lint typecheck test`: apps/agent's suite is the longest task by far (~9 minutes on
// 2 cores: the fresh-clone install, the CLI, serve and workers as processes, the real Claude Code binary) and
// it can only start once every package is built. turbo has no task priorities, so in one run it started after
// the twenty type checks and most other suites — ten minutes in — and the whole run took 20 minutes on a
// 2-core machine. Here the build runs first, then apps/agent's suite starts at once beside everything else,
// which runs two tasks at a time (three concurrent tasks in all; at ten, process-spawning suites timed out on
// 2 cores). `--only` keeps the second phase from re-running the builds the first phase did.
//
// Exit code: 0 when every phase passed, else the first failing phase's code. A failed build stops the run (the
// suites run the built CLI and workers); after it, every phase runs to the end, like `turbo --continue`.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';

const LONG_SUITE = '@engram/agent';
const LONG_SUITE_DIR = 'apps/agent';
// Files of apps/agent's suite that run at the end of the other lane instead (a Vitest run of their own, with its
// own temporary directory): that lane finished ~110 s before apps/agent's suite in a fresh-clone run here, and
// still ~65 s before it with cli.test.ts moved.
const MOVED_FILES = ['src/cli.test.ts', 'src/dev-stack-ports.test.ts'];

function turbo(label, args) {
  return run(label, 'npx', ['turbo', 'run', ...args]);
}

function run(label, command, args, cwd) {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: 'inherit', env: process.env, ...(cwd ? { cwd } : {}) });
    child.on('error', (error) => {
      console.error(`test: ${label}: ${error.message}`);
      resolve({ label, code: 1, seconds: 0 });
    });
    child.on('exit', (code, signal) => {
      const seconds = Math.round((performance.now() - started) / 1000);
      resolve({ label, code: code ?? (signal ? 1 : 0), seconds });
    });
  });
}

const results = [];
results.push(await turbo('build', ['build', '--concurrency=2']));
if (results[0].code === 0) {
  const others = async () => {
    // Every package, app and bench file type-checked as one program (tsconfig.check.json): each file once. Per
    // package (`npm run typecheck -w <package>`) each check re-checks the sources of every package it imports —
    // 264 s of CPU for the twenty, against 39 s for the one program.
    const types = await run('type check (tsconfig.check.json)', 'npx', ['tsc', '-p', 'tsconfig.check.json']);
    const rest = await turbo('lint and the other suites', [
      'lint',
      'test',
      '--only',
      '--continue',
      '--concurrency=2',
      `--filter=!${LONG_SUITE}`,
    ]);
    const moved = await run(
      `${LONG_SUITE} ${MOVED_FILES.join(', ')}`,
      'npx',
      ['vitest', 'run', ...MOVED_FILES],
      LONG_SUITE_DIR,
    );
    return [types, rest, moved];
  };
  const [suite, rest] = await Promise.all([
    turbo(`${LONG_SUITE} suite`, [
      'test',
      '--only',
      `--filter=${LONG_SUITE}`,
      '--',
      ...MOVED_FILES.flatMap((file) => ['--exclude', file]),
    ]),
    others(),
  ]);
  results.push(suite, ...rest);
}
console.log('');
for (const r of results)
  console.log(`test: ${r.label}: ${r.code === 0 ? 'passed' : `FAILED (exit ${r.code})`} in ${r.seconds} s`);
const failed = results.find((r) => r.code !== 0);
process.exitCode = failed ? failed.code : 0;
