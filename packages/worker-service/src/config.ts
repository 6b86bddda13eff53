import {
  boolFlag,
  ConfigError,
  describeIssues,
  LOG_LEVELS,
  positiveInt,
  resolveEngramHome,
  type SharedSettings,
  sharedEnvSchema,
  sharedSettings,
} from '@engram/config/env';
import { type QueueBackendConfig, resolveBackendConfig } from '@engram/queue/backend-config';
import { JOB_KINDS, type JobKind } from '@engram/queue/catalog';
import { sessionStateTtlMs } from '@engram/queue/state/session-state';
import { parseStoreBindings, type StoreBindings } from '@engram/team-memory/client/protocol';
import { z } from 'zod';

// The worker service's configuration: environment only, validated at start with a readable error. The settings
// it shares with the agent (home, model, namespace, booleans) come from @engram/config, so both read them alike.

export { ConfigError };

const optionalPositiveInt = positiveInt.optional();

const envSchema = sharedEnvSchema.extend({
  ENGRAM_WORKERS_HOST: z.string().min(1).default('127.0.0.1'),
  ENGRAM_WORKERS_PORT: z.coerce.number().int().min(0).max(65_535).default(8090),
  ENGRAM_QUEUES: z.string().optional(),
  ENGRAM_CONCURRENCY_EXTRACT: optionalPositiveInt,
  ENGRAM_CONCURRENCY_SESSION_MEMORY: optionalPositiveInt,
  ENGRAM_CONCURRENCY_DREAM: optionalPositiveInt,
  ENGRAM_CONCURRENCY_RECALL: optionalPositiveInt,
  ENGRAM_CONCURRENCY_TEAM_SYNC: optionalPositiveInt,
  ENGRAM_LOCK_DURATION_MS: optionalPositiveInt,
  ENGRAM_STALLED_INTERVAL_MS: optionalPositiveInt,
  ENGRAM_DREAM_LOCK_TTL_MS: optionalPositiveInt,
  ENGRAM_EXTRACT_STAGED: z
    .string()
    .trim()
    .toLowerCase()
    .pipe(z.enum(['auto', '1', '0', 'true', 'false', 'yes', 'no', 'on', 'off']))
    .optional(),
  ENGRAM_DREAM_MAX_DELETED_SHARE: z.coerce.number().gt(0).max(1).default(0.5),
  ENGRAM_RECALL_TIMEOUT_MS: positiveInt.default(2_000),
  ENGRAM_SHUTDOWN_TIMEOUT_MS: positiveInt.default(25_000),
  ENGRAM_RECONCILE_INTERVAL_MS: positiveInt.default(60_000),
  ENGRAM_RECONCILE_QUIET_MS: z.coerce.number().int().min(0).default(30_000),
  ENGRAM_MODEL_MAX_RETRIES: z.coerce.number().int().min(0).max(2).default(1),
  ENGRAM_MODEL_THREADS: z.coerce.number().int().min(0).max(16).default(1),
  ENGRAM_WORKERS_NICE: z.coerce.number().int().min(0).max(19).default(10),
  ENGRAM_DASHBOARD: boolFlag.default(true),
  ENGRAM_DASHBOARD_READONLY: boolFlag.default(true),
  ENGRAM_DASHBOARD_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  ENGRAM_DASHBOARD_USER: z.string().min(1).optional(),
  ENGRAM_DASHBOARD_PASSWORD: z.string().min(8, 'must be at least 8 characters').optional(),
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
});

export interface WorkersConfig extends SharedSettings<QueueBackendConfig> {
  anthropic: {
    apiKey: string | undefined;
    baseURL: string | undefined;
    maxRetries: number;
    /** Model threads per client (0: the SDK runs on the jobs' thread). */
    threads: number;
  };
  http: { host: string; port: number };
  queues: JobKind[];
  concurrency: Partial<Record<JobKind, number>>;
  lockDurationMs: number | undefined;
  stalledIntervalMs: number | undefined;
  /** Niceness a dedicated worker process takes at start (0: unchanged). */
  nice: number;
  /** Consolidation lock and project-writer lease TTL for dreams (default: the dream job lock duration). */
  dreamLockTtlMs: number | undefined;
  /**
   * When an extraction fork runs on a staged copy of the memory directory, in parallel with the project's
   * other forks, and only its commit takes the project-writer lease (ENGRAM_EXTRACT_STAGED, docs/concurrency.md):
   * 'auto' (default) when the project's writer lease is busy as the job starts (otherwise the fork holds the
   * lease and writes the live directory, as before); 'always'; 'never' (one fork at a time per project).
   */
  extractStaged: 'auto' | 'always' | 'never';
  /** Share of memories a dream may delete without folding their content elsewhere (default 0.5). */
  dreamMaxDeletedShare: number;
  /** How long the recall selector may take before the lexical fallback answers. */
  recallTimeoutMs: number;
  shutdownTimeoutMs: number;
  /** How often the reconciliation sweep runs (a BullMQ job scheduler). */
  reconcileIntervalMs: number;
  /** A session whose transcript changed within this is still active: the sweep leaves it to its foreground. */
  reconcileQuietMs: number;
  /** Per-session state lives as long as transcripts (ENGRAM_CLEANUP_PERIOD_DAYS, set as on the agents). */
  sessionStateTtlMs: number;
  dashboard: {
    enabled: boolean;
    readOnly: boolean;
    token: string | undefined;
    basicAuth: { user: string; password: string } | undefined;
  };
  logLevel: string;
  /**
   * The team memory service (team sync is off without its URL). `apiKey` is the operator's own tenant key, for
   * jobs without a tenant (the CLI's sessions); a hosted tenant's jobs use that tenant's own credential
   * (TenantStore.teamSyncKey), so a deployment that only serves tenants sets the URL alone.
   */
  teamSync: { url: string; apiKey: string | undefined; stores: StoreBindings } | undefined;
}

export function loadWorkersConfig(env: NodeJS.ProcessEnv = process.env): WorkersConfig {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(`Invalid worker configuration:\n${describeIssues(parsed.error)}`);
  }
  const e = parsed.data;
  if ((e.ENGRAM_DASHBOARD_USER === undefined) !== (e.ENGRAM_DASHBOARD_PASSWORD === undefined)) {
    throw new ConfigError(
      'Invalid worker configuration:\n  ENGRAM_DASHBOARD_USER and ENGRAM_DASHBOARD_PASSWORD must be set together.',
    );
  }
  if (e.ENGRAM_TEAM_SYNC_KEY !== undefined && e.ENGRAM_TEAM_SYNC_URL === undefined) {
    throw new ConfigError(
      'Invalid worker configuration:\n  ENGRAM_TEAM_SYNC_KEY is set without ENGRAM_TEAM_SYNC_URL (the team memory service to use it with).',
    );
  }
  const stores = parseStoreBindings(e.ENGRAM_TEAM_MEMORY_STORE);
  if ('error' in stores)
    throw new ConfigError(`Invalid worker configuration:\n  ENGRAM_TEAM_MEMORY_STORE: ${stores.error}`);
  let queues = [...JOB_KINDS];
  if (e.ENGRAM_QUEUES) {
    const names = e.ENGRAM_QUEUES.split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const unknown = names.filter((n) => !JOB_KINDS.includes(n as JobKind));
    if (unknown.length) {
      throw new ConfigError(
        `Invalid worker configuration:\n  ENGRAM_QUEUES: unknown queue(s) ${unknown.join(', ')}; use ${JOB_KINDS.join(', ')}.`,
      );
    }
    queues = names as JobKind[];
  }
  let backend: QueueBackendConfig;
  try {
    backend = resolveBackendConfig(env);
  } catch (error) {
    throw new ConfigError(`Invalid worker configuration:\n  ${(error as Error).message}`);
  }
  let engramHome: string;
  try {
    engramHome = resolveEngramHome(e);
  } catch (error) {
    throw new ConfigError(`Invalid worker configuration:\n  ${(error as Error).message}`);
  }
  return {
    ...sharedSettings(e, { engramHome, backend }),
    anthropic: {
      apiKey: e.ANTHROPIC_API_KEY,
      baseURL: e.ANTHROPIC_BASE_URL,
      maxRetries: e.ENGRAM_MODEL_MAX_RETRIES,
      threads: e.ENGRAM_MODEL_THREADS,
    },
    http: { host: e.ENGRAM_WORKERS_HOST, port: e.ENGRAM_WORKERS_PORT },
    queues,
    concurrency: {
      extract: e.ENGRAM_CONCURRENCY_EXTRACT,
      'session-memory': e.ENGRAM_CONCURRENCY_SESSION_MEMORY,
      dream: e.ENGRAM_CONCURRENCY_DREAM,
      recall: e.ENGRAM_CONCURRENCY_RECALL,
      'team-sync': e.ENGRAM_CONCURRENCY_TEAM_SYNC,
    },
    lockDurationMs: e.ENGRAM_LOCK_DURATION_MS,
    nice: e.ENGRAM_WORKERS_NICE,
    stalledIntervalMs: e.ENGRAM_STALLED_INTERVAL_MS,
    dreamLockTtlMs: e.ENGRAM_DREAM_LOCK_TTL_MS,
    extractStaged:
      e.ENGRAM_EXTRACT_STAGED === undefined || e.ENGRAM_EXTRACT_STAGED === 'auto'
        ? 'auto'
        : ['1', 'true', 'yes', 'on'].includes(e.ENGRAM_EXTRACT_STAGED)
          ? 'always'
          : 'never',
    dreamMaxDeletedShare: e.ENGRAM_DREAM_MAX_DELETED_SHARE,
    recallTimeoutMs: e.ENGRAM_RECALL_TIMEOUT_MS,
    shutdownTimeoutMs: e.ENGRAM_SHUTDOWN_TIMEOUT_MS,
    reconcileIntervalMs: e.ENGRAM_RECONCILE_INTERVAL_MS,
    reconcileQuietMs: e.ENGRAM_RECONCILE_QUIET_MS,
    sessionStateTtlMs: sessionStateTtlMs(e.ENGRAM_CLEANUP_PERIOD_DAYS),
    dashboard: {
      enabled: e.ENGRAM_DASHBOARD,
      readOnly: e.ENGRAM_DASHBOARD_READONLY,
      token: e.ENGRAM_DASHBOARD_TOKEN,
      basicAuth:
        e.ENGRAM_DASHBOARD_USER && e.ENGRAM_DASHBOARD_PASSWORD
          ? { user: e.ENGRAM_DASHBOARD_USER, password: e.ENGRAM_DASHBOARD_PASSWORD }
          : undefined,
    },
    logLevel: e.LOG_LEVEL,
    teamSync: e.ENGRAM_TEAM_SYNC_URL
      ? { url: e.ENGRAM_TEAM_SYNC_URL, apiKey: e.ENGRAM_TEAM_SYNC_KEY, stores }
      : undefined,
  };
}
