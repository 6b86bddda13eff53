import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { TEST_BACKENDS } from './backends.test-helpers.js';
import { inspectBackend } from './diagnostics.js';
import { startLocalRedis } from './local-redis.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

describe('inspectBackend on Redis', () => {
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

describe('inspectBackend on PostgreSQL', () => {
  const backend = TEST_BACKENDS.find(([kind]) => kind === 'postgres')![1];

  it('reports a fresh schema as not migrated yet (a note, not a problem), then as migrated once prepared', async () => {
    const namespace = uniquePrefix('diag');
    const before = await inspectBackend(backend.config(), 3_000, namespace);
    expect(before.reachable).toBe(true);
    expect(before.version).toMatch(/^\d+\.\d+/);
    expect(before.schema).toBe(namespace.replaceAll('-', '_'));
    expect(before.migrated).toBe(false);
    expect(before.schemaVersion?.found).toBe(0);
    expect(before.problems).toEqual([]);
    expect(before.notes.join(' ')).toContain('migrates it');
    expect(before.notes.join(' ')).toContain('Redis-only');

    await backend.prepare(namespace, closer);
    const after = await inspectBackend(backend.config(), 3_000, namespace);
    expect(after.migrated).toBe(true);
    expect(after.schemaVersion?.found).toBe(after.schemaVersion?.expected);
    expect(after.durability?.fsync).toBe(true);
    expect(after.problems).toEqual([]);
  });

  it('names the fix when the schema was migrated by a newer, incompatible BullMQ', async () => {
    const namespace = uniquePrefix('diag');
    await backend.prepare(namespace, closer);
    const client = new pg.Client({ connectionString: inject('postgresUrl') });
    await client.connect();
    closer.defer(() => client.end());
    const schema = namespace.replaceAll('-', '_');
    await client.query(
      `INSERT INTO "${schema}".migration (version, name, min_client_version) VALUES (999, 'from-the-future', 99)`,
    );
    const report = await inspectBackend(backend.config(), 3_000, namespace);
    expect(report.reachable).toBe(true);
    expect(report.problems.join(' ')).toContain('upgrade Engram');
  });

  it('reports an unreachable server without throwing and hides the password', async () => {
    const report = await inspectBackend(
      { kind: 'postgres', url: 'postgres://engram:hunter2@127.0.0.1:1/engram', implicit: false },
      500,
    );
    expect(report.reachable).toBe(false);
    expect(report.url).not.toContain('hunter2');
    expect(report.problems.join(' ')).not.toContain('hunter2');
    expect(report.problems[0]).toContain('Cannot reach PostgreSQL');
  });

  it('says when the credentials are wrong', async () => {
    const url = new URL(inject('postgresUrl'));
    url.password = 'wrong-password';
    const report = await inspectBackend({ kind: 'postgres', url: url.toString(), implicit: false }, 3_000);
    expect(report.reachable).toBe(false);
    expect(report.problems[0]).toContain('refused the credentials');
  });
});
