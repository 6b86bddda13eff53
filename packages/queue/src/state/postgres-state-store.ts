import { quoteSchemaName } from 'bullmq';
import pg from 'pg';
import { FENCE_TTL_MS, StateStoreUnavailableError } from './redis-state-store.js';
import {
  type Lease,
  type LeaseTurn,
  RESERVED_HOLDER_PREFIX,
  type StateStore,
  type Versioned,
} from './state-store.js';

// StateStore on PostgreSQL, in the same schema as the namespace's BullMQ tables. Same contract as
// RedisStateStore: every compound operation is one statement (INSERT … ON CONFLICT … WHERE) or one
// transaction, and every TTL is judged by the database clock (`now()`), never by a client's clock.
//
// Tables (created by migrateStateStore, run explicitly at engine start, never per connection):
//   engram_state  key → JSON text, optional seq (versioned values) and expires_at (TTL); expired rows read
//                 as absent and are swept now and then
//   engram_lease  key → holder, fencing token, expires_at
//   engram_fence  key → last fencing token handed out, and when; pruned 7 days after its lease's last take
//                 (FENCE_TTL_MS, as Redis expires its fence keys), so each session's lease leaves no row forever

interface StateMigration {
  version: number;
  name: string;
  sql: (schema: string) => string;
}

const MIGRATIONS: StateMigration[] = [
  {
    version: 1,
    name: 'state-lease-fence',
    sql: (s) => `
      CREATE TABLE ${s}.engram_state (
        key        text PRIMARY KEY,
        value      text NOT NULL,
        seq        bigint,
        expires_at timestamptz
      );
      CREATE INDEX engram_state_expiring ON ${s}.engram_state (expires_at) WHERE expires_at IS NOT NULL;
      CREATE TABLE ${s}.engram_lease (
        key        text PRIMARY KEY,
        holder     text NOT NULL,
        token      bigint NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE TABLE ${s}.engram_fence (
        key   text PRIMARY KEY,
        token bigint NOT NULL
      );`,
  },
  {
    version: 2,
    name: 'lease-waiters',
    // The line of waiters behind a lease (acquireLeaseInTurn): first come, first served by `seq`.
    sql: (s) => `
      CREATE TABLE ${s}.engram_waiter (
        key       text NOT NULL,
        holder    text NOT NULL,
        seq       bigserial,
        joined_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (key, holder)
      );
      CREATE INDEX engram_waiter_line ON ${s}.engram_waiter (key, seq);`,
  },
  {
    version: 3,
    name: 'fence-taken-at',
    // When each fence was last taken, so rows of leases nobody took for FENCE_TTL_MS can be pruned.
    sql: (s) => `
      ALTER TABLE ${s}.engram_fence ADD COLUMN taken_at timestamptz NOT NULL DEFAULT now();
      CREATE INDEX engram_fence_taken ON ${s}.engram_fence (taken_at);`,
  },
];

export const STATE_SCHEMA_VERSION = MIGRATIONS.at(-1)!.version;

/** Serialises the FIFO lease operations of one key (with hashtext(key) as the second half). */
const LEASE_LINE_LOCK_KEY = 0x454e4753;

/** Serialises concurrent migrators of the same schema (the number spells "ENGR"). */
const STATE_MIGRATION_LOCK_KEY = 0x454e4752;

/**
 * Brings the state tables in `schema` up to STATE_SCHEMA_VERSION, in one transaction under an advisory lock
 * (so many processes starting at once migrate exactly once). `client` must be one session, not a pool.
 * Returns the version the schema is at.
 */
export async function migrateStateStore(client: pg.ClientBase, schema: string): Promise<number> {
  const s = quoteSchemaName(schema);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [STATE_MIGRATION_LOCK_KEY, schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${s}.engram_migration (
         version    integer PRIMARY KEY,
         name       text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const { rows } = await client.query<{ version: number }>(
      `SELECT COALESCE(MAX(version), 0)::int AS version FROM ${s}.engram_migration`,
    );
    const current = rows[0]?.version ?? 0;
    for (const migration of MIGRATIONS) {
      if (migration.version <= current) continue;
      await client.query(migration.sql(s));
      await client.query(`INSERT INTO ${s}.engram_migration (version, name) VALUES ($1, $2)`, [
        migration.version,
        migration.name,
      ]);
    }
    // Expired rows are invisible to every read; dropping them at start keeps the table small.
    if (current > 0) await client.query(`DELETE FROM ${s}.engram_state WHERE expires_at <= now()`);
    await client.query('COMMIT');
    return Math.max(current, STATE_SCHEMA_VERSION);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/** The state tables' version in `schema`: 0 when never migrated. */
export async function stateStoreVersion(client: pg.ClientBase, schema: string): Promise<number> {
  const s = quoteSchemaName(schema);
  const { rows } = await client.query<{ exists: boolean }>('SELECT to_regclass($1) IS NOT NULL AS exists', [
    `${s}.engram_migration`,
  ]);
  if (!rows[0]?.exists) return 0;
  const res = await client.query<{ version: number }>(
    `SELECT COALESCE(MAX(version), 0)::int AS version FROM ${s}.engram_migration`,
  );
  return res.rows[0]?.version ?? 0;
}

const LIVE = '(expires_at IS NULL OR expires_at > now())';
/** Milliseconds from `$n` as an interval; a TTL of 0 means none. */
const expiry = (n: number) =>
  `CASE WHEN $${n}::bigint > 0 THEN now() + $${n}::bigint * interval '1 millisecond' END`;
const EXPIRES_MS = 'floor(extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms';

/** SQLSTATE classes that mean the connection or server is gone rather than that the statement was wrong. */
function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code ?? '';
  return (
    code.startsWith('08') ||
    code.startsWith('57P') ||
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND'].includes(code) ||
    /Connection terminated|timeout/i.test((error as Error | null)?.message ?? '')
  );
}

export class PostgresStateStore implements StateStore {
  readonly engine = 'postgres' as const;
  private readonly pool: pg.Pool;
  private readonly kv: string;
  private readonly leases: string;
  private readonly fences: string;
  private readonly waiters: string;
  /** Set after a successful round trip; cleared when the pool reports a lost connection. */
  private healthy = false;
  private writes = 0;

  /**
   * `pool` carries the connection profile (timeouts, pool size); `schema` is the namespace's schema, which
   * prepareBackend/migrateStateStore must have migrated.
   */
  constructor(
    pool: pg.PoolConfig,
    private readonly schema: string,
  ) {
    const s = quoteSchemaName(schema);
    this.kv = `${s}.engram_state`;
    this.leases = `${s}.engram_lease`;
    this.fences = `${s}.engram_fence`;
    this.waiters = `${s}.engram_waiter`;
    this.pool = new pg.Pool(pool);
    // An idle client dropping (server restart) is reported here; callers see it as a failed command.
    this.pool.on('error', () => {
      this.healthy = false;
    });
  }

  private async query<R extends pg.QueryResultRow>(
    text: string,
    params: unknown[],
  ): Promise<pg.QueryResult<R>> {
    try {
      const result = await this.pool.query<R>(text, params);
      this.healthy = true;
      return result;
    } catch (error) {
      if (isConnectionError(error)) this.healthy = false;
      throw error;
    }
  }

  /** Expired rows are already invisible; deleting them now and then keeps the table from growing. */
  private maybeSweep(): void {
    if (++this.writes % 256 !== 0) return;
    this.sweep().catch(() => {});
  }

  /**
   * Deletes expired state rows and fences not taken for `fenceTtlMs` (default FENCE_TTL_MS, as Redis expires
   * its fence keys) whose lease is not live. A pruned fence restarts at 1: safe for the reason it is on Redis
   * (a holder is checked by name and token, names are unique per take, no lease lives longer than seconds).
   */
  async sweep(fenceTtlMs = FENCE_TTL_MS): Promise<{ state: number; fences: number }> {
    const state = await this.query(`DELETE FROM ${this.kv} WHERE expires_at <= now()`, []);
    const fences = await this.query(
      `DELETE FROM ${this.fences} f WHERE f.taken_at <= now() - $1::bigint * interval '1 millisecond'
         AND NOT EXISTS (SELECT 1 FROM ${this.leases} l WHERE l.key = f.key AND l.expires_at > now())`,
      [fenceTtlMs],
    );
    return { state: state.rowCount ?? 0, fences: fences.rowCount ?? 0 };
  }

  async getJson<T>(key: string): Promise<T | undefined> {
    const { rows } = await this.query<{ value: string }>(
      `SELECT value FROM ${this.kv} WHERE key = $1 AND ${LIVE}`,
      [key],
    );
    return rows[0] ? (JSON.parse(rows[0].value) as T) : undefined;
  }

  async setJson(key: string, value: unknown, ttlMs = 0): Promise<void> {
    // Like Redis SET: replaces the value and its TTL (none when ttlMs is 0) and drops any version.
    await this.query(
      `INSERT INTO ${this.kv} (key, value, seq, expires_at) VALUES ($1, $2, NULL, ${expiry(3)})
       ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, seq = NULL, expires_at = EXCLUDED.expires_at`,
      [key, JSON.stringify(value), ttlMs],
    );
    this.maybeSweep();
  }

  async delete(key: string): Promise<void> {
    await this.query(`DELETE FROM ${this.kv} WHERE key = $1`, [key]);
  }

  async setIfNewer(key: string, seq: number, value: unknown, ttlMs = 0): Promise<boolean> {
    // The row lock taken by ON CONFLICT makes compare-and-set atomic. As in Redis, a ttlMs of 0 keeps the
    // live row's existing TTL; an expired row counts as absent.
    const { rowCount } = await this.query(
      `INSERT INTO ${this.kv} AS cur (key, value, seq, expires_at) VALUES ($1, $2, $3, ${expiry(4)})
       ON CONFLICT (key) DO UPDATE SET
         value = EXCLUDED.value,
         seq = EXCLUDED.seq,
         expires_at = CASE
           WHEN $4::bigint > 0 THEN EXCLUDED.expires_at
           WHEN cur.expires_at <= now() THEN NULL
           ELSE cur.expires_at
         END
       WHERE cur.seq IS NULL OR cur.seq < EXCLUDED.seq OR cur.expires_at <= now()
       RETURNING 1`,
      [key, JSON.stringify(value), seq, ttlMs],
    );
    this.maybeSweep();
    return rowCount === 1;
  }

  async getVersioned<T>(key: string): Promise<Versioned<T> | undefined> {
    const { rows } = await this.query<{ seq: string; value: string }>(
      `SELECT seq, value FROM ${this.kv} WHERE key = $1 AND seq IS NOT NULL AND ${LIVE}`,
      [key],
    );
    const row = rows[0];
    return row ? { seq: Number(row.seq), value: JSON.parse(row.value) as T } : undefined;
  }

  async addCounters(key: string, deltas: Readonly<Record<string, number>>): Promise<void> {
    const entries = Object.entries(deltas).map(([field, n]) => [field, Math.trunc(n)] as const);
    if (entries.length === 0) return;
    // One statement: the row lock taken by ON CONFLICT serialises concurrent adders; the stored object and
    // the deltas are summed field by field. The row lives under its own key space (`counters:`), no TTL.
    await this.query(
      `INSERT INTO ${this.kv} AS cur (key, value, seq, expires_at) VALUES ($1, $2, NULL, NULL)
       ON CONFLICT (key) DO UPDATE SET
         value = (
           SELECT COALESCE(jsonb_object_agg(k, total), '{}'::jsonb)::text FROM (
             SELECT k, SUM(v::numeric) AS total FROM (
               SELECT key AS k, value AS v FROM jsonb_each_text(cur.value::jsonb)
               UNION ALL
               SELECT key, value FROM jsonb_each_text(EXCLUDED.value::jsonb)
             ) AS parts GROUP BY k
           ) AS summed
         ),
         seq = NULL,
         expires_at = NULL`,
      [`counters:${key}`, JSON.stringify(Object.fromEntries(entries))],
    );
  }

  async getCounters(key: string): Promise<Record<string, number>> {
    const { rows } = await this.query<{ value: string }>(
      `SELECT value FROM ${this.kv} WHERE key = $1 AND ${LIVE}`,
      [`counters:${key}`],
    );
    const raw = rows[0] ? (JSON.parse(rows[0].value) as Record<string, unknown>) : {};
    return Object.fromEntries(Object.entries(raw).map(([field, n]) => [field, Number(n)]));
  }

  async joinPresence(key: string, member: string, ttlMs: number): Promise<string[]> {
    // One statement: the row lock taken by ON CONFLICT serialises concurrent joiners. The row (under its own
    // key space, `presence:`) maps each member to when its presence runs out (ms, database clock); expired
    // members are dropped on the way, and the row expires with its longest-lived member.
    const { rows } = await this.query<{ value: string }>(
      `WITH clock AS (SELECT floor(extract(epoch FROM now()) * 1000)::bigint AS ms)
       INSERT INTO ${this.kv} AS cur (key, value, seq, expires_at)
       VALUES ($1, jsonb_build_object($2::text, (SELECT ms FROM clock) + $3::bigint)::text, NULL,
               now() + $3::bigint * interval '1 millisecond')
       ON CONFLICT (key) DO UPDATE SET
         value = (
           SELECT (COALESCE(jsonb_object_agg(m.key, m.value), '{}'::jsonb) || EXCLUDED.value::jsonb)::text
           FROM jsonb_each(CASE WHEN cur.expires_at <= now() THEN '{}'::jsonb ELSE cur.value::jsonb END) AS m
           WHERE m.key <> $2::text AND m.value::text::bigint > (SELECT ms FROM clock)
         ),
         seq = NULL,
         expires_at = GREATEST(CASE WHEN cur.expires_at > now() THEN cur.expires_at END, EXCLUDED.expires_at)
       RETURNING value`,
      [`presence:${key}`, member, Math.max(1, Math.trunc(ttlMs))],
    );
    this.maybeSweep();
    const members = rows[0] ? Object.keys(JSON.parse(rows[0].value) as Record<string, number>) : [];
    return members.filter((m) => m !== member);
  }

  async leavePresence(key: string, member: string): Promise<void> {
    await this.query(`UPDATE ${this.kv} SET value = (value::jsonb - $2::text)::text WHERE key = $1`, [
      `presence:${key}`,
      member,
    ]);
    // Judged on the row as it is now: a member that joined in between keeps it.
    await this.query(`DELETE FROM ${this.kv} WHERE key = $1 AND value::jsonb = '{}'::jsonb`, [
      `presence:${key}`,
    ]);
  }

  async setIfAbsent(key: string, value: unknown, ttlMs: number): Promise<boolean> {
    const { rowCount } = await this.query(
      `INSERT INTO ${this.kv} AS cur (key, value, seq, expires_at) VALUES ($1, $2, NULL, ${expiry(3)})
       ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, seq = NULL, expires_at = EXCLUDED.expires_at
       WHERE cur.expires_at <= now()
       RETURNING 1`,
      [key, JSON.stringify(value), ttlMs],
    );
    this.maybeSweep();
    return rowCount === 1;
  }

  /**
   * Runs `work` in one transaction on one client, discarding the client if its connection broke. A checked-out
   * client is off the pool's error handler: without the listener, the server going away mid-transaction
   * ('Connection terminated unexpectedly') would be an uncaught exception that kills the process.
   */
  private async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: unknown;
    const onError = (error: Error) => {
      broken ??= error;
      this.healthy = false;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      this.healthy = true;
      return result;
    } catch (error) {
      broken = error;
      if (isConnectionError(error)) this.healthy = false;
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.removeListener('error', onError);
      client.release(broken instanceof Error && isConnectionError(broken) ? broken : undefined);
    }
  }

  async acquireLeaseInTurn(
    key: string,
    holder: string,
    ttlMs: number,
    waiterTtlMs: number,
  ): Promise<LeaseTurn> {
    return this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LEASE_LINE_LOCK_KEY, key]);
      await client.query(
        `DELETE FROM ${this.waiters} WHERE key = $1 AND joined_at <= now() - $2::bigint * interval '1 millisecond'`,
        [key, waiterTtlMs],
      );
      const cur = await client.query<{ holder: string; expires_ms: string }>(
        `SELECT holder, ${EXPIRES_MS} FROM ${this.leases} WHERE key = $1 AND expires_at > now()`,
        [key],
      );
      const row = cur.rows[0];
      if (row && row.holder !== `${RESERVED_HOLDER_PREFIX}${holder}`) {
        await client.query(
          `INSERT INTO ${this.waiters} (key, holder) VALUES ($1, $2) ON CONFLICT (key, holder) DO NOTHING`,
          [key, holder],
        );
        const pos = await client.query<{ position: string }>(
          `SELECT count(*) AS position FROM ${this.waiters}
           WHERE key = $1 AND seq < (SELECT seq FROM ${this.waiters} WHERE key = $1 AND holder = $2)`,
          [key, holder],
        );
        return {
          acquired: false as const,
          position: Number(pos.rows[0]?.position ?? 0),
          holder: row.holder,
          expiresAtMs: Number(row.expires_ms),
        };
      }
      const fenced = await client.query<{ token: string }>(
        `INSERT INTO ${this.fences} AS cur (key, token, taken_at) VALUES ($1, 1, now())
         ON CONFLICT (key) DO UPDATE SET token = cur.token + 1, taken_at = now()
         RETURNING token`,
        [key],
      );
      const token = fenced.rows[0]!.token;
      const { rows } = await client.query<{ expires_ms: string }>(
        `INSERT INTO ${this.leases} (key, holder, token, expires_at)
         VALUES ($1, $2, $3, now() + $4::bigint * interval '1 millisecond')
         ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, token = EXCLUDED.token,
           expires_at = EXCLUDED.expires_at
         RETURNING ${EXPIRES_MS}`,
        [key, holder, token, ttlMs],
      );
      await client.query(`DELETE FROM ${this.waiters} WHERE key = $1 AND holder = $2`, [key, holder]);
      return {
        acquired: true as const,
        lease: { holder, token: Number(token), expiresAtMs: Number(rows[0]!.expires_ms) },
      };
    });
  }

  async releaseLeaseToNext(
    key: string,
    holder: string,
    token: number,
    reserveMs: number,
  ): Promise<{ released: boolean; next?: string }> {
    return this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LEASE_LINE_LOCK_KEY, key]);
      const mine = await client.query(
        `SELECT 1 FROM ${this.leases} WHERE key = $1 AND holder = $2 AND token = $3 AND expires_at > now()`,
        [key, holder, token],
      );
      if (mine.rowCount !== 1) return { released: false };
      const next = await client.query<{ holder: string }>(
        `DELETE FROM ${this.waiters} WHERE key = $1 AND seq = (SELECT min(seq) FROM ${this.waiters} WHERE key = $1)
         RETURNING holder`,
        [key],
      );
      const nxt = next.rows[0]?.holder;
      if (!nxt) {
        await client.query(`DELETE FROM ${this.leases} WHERE key = $1`, [key]);
        return { released: true };
      }
      await client.query(
        `UPDATE ${this.leases} SET holder = $2, token = 0, expires_at = now() + $3::bigint * interval '1 millisecond'
         WHERE key = $1`,
        [key, `${RESERVED_HOLDER_PREFIX}${nxt}`, reserveMs],
      );
      return { released: true, next: nxt };
    });
  }

  async acquireLease(key: string, holder: string, ttlMs: number): Promise<Lease | undefined> {
    return this.transaction(async (client) => {
      // Claim the lease row first: a concurrent acquirer blocks on its row lock, then sees it live and gets
      // nothing. Only a successful claim draws a fencing token, so tokens have no gaps (as in Redis).
      const claimed = await client.query(
        `INSERT INTO ${this.leases} AS cur (key, holder, token, expires_at)
         VALUES ($1, $2, 0, now() + $3::bigint * interval '1 millisecond')
         ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
         WHERE cur.expires_at <= now()
         RETURNING key`,
        [key, holder, ttlMs],
      );
      if (claimed.rowCount !== 1) return undefined; // nothing was written: the commit is empty
      const fenced = await client.query<{ token: string }>(
        `INSERT INTO ${this.fences} AS cur (key, token, taken_at) VALUES ($1, 1, now())
         ON CONFLICT (key) DO UPDATE SET token = cur.token + 1, taken_at = now()
         RETURNING token`,
        [key],
      );
      const token = fenced.rows[0]!.token;
      const { rows } = await client.query<{ expires_ms: string }>(
        `UPDATE ${this.leases} SET token = $2 WHERE key = $1 RETURNING ${EXPIRES_MS}`,
        [key, token],
      );
      return { holder, token: Number(token), expiresAtMs: Number(rows[0]!.expires_ms) };
    });
  }

  async renewLease(key: string, holder: string, token: number, ttlMs: number): Promise<boolean> {
    const { rowCount } = await this.query(
      `UPDATE ${this.leases} SET expires_at = now() + $4::bigint * interval '1 millisecond'
       WHERE key = $1 AND holder = $2 AND token = $3 AND expires_at > now()`,
      [key, holder, token, ttlMs],
    );
    return rowCount === 1;
  }

  async releaseLease(key: string, holder: string, token: number): Promise<boolean> {
    const { rowCount } = await this.query(
      `DELETE FROM ${this.leases} WHERE key = $1 AND holder = $2 AND token = $3 AND expires_at > now()`,
      [key, holder, token],
    );
    return rowCount === 1;
  }

  async getLease(key: string): Promise<Lease | undefined> {
    const { rows } = await this.query<{ holder: string; token: string; expires_ms: string }>(
      `SELECT holder, token, ${EXPIRES_MS} FROM ${this.leases} WHERE key = $1 AND expires_at > now()`,
      [key],
    );
    const row = rows[0];
    return row
      ? { holder: row.holder, token: Number(row.token), expiresAtMs: Number(row.expires_ms) }
      : undefined;
  }

  /** A pool connects per query, so a server that is back is reached at once: no `waitMs` needed. */
  async ready(_options?: { waitMs?: number }): Promise<void> {
    if (this.healthy) return;
    // First use, or the last command found the server gone: one round trip, bounded by the profile's
    // connection timeout, that also proves the schema was migrated.
    try {
      await this.query(`SELECT 1 FROM ${this.kv} LIMIT 0`, []);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === '42P01' || code === '3F000') {
        throw new StateStoreUnavailableError(
          `schema "${this.schema}" has no Engram state tables; run the queue migrations at start ` +
            '(openQueueEngine or prepareBackend) before using it',
        );
      }
      throw new StateStoreUnavailableError((error as Error).message);
    }
  }

  async ping(): Promise<void> {
    await this.query('SELECT 1', []);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
