import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalRedis, startLocalRedis } from '@engram/queue/local-redis';
import type { Closer } from './bullmq-helpers.js';

/**
 * A redis-server of the test's own, in a fresh temporary directory, for tests that stop, restart or
 * reconfigure it (so no other test is disturbed): stopped and its directory removed when `closer` closes.
 */
export async function startPrivateRedis(
  closer: Closer,
  opts: { prefix?: string; persist?: boolean } = {},
): Promise<LocalRedis> {
  const dir = mkdtempSync(join(tmpdir(), opts.prefix ?? 'engram-private-redis-'));
  closer.defer(async () => rmSync(dir, { recursive: true, force: true }));
  const redis = await startLocalRedis({ dir, ...(opts.persist ? { persist: true } : {}) });
  closer.defer(() => redis.stop());
  return redis;
}
