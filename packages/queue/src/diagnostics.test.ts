import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { inspectBackend } from './diagnostics.js';
import { startLocalRedis } from './local-redis.js';

describe('inspectBackend', () => {
  it('reports a reachable noeviction Redis with its version and no problems', async () => {
    const report = await inspectBackend({ kind: 'redis', url: inject('redisUrl'), implicit: false });
    expect(report.reachable).toBe(true);
    expect(report.version).toMatch(/^\d+\.\d+/);
    expect(report.evictionPolicy).toBe('noeviction');
    expect(report.problems).toEqual([]);
  });

  it('names the fix when Redis may evict jobs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'engram-diag-'));
    const redis = await startLocalRedis({ dir });
    const client = new Redis(redis.url);
    try {
      await client.config('SET', 'maxmemory-policy', 'allkeys-lru');
      const report = await inspectBackend({ kind: 'redis', url: redis.url, implicit: false });
      expect(report.evictionPolicy).toBe('allkeys-lru');
      expect(report.problems.join(' ')).toContain('CONFIG SET maxmemory-policy noeviction');
    } finally {
      client.disconnect();
      await redis.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reports an unreachable Redis without throwing and hides the password', async () => {
    const report = await inspectBackend(
      { kind: 'redis', url: 'redis://:hunter2@127.0.0.1:1', implicit: false },
      500,
    );
    expect(report.reachable).toBe(false);
    expect(report.url).not.toContain('hunter2');
    expect(report.problems[0]).toContain('Cannot reach Redis');
  });
});
