import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import type { QueueBackendConfig } from '@engram/queue/backend-config';
import { startEmbeddedPostgres } from '@engram/queue/embedded-postgres';
import { findRedisServer, startLocalRedis } from '@engram/queue/local-redis';
import { loadWorkersConfig } from '@engram/worker-service/config';
import type { WorkerService } from '@engram/worker-service/service';
import { startWorkers } from '@engram/worker-service/start';

// The whole stack on one machine for `engram dev` and `engram demo`: a queue engine (REDIS_URL or
// ENGRAM_QUEUE_URL when set; else a redis-server child when the binary is installed; else an embedded
// PostgreSQL — nothing but Node needed) and the worker service in this process.
//
// The engine's children run in their own process group, so the terminal's Ctrl-C reaches only this process,
// which closes the workers first and then stops the engine (the engine dying under live workers was an
// unhandled 57P01 on PostgreSQL).

export interface LocalStack {
  backend: QueueBackendConfig;
  /** How the engine was obtained, for the screen. */
  origin: 'configured' | 'redis-server-child' | 'embedded-postgres';
  service: WorkerService;
  notes: string[];
  /** Where the engine keeps its data (undefined for a configured engine). */
  dataDir: string | undefined;
  stop(): Promise<void>;
}

export interface StartLocalStackOptions {
  engramHome: string;
  configured: QueueBackendConfig;
  namespace: string;
  /** Extra worker env (model endpoint, log level, queues). */
  workerEnv: Record<string, string | undefined>;
  /** Default 8090 when free (else a free port); 0 for a free port; an explicit busy port is an error. */
  httpPort?: number;
  /** Where an explicit port came from, for the error that says how to change it. */
  portFlag?: string;
  /**
   * Throwaway engine data in a temporary directory removed at stop (the demo), instead of ENGRAM_HOME/redis or
   * ENGRAM_HOME/pg.
   */
  scratch?: boolean;
  /**
   * The redis-server child's port: taken when free (the port this home's stack used last time), else a free
   * one. Default 6379 when free. Ignored for scratch data (the demo always takes a free port).
   */
  redisPort?: number;
}

export class PortInUseError extends EngramError {
  constructor(
    readonly port: number,
    how: string,
  ) {
    super(
      'PORT_IN_USE',
      `port ${port} on 127.0.0.1 is already in use (another engram dev or engram workers?); ${how}.`,
      { retryable: false },
    );
  }
}

export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function chooseBackend(
  opts: StartLocalStackOptions,
  scratchDir: string | undefined,
): Promise<{
  backend: QueueBackendConfig;
  origin: LocalStack['origin'];
  stop: () => Promise<void>;
  notes: string[];
  dataDir: string | undefined;
}> {
  const notes: string[] = [];
  if (!opts.configured.implicit) {
    return {
      backend: opts.configured,
      origin: 'configured',
      stop: async () => {},
      notes,
      dataDir: undefined,
    };
  }
  if (findRedisServer()) {
    const preferred = opts.redisPort ?? 6379;
    const port = !scratchDir && (await portFree(preferred)) ? preferred : undefined;
    const dir = scratchDir ? join(scratchDir, 'redis') : join(opts.engramHome, 'redis');
    const redis = await startLocalRedis({ dir, persist: !scratchDir, ...(port ? { port } : {}) });
    return {
      backend: { kind: 'redis', url: redis.url, implicit: false },
      origin: 'redis-server-child',
      stop: () => redis.stop(),
      notes,
      dataDir: dir,
    };
  }
  // As root the server runs as user "postgres" and still keeps its data here, even under a 0700 home
  // (packages/queue/src/embedded-postgres.ts, directoryHandle).
  const dataDir = scratchDir ? join(scratchDir, 'pg') : join(opts.engramHome, 'pg');
  const pg = await startEmbeddedPostgres({ dataDir, ...(scratchDir ? { durable: false } : {}) });
  notes.push(
    'No Redis found: running BullMQ on an embedded PostgreSQL (zero-install mode). To use Redis instead, ' +
      'install redis-server (engram dev then starts it), or run one yourself and set REDIS_URL=redis://127.0.0.1:6379.',
  );
  return {
    backend: { kind: 'postgres', url: pg.url, implicit: false },
    origin: 'embedded-postgres',
    stop: () => pg.stop(),
    notes,
    dataDir,
  };
}

async function httpPort(opts: StartLocalStackOptions): Promise<number> {
  if (opts.httpPort === 0) return 0;
  if (opts.httpPort === undefined) return (await portFree(8090)) ? 8090 : 0;
  if (!(await portFree(opts.httpPort)))
    throw new PortInUseError(opts.httpPort, `choose another with ${opts.portFlag ?? 'ENGRAM_WORKERS_PORT'}`);
  return opts.httpPort;
}

export async function startLocalStack(opts: StartLocalStackOptions): Promise<LocalStack> {
  const port = await httpPort(opts);
  let scratchDir: string | undefined;
  if (opts.scratch) {
    // Private (0700): a root run's PostgreSQL (user "postgres") is handed its data directory inside it.
    scratchDir = mkdtempSync(join(tmpdir(), 'engram-scratch-'));
  }
  const removeScratch = () => {
    if (scratchDir) rmSync(scratchDir, { recursive: true, force: true });
  };
  let chosen: Awaited<ReturnType<typeof chooseBackend>>;
  try {
    chosen = await chooseBackend(opts, scratchDir);
  } catch (error) {
    removeScratch();
    throw error;
  }
  try {
    const config = loadWorkersConfig({
      ...process.env,
      ...opts.workerEnv,
      ENGRAM_HOME: opts.engramHome,
      ENGRAM_NAMESPACE: opts.namespace,
      ...(chosen.backend.kind === 'postgres'
        ? { ENGRAM_QUEUE_URL: chosen.backend.url, REDIS_URL: undefined }
        : { REDIS_URL: chosen.backend.url, ENGRAM_QUEUE_URL: undefined }),
      ENGRAM_WORKERS_PORT: String(port),
    });
    const service = await startWorkers(config);
    return {
      backend: chosen.backend,
      origin: chosen.origin,
      service,
      notes: chosen.notes,
      dataDir: chosen.dataDir,
      stop: async () => {
        try {
          await service.stop('stack stop');
        } finally {
          await chosen.stop();
          removeScratch();
        }
      },
    };
  } catch (error) {
    await chosen.stop();
    removeScratch();
    throw error;
  }
}
