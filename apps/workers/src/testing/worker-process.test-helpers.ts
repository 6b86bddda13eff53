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
 *
 * The worker runs at the test's own priority unless `env` or `opts.productionNice` says otherwise. In
 * production a worker process lowers itself to nice 10 so that the foreground wins contention; in `npm test`
 * every other suite runs beside it at nice 0, and a nice-10 worker got a tenth of a core: its tests ran 30+ s
 * (9 s at nice 0) and its job locks (1.5 s in the crash tests) could lapse, a load these tests never meant to
 * measure. `productionNice` keeps the default (extract-crash.test.ts checks that the process and its model
 * thread run at nice 10).
 */
export function spawnWorkerProcess(
  env: Record<string, string>,
  closer: Closer,
  opts: { productionNice?: boolean } = {},
): ChildProcess {
  const priority = opts.productionNice ? {} : { ENGRAM_WORKERS_NICE: '0' };
  const child = spawn(process.execPath, [WORKER_BIN], {
    env: { ...withoutBackendEnv(process.env), ...priority, ...env },
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
    if (child.exitCode === null && child.signalCode === null) await killWorkerProcess(child);
  });
  return child;
}

/** SIGKILLs a worker process and waits until it is gone. */
export async function killWorkerProcess(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

/**
 * The environment of an extraction worker process in a crash test: one queue, no HTTP port, no SDK retries, and
 * a short lock with frequent stall checks, so a second worker recovers a killed worker's job within seconds.
 */
export function extractWorkerEnv(
  opts: { engramHome: string; namespace: string; modelUrl: string },
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    ENGRAM_HOME: opts.engramHome,
    ENGRAM_NAMESPACE: opts.namespace,
    ENGRAM_QUEUES: 'extract',
    ENGRAM_WORKERS_PORT: '0',
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: opts.modelUrl,
    ENGRAM_MODEL_MAX_RETRIES: '0',
    ENGRAM_LOCK_DURATION_MS: '1500',
    ENGRAM_STALLED_INTERVAL_MS: '500',
    LOG_LEVEL: 'warn',
    ...extra,
  };
}
