import type pg from 'pg';

// The service's schema, as numbered migrations applied in order under an advisory lock (so replicas starting
// together apply each exactly once). A migration is never edited after release: add the next number instead.

export interface Migration {
  version: number;
  name: string;
  sql: (schema: string) => string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'repositories, entries and entry history',
    sql: (s) => `
      CREATE TABLE ${s}.repositories (
        tenant_id   text        NOT NULL,
        repo        text        NOT NULL,
        -- Bumped by every PUT that changed at least one entry; entries record the version that wrote them.
        version     bigint      NOT NULL DEFAULT 0,
        -- The store checksum (ETag) of the current entries; compared under the row lock by If-Match.
        checksum    text        NOT NULL,
        entry_count integer     NOT NULL DEFAULT 0,
        total_bytes bigint      NOT NULL DEFAULT 0,
        created_at  timestamptz NOT NULL DEFAULT now(),
        updated_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, repo)
      );
      CREATE TABLE ${s}.entries (
        tenant_id  text        NOT NULL,
        repo       text        NOT NULL,
        key        text        NOT NULL,
        content    text        NOT NULL,
        checksum   text        NOT NULL,
        bytes      integer     NOT NULL,
        version    bigint      NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, repo, key),
        FOREIGN KEY (tenant_id, repo) REFERENCES ${s}.repositories (tenant_id, repo) ON DELETE CASCADE
      );
      -- Every content an entry ever had, by repository version: an audit trail and a way back.
      CREATE TABLE ${s}.entry_versions (
        tenant_id  text        NOT NULL,
        repo       text        NOT NULL,
        key        text        NOT NULL,
        version    bigint      NOT NULL,
        content    text        NOT NULL,
        checksum   text        NOT NULL,
        bytes      integer     NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, repo, key, version),
        FOREIGN KEY (tenant_id, repo) REFERENCES ${s}.repositories (tenant_id, repo) ON DELETE CASCADE
      );`,
  },
];

/** Creates `schema` if needed and applies the migrations it lacks; returns the versions applied now. */
export async function migrate(client: pg.PoolClient, schema: string): Promise<number[]> {
  const s = quoteIdent(schema);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`engram-team-memory:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${s}.migrations (
         version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${s}.migrations`);
    const done = new Set(rows.map((r) => r.version));
    const applied: number[] = [];
    for (const m of MIGRATIONS) {
      if (done.has(m.version)) continue;
      await client.query(m.sql(s));
      await client.query(`INSERT INTO ${s}.migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      applied.push(m.version);
    }
    await client.query('COMMIT');
    return applied;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/** A schema name from configuration, quoted; only [a-z0-9_] so it is also a plain identifier. */
export function quoteIdent(name: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) {
    throw new TypeError(
      `Invalid schema name "${name}": use 1-63 characters of [a-z0-9_], not starting with a digit.`,
    );
  }
  return `"${name}"`;
}
