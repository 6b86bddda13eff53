#!/usr/bin/env node
import { startTelemetry } from '@engram/telemetry/setup';
import { ConfigError, loadWorkersConfig } from '@engram/worker-service/config';
import { createLogger } from '@engram/worker-service/logger';
import { startWorkers } from '@engram/worker-service/start';

// `engram-workers`: run the memory worker pool until SIGTERM/SIGINT.

async function main(): Promise<void> {
  let config: ReturnType<typeof loadWorkersConfig>;
  try {
    config = loadWorkersConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const telemetry = await startTelemetry('workers');
  const logger = createLogger(config.logLevel);
  const service = await startWorkers(config, logger, { ownProcess: true });
  logger.info({ queues: [...service.workers.keys()] }, 'engram workers running');
  const shutdown = (signal: string) => {
    service
      .stop(signal)
      .then(() => telemetry.shutdown())
      .then(
        () => process.exit(0),
        (error: Error) => {
          logger.error({ err: error.message }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((error: Error & { code?: string }) => {
  process.stderr.write(`engram-workers: ${error.code ? `[${error.code}] ` : ''}${error.message}\n`);
  process.exit(1);
});
