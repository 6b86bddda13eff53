import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Closer } from '@engram/testkit/bullmq-helpers';
import { withoutBackendEnv } from '@engram/worker-service/testing/backends.test-helpers';

// The built worker service as a real process, for tests that kill workers (crash recovery, two-process locks).

export const WORKER_BIN = fileURLToPath(new URL('../../dist/bin/engram-workers.js', import.meta.url));

export function assertWorkerBuilt(): void {
  if (!existsSync(WORKER_BIN)) throw new Error(`${WORKER_BIN} is missing: run \`npm run build\` first.`);
}

/**
 * Spawns `engram-workers` with `env` over this process's environment (minus any queue URL, so the test's
 * backend choice is the only one), reports a crash with its stderr, and SIGKILLs it when `closer` closes.
 */
export function spawnWorkerProcess(env: Record<string, string>, closer: Closer): ChildProcess {
  const child = spawn(process.execPath, [WORKER_BIN], {
    env: { ...withoutBackendEnv(process.env), ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  child.on('exit', (code, signal) => {
    if (code && code !== 0 && signal === null) process.stderr.write(`worker exited ${code}: ${stderr}\n`);
  });
  closer.defer(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
  });
  return child;
}
