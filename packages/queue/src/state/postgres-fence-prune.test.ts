import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../embedded-postgres.js';
import { prepareBackend } from '../engine.js';
import { postgresPoolConfig } from '../postgres-backend.js';
import { PostgresStateStore } from './postgres-state-store.js';

// The PostgreSQL backend's fencing counters are bounded like Redis fence keys: a row whose lease nobody took
// for FENCE_TTL_MS is pruned by the sweep; a recently taken one, and one whose lease is live, are kept.

it('prunes fence rows not taken for the fence TTL, keeps recent and live ones', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'engram-pg-fence-'));
  chmodSync(dir, 0o755);
  const server = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), durable: false });
  const store = new PostgresStateStore(postgresPoolConfig(server.url, 'worker'), 'fences');
  const admin = new pg.Client({ connectionString: server.url });
  try {
    await prepareBackend({ kind: 'postgres', url: server.url, implicit: false }, 'fences');
    await admin.connect();
    const old = await store.acquireLease('old', 'a', 60_000);
    await store.releaseLease('old', 'a', old!.token);
    const liveOld = await store.acquireLease('live-old', 'a', 60_000);
    const recent = await store.acquireLease('recent', 'a', 60_000);
    await store.releaseLease('recent', 'a', recent!.token);
    // Eight days ago, for two of them (one of which still has a live lease).
    await admin.query(
      `UPDATE fences.engram_fence SET taken_at = now() - interval '8 days' WHERE key IN ('old', 'live-old')`,
    );
    expect(await store.sweep()).toMatchObject({ fences: 1 });
    const { rows } = await admin.query<{ key: string }>('SELECT key FROM fences.engram_fence ORDER BY key');
    expect(rows.map((r) => r.key)).toEqual(['live-old', 'recent']);
    // A pruned counter restarts at 1; the live lease's holder still renews with its token.
    expect((await store.acquireLease('old', 'b', 60_000))?.token).toBe(1);
    expect(await store.renewLease('live-old', 'a', liveOld!.token, 60_000)).toBe(true);
  } finally {
    await store.close().catch(() => {});
    await admin.end().catch(() => {});
    await server.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
});
