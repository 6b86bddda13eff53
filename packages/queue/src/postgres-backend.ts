import { createHash } from 'node:crypto';
import { type PostgresPoolConfig, runMigrations } from 'bullmq';
import pg from 'pg';
import { migrateStateStore } from './state/postgres-state-store.js';

// What the PostgreSQL backend needs beyond BullMQ's classes: the namespace → schema rule, the connection
// profiles, and the explicit migration step run once at engine start (never implicitly per connection).

export type PostgresProfile = 'producer' | 'worker';

/** PostgreSQL identifiers are at most 63 bytes. */
const MAX_SCHEMA_LENGTH = 63;

/**
 * The schema that holds a namespace's queues and state. Redis uses the namespace as a key prefix; PostgreSQL
 * uses it as a schema. Identifiers are folded to `[a-z0-9_]` (other characters become `_`, a leading digit
 * gets `n` in front), so `engram` stays `engram` and `engram-test-q-1a2b` becomes `engram_test_q_1a2b`.
 * Namespaces that differ only in those characters share a schema; over 63 characters, the name is cut and
 * a hash of the whole namespace appended so distinct long namespaces stay distinct.
 */
export function postgresSchemaFor(namespace: string): string {
  let schema = namespace.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  if (!/^[a-z_]/.test(schema)) schema = `n${schema}`;
  if (schema.length > MAX_SCHEMA_LENGTH) {
    const hash = createHash('sha256').update(namespace).digest('hex').slice(0, 10);
    schema = `${schema.slice(0, MAX_SCHEMA_LENGTH - hash.length - 1)}_${hash}`;
  }
  return schema;
}

/**
 * node-postgres pool settings per profile, in the spirit of the Redis ones:
 * producer (agent replicas): a short connect timeout and a bounded query wait, few connections, so an
 *   unreachable database costs an enqueue at most a few seconds and never hangs a turn;
 * worker: patient connects, TCP keepalive; pg.Pool opens a fresh connection for the next command after an
 *   outage and BullMQ rebuilds its LISTEN client, so workers resume on their own.
 */
export function postgresPoolConfig(url: string, profile: PostgresProfile): pg.PoolConfig {
  if (profile === 'producer') {
    return {
      connectionString: url,
      connectionTimeoutMillis: 3_000,
      query_timeout: 5_000,
      max: 4,
      idleTimeoutMillis: 30_000,
    };
  }
  return {
    connectionString: url,
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
    max: 10,
    idleTimeoutMillis: 30_000,
  };
}

/** BullMQ's `connection` option for the PostgreSQL backend: the profile's pool in the namespace's schema. */
export function bullmqPostgresConnection(
  url: string,
  profile: PostgresProfile,
  schema: string,
): PostgresPoolConfig {
  // skipMigrations: classes only check the schema is compatible; prepareBackend migrated it once at start.
  return { ...(postgresPoolConfig(url, profile) as PostgresPoolConfig), schema, skipMigrations: true };
}

export interface PreparedPostgres {
  schema: string;
  /** BullMQ's schema version after migrating. */
  bullmqSchemaVersion: number;
  /** The Engram state tables' version after migrating. */
  stateSchemaVersion: number;
}

/**
 * Runs BullMQ's migrations and the state-table migrations for `schema`, each in one transaction under an
 * advisory lock (many processes starting together migrate once; later starters no-op).
 */
export async function migratePostgres(url: string, schema: string): Promise<PreparedPostgres> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    const bullmqSchemaVersion = await runMigrations(client, schema);
    const stateSchemaVersion = await migrateStateStore(client, schema);
    return { schema, bullmqSchemaVersion, stateSchemaVersion };
  } finally {
    await client.end().catch(() => {});
  }
}
