import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { quoteSchemaName } from 'bullmq';
import pg from 'pg';
import { expect, inject, it } from 'vitest';
import { dropPostgresNamespace } from '../backends.test-helpers.js';
import { prepareBackend } from '../engine.js';
import { postgresPoolConfig, postgresSchemaFor } from '../postgres-backend.js';
import { PostgresStateStore } from './postgres-state-store.js';

// The PostgreSQL backend's fencing counters are bounded like Redis fence keys: a row whose lease nobody took
// for FENCE_TTL_MS is pruned by the sweep; a recently taken one, and one whose lease is live, are kept. The run's
// PostgreSQL, in a namespace (schema) of its own.

it('prunes fence rows not taken for the fence TTL, keeps recent and live ones', async () => {
  const url = inject('postgresUrl');
  const namespace = uniquePrefix('fences');
  const fences = `${quoteSchemaName(postgresSchemaFor(namespace))}.engram_fence`;
  const store = new PostgresStateStore(postgresPoolConfig(url, 'worker'), postgresSchemaFor(namespace));
  const admin = new pg.Client({ connectionString: url });
  try {
    await prepareBackend({ kind: 'postgres', url, implicit: false }, namespace);
    await admin.connect();
    const old = await store.acquireLease('old', 'a', 60_000);
    await store.releaseLease('old', 'a', old!.token);
    const liveOld = await store.acquireLease('live-old', 'a', 60_000);
    const recent = await store.acquireLease('recent', 'a', 60_000);
    await store.releaseLease('recent', 'a', recent!.token);
    // Eight days ago, for two of them (one of which still has a live lease).
    await admin.query(
      `UPDATE ${fences} SET taken_at = now() - interval '8 days' WHERE key IN ('old', 'live-old')`,
    );
    expect(await store.sweep()).toMatchObject({ fences: 1 });
    const { rows } = await admin.query<{ key: string }>(`SELECT key FROM ${fences} ORDER BY key`);
    expect(rows.map((r) => r.key)).toEqual(['live-old', 'recent']);
    // A pruned counter restarts at 1; the live lease's holder still renews with its token.
    expect((await store.acquireLease('old', 'b', 60_000))?.token).toBe(1);
    expect(await store.renewLease('live-old', 'a', liveOld!.token, 60_000)).toBe(true);
  } finally {
    await store.close().catch(() => {});
    await admin.end().catch(() => {});
    await dropPostgresNamespace(namespace).catch(() => {});
  }
});
