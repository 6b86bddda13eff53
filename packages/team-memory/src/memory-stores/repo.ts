import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { quoteIdent } from '../server/migrations.js';
import { invalid, MemoryStoreApiError, notFound } from './errors.js';
import { LIMITS } from './limits.js';
import { ancestorsOf } from './paths.js';
import type { Actor, Precondition } from './schemas.js';

// The Memory Stores data in PostgreSQL (the team-memory database, its own tables). Every query names the
// tenant: a store id of another tenant is simply not found. Writes to one store serialise on the store's row
// (SELECT … FOR UPDATE), so path-conflict checks, the per-store memory cap and preconditions see a stable store.

export type View = 'basic' | 'full';

export interface StoreRow {
  id: string;
  name: string;
  description: string;
  metadata: Record<string, string>;
  archived_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface MemoryRow {
  id: string;
  store_id: string;
  path: string;
  content: string;
  sha: string;
  bytes: number;
  version_id: string;
  created_at: Date;
  updated_at: Date;
}

export interface VersionRow {
  id: string;
  seq: string;
  store_id: string;
  memory_id: string;
  operation: 'created' | 'modified' | 'deleted';
  path: string | null;
  content: string | null;
  sha: string | null;
  bytes: number | null;
  created_by: Actor;
  created_at: Date;
  redacted_at: Date | null;
  redacted_by: Actor | null;
}

const MIGRATION = (s: string) => `
  CREATE TABLE IF NOT EXISTS ${s}.ms_stores (
    tenant_id   text        NOT NULL,
    id          text        PRIMARY KEY,
    seq         bigserial   UNIQUE,
    name        text        NOT NULL,
    description text        NOT NULL DEFAULT '',
    metadata    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    archived_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
  );
  CREATE INDEX IF NOT EXISTS ms_stores_tenant ON ${s}.ms_stores (tenant_id, seq);
  CREATE TABLE IF NOT EXISTS ${s}.ms_memories (
    id         text        PRIMARY KEY,
    store_id   text        NOT NULL REFERENCES ${s}.ms_stores (id) ON DELETE CASCADE,
    path       text        COLLATE "C" NOT NULL,
    content    text        NOT NULL,
    sha        text        NOT NULL,
    bytes      integer     NOT NULL,
    version_id text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (store_id, path)
  );
  CREATE TABLE IF NOT EXISTS ${s}.ms_versions (
    id          text        PRIMARY KEY,
    seq         bigserial   UNIQUE,
    store_id    text        NOT NULL REFERENCES ${s}.ms_stores (id) ON DELETE CASCADE,
    memory_id   text        NOT NULL,
    operation   text        NOT NULL,
    path        text,
    content     text,
    sha         text,
    bytes       integer,
    created_by  jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    redacted_at timestamptz,
    redacted_by jsonb
  );
  CREATE INDEX IF NOT EXISTS ms_versions_store ON ${s}.ms_versions (store_id, seq);
  CREATE INDEX IF NOT EXISTS ms_versions_memory ON ${s}.ms_versions (memory_id, seq);`;

/** Ids in the API's shapes: a prefix and 24 random base62-ish characters. */
export function newId(prefix: 'memstore' | 'mem' | 'memver'): string {
  const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  const bytes = randomBytes(24);
  let out = '';
  for (const b of bytes) out += alphabet[b % 62];
  return `${prefix}_${out}`;
}

export const sha256 = (content: string) => createHash('sha256').update(content, 'utf8').digest('hex');

export interface ListMemoriesQuery {
  pathPrefix: string;
  depth: number;
  limit: number;
  after: string | undefined;
  view: View;
}

export type ListItem = { kind: 'memory'; row: MemoryRow } | { kind: 'prefix'; path: string };

export class MemoryStoresRepo {
  private constructor(
    private readonly pool: pg.Pool,
    private readonly s: string,
    private readonly ownsPool: boolean,
  ) {}

  static async open(opts: { pool?: pg.Pool; connectionString?: string; schema?: string }) {
    const schema = opts.schema ?? 'engram_team_memory';
    const s = quoteIdent(schema);
    const pool = opts.pool ?? new pg.Pool({ connectionString: opts.connectionString, max: 8 });
    if (!opts.pool) pool.on('error', () => {});
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`engram-memory-stores:${schema}`]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
      await client.query(MIGRATION(s));
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
    return new MemoryStoresRepo(pool, s, !opts.pool);
  }

  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }

  private async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const c = await this.pool.connect();
    try {
      await c.query('BEGIN');
      const out = await fn(c);
      await c.query('COMMIT');
      return out;
    } catch (error) {
      await c.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      c.release();
    }
  }

  // ── stores ──────────────────────────────────────────────────────────────────────────────────────────

  async createStore(
    tenant: string,
    f: { name: string; description: string; metadata: Record<string, string> },
  ) {
    const { rows } = await this.pool.query<StoreRow>(
      `INSERT INTO ${this.s}.ms_stores (tenant_id, id, name, description, metadata)
       VALUES ($1, $2, $3, $4, $5) RETURNING *`,
      [tenant, newId('memstore'), f.name, f.description, JSON.stringify(f.metadata)],
    );
    return rows[0]!;
  }

  async getStore(tenant: string, id: string, c: pg.Pool | pg.PoolClient = this.pool, lock = false) {
    const { rows } = await c.query<StoreRow>(
      `SELECT * FROM ${this.s}.ms_stores WHERE tenant_id = $1 AND id = $2${lock ? ' FOR UPDATE' : ''}`,
      [tenant, id],
    );
    if (!rows[0]) throw notFound(`No memory store with id ${JSON.stringify(id)}.`);
    return rows[0];
  }

  async updateStore(
    tenant: string,
    id: string,
    f: { name?: string; description?: string; metadata?: Record<string, string | null> },
  ) {
    return this.tx(async (c) => {
      const store = await this.getStore(tenant, id, c, true);
      if (store.archived_at) throw invalid('The memory store is archived; it cannot be updated.');
      const metadata = { ...store.metadata };
      for (const [k, v] of Object.entries(f.metadata ?? {})) {
        if (v === null) delete metadata[k];
        else metadata[k] = v;
      }
      if (Object.keys(metadata).length > LIMITS.metadataPairs)
        throw invalid(`metadata: more than the limit of ${LIMITS.metadataPairs} key-value pairs.`);
      const { rows } = await c.query<StoreRow>(
        `UPDATE ${this.s}.ms_stores SET name = $3, description = $4, metadata = $5, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 RETURNING *`,
        [tenant, id, f.name ?? store.name, f.description ?? store.description, JSON.stringify(metadata)],
      );
      return rows[0]!;
    });
  }

  async archiveStore(tenant: string, id: string) {
    return this.tx(async (c) => {
      const store = await this.getStore(tenant, id, c, true);
      if (store.archived_at) return store;
      const { rows } = await c.query<StoreRow>(
        `UPDATE ${this.s}.ms_stores SET archived_at = now(), updated_at = now()
         WHERE tenant_id = $1 AND id = $2 RETURNING *`,
        [tenant, id],
      );
      return rows[0]!;
    });
  }

  async deleteStore(tenant: string, id: string) {
    const { rowCount } = await this.pool.query(
      `DELETE FROM ${this.s}.ms_stores WHERE tenant_id = $1 AND id = $2`,
      [tenant, id],
    );
    if (!rowCount) throw notFound(`No memory store with id ${JSON.stringify(id)}.`);
  }

  async listStores(
    tenant: string,
    q: { limit: number; afterSeq: string | undefined; includeArchived: boolean; gte?: Date; lte?: Date },
  ) {
    const params: unknown[] = [tenant, q.afterSeq ?? '0', q.limit + 1];
    let where = 'tenant_id = $1 AND seq > $2';
    if (!q.includeArchived) where += ' AND archived_at IS NULL';
    if (q.gte) where += ` AND created_at >= $${params.push(q.gte)}`;
    if (q.lte) where += ` AND created_at <= $${params.push(q.lte)}`;
    const { rows } = await this.pool.query<StoreRow & { seq: string }>(
      `SELECT * FROM ${this.s}.ms_stores WHERE ${where} ORDER BY seq LIMIT $3`,
      params,
    );
    return rows;
  }

  // ── memories ────────────────────────────────────────────────────────────────────────────────────────

  private async insertVersion(
    c: pg.PoolClient,
    v: {
      store: string;
      memory: string;
      operation: VersionRow['operation'];
      path: string | null;
      content: string | null;
      actor: Actor;
    },
  ): Promise<string> {
    const id = newId('memver');
    await c.query(
      `INSERT INTO ${this.s}.ms_versions (id, store_id, memory_id, operation, path, content, sha, bytes, created_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        id,
        v.store,
        v.memory,
        v.operation,
        v.path,
        v.content,
        v.content === null ? null : sha256(v.content),
        v.content === null ? null : Buffer.byteLength(v.content, 'utf8'),
        JSON.stringify(v.actor),
      ],
    );
    return id;
  }

  /** The memory holding `path` or an ancestor or descendant of it, other than `except`. */
  private async conflictAt(c: pg.PoolClient, store: string, path: string, except?: string) {
    const { rows } = await c.query<{ id: string; path: string }>(
      `SELECT id, path FROM ${this.s}.ms_memories
       WHERE store_id = $1 AND ($2::text IS NULL OR id <> $2)
         AND (path = $3 OR path = ANY($4::text[]) OR left(path, $5) = $6)
       ORDER BY path LIMIT 1`,
      [store, except ?? null, path, ancestorsOf(path), path.length + 1, `${path}/`],
    );
    return rows[0];
  }

  private pathConflict(conflict: { id: string; path: string }, path: string) {
    const how = conflict.path === path ? 'is already used by' : 'overlaps the path of';
    return new MemoryStoreApiError(
      409,
      'memory_path_conflict_error',
      `The path ${JSON.stringify(path)} ${how} memory ${conflict.id} (${JSON.stringify(conflict.path)}).`,
      { conflicting_path: conflict.path, conflicting_memory_id: conflict.id },
    );
  }

  private writable(store: StoreRow) {
    if (store.archived_at)
      throw invalid(`The memory store ${store.id} is archived; its memories cannot be created or updated.`);
  }

  async createMemory(
    tenant: string,
    storeId: string,
    f: { path: string; content: string; precondition?: Precondition; actor: Actor },
  ): Promise<MemoryRow> {
    return this.tx(async (c) => {
      const store = await this.getStore(tenant, storeId, c, true);
      this.writable(store);
      const conflict = await this.conflictAt(c, storeId, f.path);
      if (conflict) {
        // Creating exactly what is there already is the create that already happened (a retried request).
        if (f.precondition?.type !== 'not_exists' && conflict.path === f.path) {
          const existing = await this.memoryByPath(c, storeId, f.path);
          if (existing && existing.content === f.content) return existing;
        }
        throw this.pathConflict(conflict, f.path);
      }
      const { rows: count } = await c.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${this.s}.ms_memories WHERE store_id = $1`,
        [storeId],
      );
      if (count[0]!.n >= LIMITS.memoriesPerStore)
        throw invalid(`The memory store holds the limit of ${LIMITS.memoriesPerStore} memories per store.`);
      const id = newId('mem');
      const versionId = await this.insertVersion(c, {
        store: storeId,
        memory: id,
        operation: 'created',
        path: f.path,
        content: f.content,
        actor: f.actor,
      });
      const { rows } = await c.query<MemoryRow>(
        `INSERT INTO ${this.s}.ms_memories (id, store_id, path, content, sha, bytes, version_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
        [id, storeId, f.path, f.content, sha256(f.content), Buffer.byteLength(f.content, 'utf8'), versionId],
      );
      return rows[0]!;
    });
  }

  private async memoryByPath(c: pg.PoolClient, store: string, path: string) {
    const { rows } = await c.query<MemoryRow>(
      `SELECT * FROM ${this.s}.ms_memories WHERE store_id = $1 AND path = $2`,
      [store, path],
    );
    return rows[0];
  }

  async getMemory(tenant: string, storeId: string, id: string): Promise<MemoryRow> {
    await this.getStore(tenant, storeId);
    const { rows } = await this.pool.query<MemoryRow>(
      `SELECT * FROM ${this.s}.ms_memories WHERE store_id = $1 AND id = $2`,
      [storeId, id],
    );
    if (!rows[0]) throw notFound(`No memory with id ${JSON.stringify(id)} in store ${storeId}.`);
    return rows[0];
  }

  async updateMemory(
    tenant: string,
    storeId: string,
    id: string,
    f: { path?: string; content?: string; precondition?: Precondition; actor: Actor },
  ): Promise<MemoryRow> {
    return this.tx(async (c) => {
      const store = await this.getStore(tenant, storeId, c, true);
      this.writable(store);
      const { rows: found } = await c.query<MemoryRow>(
        `SELECT * FROM ${this.s}.ms_memories WHERE store_id = $1 AND id = $2`,
        [storeId, id],
      );
      const current = found[0];
      if (!current) throw notFound(`No memory with id ${JSON.stringify(id)} in store ${storeId}.`);
      const path = f.path ?? current.path;
      const content = f.content ?? current.content;
      // Already exactly what was asked: success, whatever the precondition says (the SDK's documented rule).
      if (path === current.path && content === current.content) return current;
      if (f.precondition?.type === 'content_sha256' && f.precondition.content_sha256 !== current.sha)
        throw new MemoryStoreApiError(
          409,
          'memory_precondition_failed_error',
          `The memory's content_sha256 is no longer ${f.precondition.content_sha256}; retrieve it and retry.`,
        );
      if (f.precondition?.type === 'not_exists') throw this.pathConflict(current, current.path);
      if (path !== current.path) {
        const conflict = await this.conflictAt(c, storeId, path, id);
        if (conflict) throw this.pathConflict(conflict, path);
      }
      const versionId = await this.insertVersion(c, {
        store: storeId,
        memory: id,
        operation: 'modified',
        path,
        content,
        actor: f.actor,
      });
      const { rows } = await c.query<MemoryRow>(
        `UPDATE ${this.s}.ms_memories SET path = $3, content = $4, sha = $5, bytes = $6, version_id = $7,
           updated_at = now() WHERE store_id = $1 AND id = $2 RETURNING *`,
        [storeId, id, path, content, sha256(content), Buffer.byteLength(content, 'utf8'), versionId],
      );
      return rows[0]!;
    });
  }

  async deleteMemory(
    tenant: string,
    storeId: string,
    id: string,
    f: { expectedSha?: string; actor: Actor },
  ): Promise<void> {
    await this.tx(async (c) => {
      await this.getStore(tenant, storeId, c, true);
      const { rows } = await c.query<MemoryRow>(
        `SELECT * FROM ${this.s}.ms_memories WHERE store_id = $1 AND id = $2`,
        [storeId, id],
      );
      const current = rows[0];
      if (!current) throw notFound(`No memory with id ${JSON.stringify(id)} in store ${storeId}.`);
      if (f.expectedSha !== undefined && f.expectedSha !== current.sha)
        throw new MemoryStoreApiError(
          409,
          'memory_precondition_failed_error',
          `The memory's content_sha256 is no longer ${f.expectedSha}; nothing was deleted.`,
        );
      await this.insertVersion(c, {
        store: storeId,
        memory: id,
        operation: 'deleted',
        path: current.path,
        content: null,
        actor: f.actor,
      });
      await c.query(`DELETE FROM ${this.s}.ms_memories WHERE store_id = $1 AND id = $2`, [storeId, id]);
    });
  }

  /**
   * One page of memories below `pathPrefix`, in path order (bytewise: the column is COLLATE "C"). With a
   * depth, memories deeper than it roll up into `memory_prefix` items, each counting toward the page.
   */
  async listMemories(
    tenant: string,
    storeId: string,
    q: ListMemoriesQuery,
  ): Promise<{ items: ListItem[]; more: boolean }> {
    await this.getStore(tenant, storeId);
    const cols =
      q.view === 'full'
        ? '*'
        : 'id, store_id, path, NULL AS content, sha, bytes, version_id, created_at, updated_at';
    const prefixLen = q.pathPrefix.length;
    if (q.depth === 0) {
      const { rows } = await this.pool.query<MemoryRow>(
        `SELECT ${cols} FROM ${this.s}.ms_memories
         WHERE store_id = $1 AND left(path, $2) = $3 AND ($4::text IS NULL OR path > $4)
         ORDER BY path LIMIT $5`,
        [storeId, prefixLen, q.pathPrefix, q.after ?? null, q.limit + 1],
      );
      const more = rows.length > q.limit;
      return { items: rows.slice(0, q.limit).map((row) => ({ kind: 'memory', row })), more };
    }
    // Rolled-up listing: walk the paths in order; a run of memories below one rolled-up prefix becomes one item.
    const items: ListItem[] = [];
    let after = q.after ?? null;
    for (;;) {
      const { rows } = await this.pool.query<MemoryRow>(
        `SELECT ${cols} FROM ${this.s}.ms_memories
         WHERE store_id = $1 AND left(path, $2) = $3 AND ($4::text IS NULL OR path > $4)
         ORDER BY path LIMIT 500`,
        [storeId, prefixLen, q.pathPrefix, after],
      );
      for (const row of rows) {
        const rest = row.path.slice(prefixLen).split('/');
        if (rest.length <= q.depth) items.push({ kind: 'memory', row });
        else {
          const marker = `${q.pathPrefix}${rest.slice(0, q.depth).join('/')}/`;
          const last = items.at(-1);
          if (!(last?.kind === 'prefix' && last.path === marker) && !(q.after && marker <= q.after))
            items.push({ kind: 'prefix', path: marker });
        }
        if (items.length > q.limit) return { items: items.slice(0, q.limit), more: true };
      }
      if (rows.length < 500) return { items, more: false };
      after = rows.at(-1)!.path;
    }
  }

  // ── versions ────────────────────────────────────────────────────────────────────────────────────────

  async listVersions(
    tenant: string,
    storeId: string,
    q: {
      limit: number;
      beforeSeq: string | undefined;
      memoryId?: string;
      operation?: string;
      sessionId?: string;
      apiKeyId?: string;
      serviceAccountId?: string;
      gte?: Date;
      lte?: Date;
    },
  ): Promise<VersionRow[]> {
    await this.getStore(tenant, storeId);
    const params: unknown[] = [storeId, q.limit + 1];
    let where = 'store_id = $1';
    // Newest first: an audit log is read from the latest change.
    if (q.beforeSeq) where += ` AND seq < $${params.push(q.beforeSeq)}`;
    if (q.memoryId) where += ` AND memory_id = $${params.push(q.memoryId)}`;
    if (q.operation) where += ` AND operation = $${params.push(q.operation)}`;
    if (q.sessionId) where += ` AND created_by->>'session_id' = $${params.push(q.sessionId)}`;
    if (q.apiKeyId) where += ` AND created_by->>'api_key_id' = $${params.push(q.apiKeyId)}`;
    if (q.serviceAccountId)
      where += ` AND created_by->>'service_account_id' = $${params.push(q.serviceAccountId)}`;
    if (q.gte) where += ` AND created_at >= $${params.push(q.gte)}`;
    if (q.lte) where += ` AND created_at <= $${params.push(q.lte)}`;
    const { rows } = await this.pool.query<VersionRow>(
      `SELECT * FROM ${this.s}.ms_versions WHERE ${where} ORDER BY seq DESC LIMIT $2`,
      params,
    );
    return rows;
  }

  async getVersion(tenant: string, storeId: string, id: string): Promise<VersionRow> {
    await this.getStore(tenant, storeId);
    const { rows } = await this.pool.query<VersionRow>(
      `SELECT * FROM ${this.s}.ms_versions WHERE store_id = $1 AND id = $2`,
      [storeId, id],
    );
    if (!rows[0]) throw notFound(`No memory version with id ${JSON.stringify(id)} in store ${storeId}.`);
    return rows[0];
  }

  /**
   * Redaction clears a version's content, path, size and hash for good. The version a memory currently points
   * at is refused: redacting it would leave the live memory without its history of record.
   */
  async redactVersion(tenant: string, storeId: string, id: string, actor: Actor): Promise<VersionRow> {
    return this.tx(async (c) => {
      await this.getStore(tenant, storeId, c, true);
      const { rows: live } = await c.query(
        `SELECT 1 FROM ${this.s}.ms_memories WHERE store_id = $1 AND version_id = $2`,
        [storeId, id],
      );
      if (live.length > 0)
        throw new MemoryStoreApiError(
          409,
          'conflict_error',
          `Version ${id} holds its memory's current content; update or delete the memory first, then redact it.`,
        );
      const { rows } = await c.query<VersionRow>(
        `UPDATE ${this.s}.ms_versions SET content = NULL, path = NULL, sha = NULL, bytes = NULL,
           redacted_at = COALESCE(redacted_at, now()), redacted_by = COALESCE(redacted_by, $3)
         WHERE store_id = $1 AND id = $2 RETURNING *`,
        [storeId, id, JSON.stringify(actor)],
      );
      if (!rows[0]) throw notFound(`No memory version with id ${JSON.stringify(id)} in store ${storeId}.`);
      return rows[0];
    });
  }
}
