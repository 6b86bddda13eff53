import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { findRedisServer, RedisServerError, startLocalRedis } from './local-redis.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()!();
});

describe('local redis-server launcher', () => {
  it('starts on a free port with noeviction and keeps data across a restart when persistent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'engram-local-redis-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const redis = await startLocalRedis({ dir, persist: true });
    cleanup.push(() => redis.stop());
    const client = new Redis(redis.url, { maxRetriesPerRequest: null });
    cleanup.push(() => void client.disconnect());
    expect(await client.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
    await client.set('k', 'v');
    await redis.stop();
    expect(redis.isRunning()).toBe(false);
    await redis.start();
    expect(await client.get('k')).toBe('v');
  });

  it('fails with a typed error that says how to install redis-server when none is on PATH', async () => {
    expect(findRedisServer('/nonexistent')).toBeUndefined();
    const saved = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      const missing = await startLocalRedis({ dir: tmpdir() }).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(RedisServerError);
      expect((missing as RedisServerError).code).toBe('REDIS_SERVER_NOT_FOUND');
      expect((missing as Error).message).toContain('apt-get install -y redis-server');
    } finally {
      process.env.PATH = saved;
    }
  });
});
