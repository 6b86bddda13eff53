import { chmodSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import type { QueueBackendConfig } from '@engram/queue/backend-config';
import { EmbeddedPostgresError, startEmbeddedPostgres } from '@engram/queue/embedded-postgres';
import { findRedisServer, startLocalRedis } from '@engram/queue/local-redis';
import { loadWorkersConfig } from '@engram/workers/config';
import type { WorkerService } from '@engram/workers/service';
import { startWorkers } from '../commands/workers.js';

// The whole stack on one machine for `engram dev` and `engram demo`: a queue engine (REDIS_URL or
// ENGRAM_QUEUE_URL when set; else a redis-server child when the binary is installed; else an embedded
// PostgreSQL — nothing but Node needed) and the worker service in this process.

export interface LocalStack {
  backend: QueueBackendConfig;
  /** How the engine was obtained, for the screen. */
  origin: 'configured' | 'redis-server-child' | 'embedded-postgres';
  service: WorkerService;
  notes: string[];
  stop(): Promise<void>;
}

export interface StartLocalStackOptions {
  engramHome: string;
  configured: QueueBackendConfig;
  namespace: string;
  /** Extra worker env (model endpoint, log level, queues). */
  workerEnv: Record<string, string | undefined>;
  /** Default 8090; 0 for a free port. */
  httpPort?: number;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function chooseBackend(opts: StartLocalStackOptions): Promise<{
  backend: QueueBackendConfig;
  origin: LocalStack['origin'];
  stop: () => Promise<void>;
  notes: string[];
}> {
  const notes: string[] = [];
  if (!opts.configured.implicit) {
    return { backend: opts.configured, origin: 'configured', stop: async () => {}, notes };
  }
  if (findRedisServer()) {
    const port = (await portFree(6379)) ? 6379 : undefined;
    const redis = await startLocalRedis({
      dir: join(opts.engramHome, 'redis'),
      persist: true,
      ...(port ? { port } : {}),
    });
    return {
      backend: { kind: 'redis', url: redis.url, implicit: false },
      origin: 'redis-server-child',
      stop: () => redis.stop(),
      notes,
    };
  }
  let dataDir = join(opts.engramHome, 'pg');
  let pg: Awaited<ReturnType<typeof startEmbeddedPostgres>>;
  try {
    pg = await startEmbeddedPostgres({ dataDir });
  } catch (error) {
    if (!(error instanceof EmbeddedPostgresError) || error.code !== 'EMBEDDED_POSTGRES_DATA_DIR_UNREACHABLE')
      throw error;
    // As root, the server runs as "postgres", which cannot enter /root: keep its data under /var/lib instead.
    const base = '/var/lib/engram/pg';
    mkdirSync(base, { recursive: true, mode: 0o755 });
    chmodSync('/var/lib/engram', 0o755);
    chmodSync(base, 0o755);
    dataDir = join(base, sanitizePath(opts.engramHome));
    pg = await startEmbeddedPostgres({ dataDir });
    notes.push(`PostgreSQL data lives in ${dataDir} (the server's user cannot reach ${opts.engramHome}).`);
  }
  notes.push(
    'No Redis found: running BullMQ on an embedded PostgreSQL (zero-install mode). ' +
      'To use Redis instead: start redis-server (or `docker compose up redis`) and set REDIS_URL=redis://127.0.0.1:6379.',
  );
  return {
    backend: { kind: 'postgres', url: pg.url, implicit: false },
    origin: 'embedded-postgres',
    stop: () => pg.stop(),
    notes,
  };
}

export async function startLocalStack(opts: StartLocalStackOptions): Promise<LocalStack> {
  const chosen = await chooseBackend(opts);
  try {
    const config = loadWorkersConfig({
      ...process.env,
      ...opts.workerEnv,
      ENGRAM_HOME: opts.engramHome,
      ENGRAM_NAMESPACE: opts.namespace,
      ...(chosen.backend.kind === 'postgres'
        ? { ENGRAM_QUEUE_URL: chosen.backend.url, REDIS_URL: undefined }
        : { REDIS_URL: chosen.backend.url, ENGRAM_QUEUE_URL: undefined }),
      ENGRAM_WORKERS_PORT: String(opts.httpPort ?? ((await portFree(8090)) ? 8090 : 0)),
    });
    const service = await startWorkers(config);
    return {
      backend: chosen.backend,
      origin: chosen.origin,
      service,
      notes: chosen.notes,
      stop: async () => {
        await service.stop('stack stop');
        await chosen.stop();
      },
    };
  } catch (error) {
    await chosen.stop();
    throw error;
  }
}
