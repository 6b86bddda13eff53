import { getPriority, setPriority } from 'node:os';
import type { WorkersConfig } from './config.js';
import { createHandlers } from './handlers.js';
import { createLogger, type Logger } from './logger.js';
import { startWorkerService, type WorkerService } from './service.js';

// The worker service as every process runs it (`engram-workers`, `engram workers`, `engram dev`): the job
// handlers of this package and a logger at the configured level. Tests that inject handlers call
// startWorkerService themselves.

export function startWorkers(
  config: WorkersConfig,
  logger: Logger = createLogger(config.logLevel),
  opts: { ownProcess?: boolean } = {},
): Promise<WorkerService> {
  if (opts.ownProcess) lowerPriority(config.nice, logger);
  return startWorkerService({ config, logger, handlers: createHandlers });
}

/**
 * A process that runs only memory work yields the CPU to the foreground on a shared host (`ENGRAM_WORKERS_NICE`,
 * default 10): memory jobs wait seconds on the model anyway, a user's turn should not wait for them. Only
 * contention is affected: alone on its machine the process runs as fast as at nice 0. Called before the service
 * starts, so threads created after it (the model thread among them) inherit it (Linux niceness is per thread;
 * threads Node started earlier keep theirs). Not for
 * `engram dev`, whose workers share the foreground's process.
 */
function lowerPriority(nice: number, logger: Logger): void {
  if (nice === 0) return;
  try {
    const current = getPriority(0);
    if (current < nice) setPriority(0, nice);
    logger.info({ nice: getPriority(0) }, 'process priority');
  } catch (error) {
    logger.warn({ err: (error as Error).message, nice }, 'could not lower the process priority');
  }
}
