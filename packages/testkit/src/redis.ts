import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { findRedisServer, type LocalRedis, startLocalRedis } from '@engram/queue/local-redis';

// Provides a real Redis for tests: REDIS_URL, else a redis-server binary on PATH on a free port, else a
// Testcontainers Redis when a container engine answers (first when TESTKIT_PREFER_CONTAINERS=1), else a failure
// that says what to do. README.md's Tests section states this order.

export type RedisSource = 'env' | 'testcontainers' | 'redis-server';

export interface ProvisionedRedis {
  url: string;
  source: RedisSource;
  stop(): Promise<void>;
}

export class NoRedisAvailableError extends EngramError {
  constructor() {
    super(
      'NO_REDIS_AVAILABLE',
      'Integration tests need a real Redis 7 and none was found. Do one of: set REDIS_URL=redis://host:port; ' +
        'start a container engine (Docker/Podman) for Testcontainers; or install redis-server ' +
        '(Debian/Ubuntu: `apt-get install -y redis-server`, macOS: `brew install redis`).',
      { retryable: false },
    );
  }
}

async function containerEngineAnswers(timeoutMs: number): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    const probe = getContainerRuntimeClient().then(
      () => true,
      () => false,
    );
    const timeout = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref());
    return await Promise.race([probe, timeout]);
  } catch {
    return false;
  }
}

export async function provisionRedis(env: NodeJS.ProcessEnv = process.env): Promise<ProvisionedRedis> {
  if (env.REDIS_URL) return { url: env.REDIS_URL, source: 'env', stop: async () => {} };

  const binary = findRedisServer(env.PATH);
  // Only probe for a container engine when one could plausibly exist; the probe costs seconds otherwise.
  if (env.TESTKIT_PREFER_CONTAINERS === '1' || !binary) {
    if (await containerEngineAnswers(5_000)) {
      const { RedisContainer } = await import('@testcontainers/redis');
      const container = await new RedisContainer('redis:7-alpine')
        .withCommand(['redis-server', '--maxmemory-policy', 'noeviction', '--save', '', '--appendonly', 'no'])
        .start();
      return {
        url: container.getConnectionUrl(),
        source: 'testcontainers',
        stop: async () => void (await container.stop()),
      };
    }
  }
  if (binary) {
    const dir = mkdtempSync(join(tmpdir(), 'engram-test-redis-'));
    const redis: LocalRedis = await startLocalRedis({ dir, binary });
    return {
      url: redis.url,
      source: 'redis-server',
      stop: async () => {
        await redis.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  throw new NoRedisAvailableError();
}
