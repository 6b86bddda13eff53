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
): Promise<WorkerService> {
  return startWorkerService({ config, logger, handlers: createHandlers });
}
