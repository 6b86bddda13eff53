import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../embedded-postgres.js';
import { prepareBackend } from '../engine.js';
import { postgresPoolConfig } from '../postgres-backend.js';
import { PostgresStateStore } from './postgres-state-store.js';

// Regression: a PostgreSQL server that dies while acquireLease holds a pooled client in its transaction must
// surface as a rejected call, never as an uncaught exception that kills the worker process.

it('a server stopped during acquireLease rejects the call instead of crashing the process', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'engram-pg-outage-'));
  chmodSync(dir, 0o755);
  const server = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), durable: false });
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown) => uncaught.push(e);
  process.on('uncaughtException', onUncaught);
  const blocker = new pg.Client({ connectionString: server.url });
  blocker.on('error', () => {});
  const store = new PostgresStateStore(postgresPoolConfig(server.url, 'worker'), 'outage');
  try {
    await prepareBackend({ kind: 'postgres', url: server.url, implicit: false }, 'outage');
    await blocker.connect();
    // Hold the lease row locked so acquireLease waits inside its transaction.
    await blocker.query('BEGIN');
    await blocker.query(
      `INSERT INTO outage.engram_lease (key, holder, token, expires_at) VALUES ('k','x',0,now()) ON CONFLICT (key) DO UPDATE SET holder='x'`,
    );
    const pending = store.acquireLease('k', 'b', 60_000).then(
      () => 'resolved',
      (e: Error) => e,
    );
    await new Promise((r) => setTimeout(r, 300));
    await server.stop();
    const result = await pending;
    await new Promise((r) => setTimeout(r, 300));
    expect(result).toBeInstanceOf(Error);
    expect(uncaught).toEqual([]);
  } finally {
    process.off('uncaughtException', onUncaught);
    await store.close().catch(() => {});
    await blocker.end().catch(() => {});
    await server.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
});
