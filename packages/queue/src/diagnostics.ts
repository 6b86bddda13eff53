import { EngramError } from '@engram/errors/engram-error';
import {
  assertSchemaCompatibility,
  LATEST_SCHEMA_VERSION,
  MINIMUM_POSTGRES_VERSION,
  SchemaMigrationRequiredError,
} from 'bullmq';
import pg from 'pg';
import { type QueueBackendConfig, redactUrl } from './backend-config.js';
import { DEFAULT_NAMESPACE } from './engine.js';
import { postgresSchemaFor } from './postgres-backend.js';
import { createRedisClient } from './redis-client.js';
import { STATE_SCHEMA_VERSION, stateStoreVersion } from './state/postgres-state-store.js';

// What `engram doctor` and the worker start-up check ask of the engine: is it reachable, which version, and
// is it configured so that queued jobs cannot silently disappear.

export interface BackendReport {
  kind: QueueBackendConfig['kind'];
  url: string;
  reachable: boolean;
  version?: string;
  /** Redis only: must be `noeviction`, or Redis may evict job keys under memory pressure (lost jobs). */
  evictionPolicy?: string;
  /** Redis only: whether AOF persistence is on (jobs survive a Redis restart). */
  appendOnly?: boolean;
  /** PostgreSQL only: the schema holding the namespace's queues and state. */
  schema?: string;
  /**
   * PostgreSQL only: whether BullMQ's tables and Engram's state tables are at this build's versions. A fresh
   * schema (false) is not a problem: the first Engram process to start migrates it (prepareBackend).
   */
  migrated?: boolean;
  /** PostgreSQL only: BullMQ's schema version found (0 when never migrated) and the one this build ships. */
  schemaVersion?: { found: number; expected: number };
  /** PostgreSQL only: durability settings (fsync off risks corruption; synchronous_commit off only recent loss). */
  durability?: { fsync: boolean; synchronousCommit: string };
  /** Things worth knowing that need no action. */
  notes: string[];
  /** Things that need action, each with its fix. Workers refuse to start while there are any. */
  problems: string[];
}

export class UnsafeBackendError extends EngramError {
  constructor(readonly report: BackendReport) {
    super('QUEUE_BACKEND_UNSAFE', report.problems.join(' '), { retryable: false });
  }
}

/**
 * Checks the backend `config` points at, for `engram doctor` and worker start-up. Never throws: an unreachable
 * or misconfigured engine is reported in `problems`. `namespace` selects the PostgreSQL schema to inspect.
 */
export async function inspectBackend(
  config: QueueBackendConfig,
  timeoutMs = 3_000,
  namespace: string = DEFAULT_NAMESPACE,
): Promise<BackendReport> {
  const report: BackendReport = {
    kind: config.kind,
    url: redactUrl(config.url),
    reachable: false,
    notes: [],
    problems: [],
  };
  if (config.kind === 'postgres') return inspectPostgres(config.url, report, timeoutMs, namespace);
  if (config.topology?.mode === 'cluster') {
    report.notes.push(
      'Redis Cluster: every Engram key shares the namespace hash tag (one slot); the checks ran on one node — ' +
        'set maxmemory-policy noeviction and appendonly on every node.',
    );
  }
  const redis = createRedisClient(config, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    report.reachable = true;
    const info = await redis.info('server');
    report.version = /redis_version:([^\r\n]+)/.exec(info)?.[1];
    const [, policy] = (await redis.config('GET', 'maxmemory-policy')) as [string, string];
    const [, aof] = (await redis.config('GET', 'appendonly')) as [string, string];
    report.evictionPolicy = policy;
    report.appendOnly = aof === 'yes';
    const major = Number(report.version?.split('.')[0]);
    if (Number.isFinite(major) && major < 6) {
      report.problems.push(`Redis ${report.version} is too old: BullMQ needs Redis ≥ 6.2 (7.x recommended).`);
    }
    if (policy !== 'noeviction') {
      report.problems.push(
        `Redis maxmemory-policy is "${policy}"; BullMQ needs "noeviction" or jobs can be evicted and lost. ` +
          'Fix: `redis-cli CONFIG SET maxmemory-policy noeviction` (and set it in redis.conf).',
      );
    }
  } catch (error) {
    report.problems.push(
      `Cannot reach Redis at ${report.url}: ${(error as Error).message}. Start Redis or set REDIS_URL.`,
    );
  } finally {
    redis.disconnect();
  }
  return report;
}

async function inspectPostgres(
  url: string,
  report: BackendReport,
  timeoutMs: number,
  namespace: string,
): Promise<BackendReport> {
  const schema = postgresSchemaFor(namespace);
  report.schema = schema;
  report.notes.push(
    'The eviction-policy and AOF checks are Redis-only: on PostgreSQL, jobs are rows in tables and follow ' +
      "the server's durability settings.",
  );
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    report.reachable = true;
    const { rows } = await client.query<{ version: string; num: string; fsync: string; sync: string }>(
      `SELECT current_setting('server_version') AS version, current_setting('server_version_num') AS num,
              current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS sync`,
    );
    const row = rows[0]!;
    report.version = row.version;
    report.durability = { fsync: row.fsync === 'on', synchronousCommit: row.sync };
    if (Math.floor(Number(row.num) / 10_000) < MINIMUM_POSTGRES_VERSION) {
      report.problems.push(
        `PostgreSQL ${row.version} is too old: BullMQ's PostgreSQL backend needs ≥ ${MINIMUM_POSTGRES_VERSION} ` +
          '(14 or newer recommended). Upgrade the server or use Redis (REDIS_URL).',
      );
      return report;
    }
    if (!report.durability.fsync) {
      report.problems.push(
        'PostgreSQL runs with fsync=off: a crash can corrupt the queue tables. Fix: set `fsync = on` in ' +
          'postgresql.conf and reload.',
      );
    }
    if (row.sync === 'off') {
      report.notes.push(
        'synchronous_commit=off: a server crash may lose the last few hundred ms of enqueues.',
      );
    }
    let found = 0;
    try {
      found = await assertSchemaCompatibility(client, schema, { skipVersionCheck: true });
    } catch (error) {
      if (!(error instanceof SchemaMigrationRequiredError)) {
        report.problems.push(
          `The queue schema "${schema}" is not usable by this build: ${(error as Error).message} ` +
            'Fix: upgrade Engram to the version that migrated it (schemas are never downgraded).',
        );
        return report;
      }
    }
    report.schemaVersion = { found, expected: LATEST_SCHEMA_VERSION };
    const stateVersion = await stateStoreVersion(client, schema);
    report.migrated = found >= LATEST_SCHEMA_VERSION && stateVersion >= STATE_SCHEMA_VERSION;
    if (!report.migrated) {
      report.notes.push(
        `Schema "${schema}" is ${found === 0 && stateVersion === 0 ? 'not created yet' : 'behind this build'}; ` +
          'the first Engram process to start (workers, `engram dev`) migrates it.',
      );
    }
  } catch (error) {
    const e = error as Error & { code?: string };
    report.problems.push(
      e.code === '28P01'
        ? `PostgreSQL at ${report.url} refused the credentials. Fix the user/password in ENGRAM_QUEUE_URL.`
        : `Cannot reach PostgreSQL at ${report.url}: ${e.message}. Start it, or fix ENGRAM_QUEUE_URL.`,
    );
  } finally {
    await client.end().catch(() => {});
  }
  return report;
}
