import pg from 'pg';
import { hashContent, storeChecksum } from '../contract.js';
import { migrate, quoteIdent } from './migrations.js';

// Team memory entries in PostgreSQL, per tenant and repository. A PUT is one transaction that locks the
// repository's row (SELECT … FOR UPDATE), so concurrent PUTs of one repository are serialised and the
// If-Match comparison with the current checksum is a compare-and-set: no lost update.

export const DEFAULT_SCHEMA = 'engram_team_memory';

export interface RepoMeta {
  tenantId: string;
  repo: string;
  version: number;
  checksum: string;
  lastModified: string;
}

export interface RepoSnapshot extends RepoMeta {
  entries: Record<string, string>;
  entryChecksums: Record<string, string>;
}

export interface RepoHashes extends RepoMeta {
  entryChecksums: Record<string, string>;
}

export type UpsertResult =
  | { ok: true; meta: RepoMeta; changedKeys: string[] }
  | { ok: false; reason: 'precondition-failed'; current: RepoMeta | undefined }
  | { ok: false; reason: 'too-many-entries'; maxEntries: number; receivedEntries: number }
  | { ok: false; reason: 'too-many-repositories'; maxRepositories: number }
  | { ok: false; reason: 'tenant-bytes-exceeded'; maxTenantBytes: number; tenantBytes: number };

export interface UpsertOptions {
  /** The checksum the client based its change on (from If-Match); `*` = any existing store; undefined = none. */
  ifMatch?: string | undefined;
  /** Entries the repository may hold after the upsert. */
  maxEntries: number;
  /** Repositories the tenant may hold; a PUT creating one more is refused. */
  maxRepositories?: number;
  /** Bytes of entry content the tenant may hold over all its repositories after the upsert. */
  maxTenantBytes?: number;
}

export interface TeamMemoryStoreOptions {
  /** A pool to use (not closed by `close()`), or a connection string to open one. */
  pool?: pg.Pool;
  connectionString?: string;
  /** PostgreSQL schema for the tables (default engram_team_memory). */
  schema?: string;
}

export class TeamMemoryStore {
  private constructor(
    private readonly pool: pg.Pool,
    private readonly s: string,
    private readonly ownsPool: boolean,
  ) {}

  /** Connects and applies pending migrations. */
  static async open(options: TeamMemoryStoreOptions): Promise<TeamMemoryStore> {
    const schema = options.schema ?? DEFAULT_SCHEMA;
    const s = quoteIdent(schema);
    if (!options.pool && !options.connectionString) {
      throw new TypeError('TeamMemoryStore.open needs a pool or a connectionString.');
    }
    const pool = options.pool ?? new pg.Pool({ connectionString: options.connectionString, max: 8 });
    // An idle client's connection error must not crash the process; the next query reports it.
    if (!options.pool) pool.on('error', () => {});
    const client = await pool.connect();
    try {
      await migrate(client, schema);
    } finally {
      client.release();
    }
    return new TeamMemoryStore(pool, s, !options.pool);
  }

  async get(tenantId: string, repo: string): Promise<RepoSnapshot | undefined> {
    const meta = await this.meta(this.pool, tenantId, repo);
    if (!meta) return undefined;
    const { rows } = await this.pool.query<{ key: string; content: string; checksum: string }>(
      `SELECT key, content, checksum FROM ${this.s}.entries WHERE tenant_id = $1 AND repo = $2 ORDER BY key`,
      [tenantId, repo],
    );
    const entries: Record<string, string> = {};
    const entryChecksums: Record<string, string> = {};
    for (const row of rows) {
      entries[row.key] = row.content;
      entryChecksums[row.key] = row.checksum;
    }
    return { ...meta, entries, entryChecksums };
  }

  async hashes(tenantId: string, repo: string): Promise<RepoHashes | undefined> {
    const meta = await this.meta(this.pool, tenantId, repo);
    if (!meta) return undefined;
    return { ...meta, entryChecksums: await this.entryChecksums(this.pool, tenantId, repo) };
  }

  /** Upserts `entries` (keys absent from it are kept). Keys and sizes must already be validated. */
  async upsert(
    tenantId: string,
    repo: string,
    entries: Readonly<Record<string, string>>,
    options: UpsertOptions,
  ): Promise<UpsertResult> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const tenantLimits = options.maxRepositories !== undefined || options.maxTenantBytes !== undefined;
      // Per-tenant limits count over all the tenant's repositories: PUTs of one tenant that could change those
      // counts are serialised by a transaction-scoped lock on the tenant, so two cannot both pass the check.
      if (tenantLimits) {
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`${this.s}:${tenantId}`]);
      }
      // Create the row on first use without racing another first PUT, then hold it for the transaction.
      const inserted = await client.query(
        `INSERT INTO ${this.s}.repositories (tenant_id, repo, checksum) VALUES ($1, $2, $3)
         ON CONFLICT (tenant_id, repo) DO NOTHING RETURNING repo`,
        [tenantId, repo, storeChecksum({})],
      );
      if (inserted.rowCount === 1 && options.maxRepositories !== undefined) {
        const count = await client.query<{ n: string }>(
          `SELECT count(*) AS n FROM ${this.s}.repositories WHERE tenant_id = $1`,
          [tenantId],
        );
        if (Number(count.rows[0]!.n) > options.maxRepositories) {
          await client.query('ROLLBACK');
          return { ok: false, reason: 'too-many-repositories', maxRepositories: options.maxRepositories };
        }
      }
      const locked = await client.query<{ version: string; checksum: string; entry_count: number }>(
        `SELECT version, checksum, entry_count FROM ${this.s}.repositories
         WHERE tenant_id = $1 AND repo = $2 FOR UPDATE`,
        [tenantId, repo],
      );
      const row = locked.rows[0]!;
      const existed = Number(row.version) > 0;
      if (options.ifMatch !== undefined) {
        const matches = options.ifMatch === '*' ? existed : existed && options.ifMatch === row.checksum;
        if (!matches) {
          await client.query('ROLLBACK');
          return {
            ok: false,
            reason: 'precondition-failed',
            current: await this.meta(this.pool, tenantId, repo),
          };
        }
      }
      const current = await this.entryChecksums(client, tenantId, repo);
      const keys = Object.keys(entries).sort();
      const newKeys = keys.filter((k) => current[k] === undefined).length;
      const receivedEntries = Object.keys(current).length + newKeys;
      if (receivedEntries > options.maxEntries) {
        await client.query('ROLLBACK');
        return { ok: false, reason: 'too-many-entries', maxEntries: options.maxEntries, receivedEntries };
      }
      const changed = keys.filter((k) => current[k] !== hashContent(entries[k]!));
      if (options.maxTenantBytes !== undefined && changed.length > 0) {
        const kept = await client.query<{ n: string }>(
          `SELECT coalesce(sum(bytes), 0) AS n FROM ${this.s}.entries
           WHERE tenant_id = $1 AND NOT (repo = $2 AND key = ANY($3::text[]))`,
          [tenantId, repo, changed],
        );
        const tenantBytes =
          Number(kept.rows[0]!.n) + changed.reduce((n, k) => n + Buffer.byteLength(entries[k]!, 'utf8'), 0);
        if (tenantBytes > options.maxTenantBytes) {
          await client.query('ROLLBACK');
          return {
            ok: false,
            reason: 'tenant-bytes-exceeded',
            maxTenantBytes: options.maxTenantBytes,
            tenantBytes,
          };
        }
      }
      if (changed.length === 0 && existed) {
        // Nothing new: no version bump, no history row; the answer is the current state.
        await client.query('ROLLBACK');
        return { ok: true, meta: (await this.meta(this.pool, tenantId, repo))!, changedKeys: [] };
      }
      // (A first PUT with no entries still creates the empty store, so GET stops answering 404.)
      const version = Number(row.version) + 1;
      const next = { ...current };
      for (const key of changed) {
        const content = entries[key]!;
        const checksum = hashContent(content);
        const bytes = Buffer.byteLength(content, 'utf8');
        next[key] = checksum;
        await client.query(
          `INSERT INTO ${this.s}.entries (tenant_id, repo, key, content, checksum, bytes, version, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, now())
           ON CONFLICT (tenant_id, repo, key) DO UPDATE
             SET content = EXCLUDED.content, checksum = EXCLUDED.checksum, bytes = EXCLUDED.bytes,
                 version = EXCLUDED.version, updated_at = EXCLUDED.updated_at`,
          [tenantId, repo, key, content, checksum, bytes, version],
        );
        await client.query(
          `INSERT INTO ${this.s}.entry_versions (tenant_id, repo, key, version, content, checksum, bytes)
           VALUES ($1, $2, $3, $4, $5, $6, $7)`,
          [tenantId, repo, key, version, content, checksum, bytes],
        );
      }
      await client.query(
        `UPDATE ${this.s}.repositories
            SET version = $3, checksum = $4, updated_at = now(),
                entry_count = (SELECT count(*) FROM ${this.s}.entries WHERE tenant_id = $1 AND repo = $2),
                total_bytes = (SELECT coalesce(sum(bytes), 0) FROM ${this.s}.entries
                                WHERE tenant_id = $1 AND repo = $2)
          WHERE tenant_id = $1 AND repo = $2`,
        [tenantId, repo, version, storeChecksum(next)],
      );
      await client.query('COMMIT');
      const meta = (await this.meta(this.pool, tenantId, repo))!;
      return { ok: true, meta, changedKeys: changed };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /** Every content `key` had, oldest first. */
  async history(
    tenantId: string,
    repo: string,
    key: string,
  ): Promise<Array<{ version: number; checksum: string; content: string }>> {
    const { rows } = await this.pool.query<{ version: string; checksum: string; content: string }>(
      `SELECT version, checksum, content FROM ${this.s}.entry_versions
        WHERE tenant_id = $1 AND repo = $2 AND key = $3 ORDER BY version`,
      [tenantId, repo, key],
    );
    return rows.map((r) => ({ version: Number(r.version), checksum: r.checksum, content: r.content }));
  }

  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }

  private async meta(
    q: pg.Pool | pg.PoolClient,
    tenantId: string,
    repo: string,
  ): Promise<RepoMeta | undefined> {
    const { rows } = await q.query<{ version: string; checksum: string; updated_at: Date }>(
      `SELECT version, checksum, updated_at FROM ${this.s}.repositories
        WHERE tenant_id = $1 AND repo = $2 AND version > 0`,
      [tenantId, repo],
    );
    const row = rows[0];
    if (!row) return undefined;
    return {
      tenantId,
      repo,
      version: Number(row.version),
      checksum: row.checksum,
      lastModified: row.updated_at.toISOString(),
    };
  }

  private async entryChecksums(
    q: pg.Pool | pg.PoolClient,
    tenantId: string,
    repo: string,
  ): Promise<Record<string, string>> {
    const { rows } = await q.query<{ key: string; checksum: string }>(
      `SELECT key, checksum FROM ${this.s}.entries WHERE tenant_id = $1 AND repo = $2 ORDER BY key`,
      [tenantId, repo],
    );
    const out: Record<string, string> = {};
    for (const row of rows) out[row.key] = row.checksum;
    return out;
  }
}
