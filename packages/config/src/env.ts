import { statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { z } from 'zod';

// The settings the agent (CLI, `engram serve`) and the workers share, parsed one way: the same names, the
// same defaults, the same boolean rule, and one loader (`loadSettings`). Each process extends
// `sharedEnvSchema` and `SharedSettings` with its own settings only.

export class ConfigError extends EngramError {
  constructor(message: string) {
    super('CONFIG_INVALID', message, { retryable: false });
  }
}

/** 1/0, true/false, yes/no, on/off (any case); anything else is a configuration error. */
export const boolFlag = z
  .string()
  .transform((v) => v.trim().toLowerCase())
  .pipe(z.enum(['1', '0', 'true', 'false', 'yes', 'no', 'on', 'off']))
  .transform((v) => v === '1' || v === 'true' || v === 'yes' || v === 'on');

export const positiveInt = z.coerce.number().int().positive();
export const nonNegativeInt = z.coerce.number().int().min(0);

export const DEFAULT_MODEL = 'claude-sonnet-5-5';
export const DEFAULT_SMALL_MODEL = 'claude-haiku-5-5';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * The settings every process resolves the same way (agents and workers: the data home, the memory directory
 * override, the queue engine, the key namespace, the two models, the model endpoint, retention, log level,
 * team sync). `Backend` is the queue's backend type and `Stores` the team memory store bindings, which this
 * package does not know.
 */
export interface SharedSettings<Backend, Stores> {
  engramHome: string;
  memoryDirOverride: string | undefined;
  backend: Backend;
  namespace: string;
  model: string;
  smallModel: string;
  anthropic: { apiKey: string | undefined; baseURL: string | undefined };
  /** ENGRAM_CLEANUP_PERIOD_DAYS: transcripts on the agents, per-session queue state on the workers. */
  cleanupPeriodDays: number;
  logLevel: LogLevel;
  /** On when ENGRAM_TEAM_SYNC_URL is set. */
  teamSync: TeamSyncSettings<Stores> | undefined;
}

export interface TeamSyncSettings<Stores> {
  url: string;
  apiKey: string | undefined;
  /** ENGRAM_TEAM_MEMORY_STORE: which projects sync through a memory store. */
  stores: Stores;
}

export const sharedEnvSchema = z.object({
  HOME: z.string().optional(),
  ENGRAM_HOME: z.string().min(1).optional(),
  ENGRAM_MEMORY_DIR: z.string().optional(),
  ANTHROPIC_API_KEY: z.string().optional(),
  ANTHROPIC_BASE_URL: z.url().optional(),
  ENGRAM_MODEL: z.string().min(1).default(DEFAULT_MODEL),
  ENGRAM_SMALL_MODEL: z.string().min(1).default(DEFAULT_SMALL_MODEL),
  ENGRAM_NAMESPACE: z
    .string()
    .regex(/^[A-Za-z0-9:_-]{1,64}$/, 'must be 1–64 characters of [A-Za-z0-9:_-]')
    .default('engram'),
  ENGRAM_DISABLE_MEMORY: boolFlag.default(false),
  /** Transcript retention on the agents; per-session queue state lives as long on the workers. */
  ENGRAM_CLEANUP_PERIOD_DAYS: nonNegativeInt.default(30),
  /** Team memory sync: the service and this deployment's key (agents for `engram team`, workers for jobs). */
  ENGRAM_TEAM_SYNC_URL: z.url().optional(),
  ENGRAM_TEAM_SYNC_KEY: z.string().min(1).optional(),
  /**
   * Team sync through a memory store at ENGRAM_TEAM_SYNC_URL: `memstore_…` for every project, or
   * `owner/name=memstore_…,…` per repository (packages/team-memory client/protocol.ts checks the shape).
   */
  ENGRAM_TEAM_MEMORY_STORE: z.string().max(4096).optional(),
  /** Each process has its own default (`SettingsSpec.defaultLogLevel`). */
  LOG_LEVEL: z.enum(LOG_LEVELS).optional(),
});

export type SharedEnv = z.output<typeof sharedEnvSchema>;

/** How one process reads its configuration: the shared settings plus its own. */
export interface SettingsSpec<Env extends SharedEnv, Backend, Stores, Own> {
  /** Names the configuration in every error ("Invalid worker configuration: …"). */
  what: string;
  /** `sharedEnvSchema` extended with the process's own variables. */
  schema: z.ZodType<Env>;
  defaultLogLevel: LogLevel;
  /** The queue engine from the environment (packages/queue's `resolveBackendConfig`). */
  resolveBackend: (env: NodeJS.ProcessEnv) => Backend;
  /** ENGRAM_TEAM_MEMORY_STORE's bindings (packages/team-memory's `parseStoreBindings`). */
  parseStores: (value: string | undefined) => Stores | { error: string };
  /**
   * The process's own settings (it may refine a shared one, e.g. add fields to `anthropic`). `invalid` throws
   * the configuration error for one line of explanation.
   */
  own: (env: Env, shared: SharedSettings<Backend, Stores>, invalid: (line: string) => never) => Own;
  /** The process's own ConfigError subclass, if it has one. */
  error?: (message: string) => ConfigError;
}

/**
 * The one configuration loader of every process: parses the environment with the process's schema, resolves
 * the shared settings, then the process's own. Every failure is one ConfigError that names the variable.
 */
export function loadSettings<Env extends SharedEnv, Backend, Stores, Own>(
  env: NodeJS.ProcessEnv,
  spec: SettingsSpec<Env, Backend, Stores, Own>,
): Omit<SharedSettings<Backend, Stores>, keyof Own> & Own {
  const fail = (details: string): never => {
    const message = `Invalid ${spec.what}:\n${details}`;
    throw spec.error ? spec.error(message) : new ConfigError(message);
  };
  const invalid = (line: string): never => fail(`  ${line}`);
  const parsed = spec.schema.safeParse(env);
  if (!parsed.success) return fail(describeIssues(parsed.error));
  const e = parsed.data;
  const stores = spec.parseStores(e.ENGRAM_TEAM_MEMORY_STORE);
  if (isParseError(stores)) return invalid(`ENGRAM_TEAM_MEMORY_STORE: ${stores.error}`);
  let backend: Backend;
  let engramHome: string;
  try {
    backend = spec.resolveBackend(env);
    engramHome = resolveEngramHome(e);
  } catch (error) {
    return invalid((error as Error).message);
  }
  const shared: SharedSettings<Backend, Stores> = {
    engramHome,
    memoryDirOverride: e.ENGRAM_MEMORY_DIR || undefined,
    backend,
    namespace: e.ENGRAM_NAMESPACE,
    model: e.ENGRAM_MODEL,
    smallModel: e.ENGRAM_SMALL_MODEL,
    anthropic: { apiKey: e.ANTHROPIC_API_KEY, baseURL: e.ANTHROPIC_BASE_URL },
    cleanupPeriodDays: e.ENGRAM_CLEANUP_PERIOD_DAYS,
    logLevel: e.LOG_LEVEL ?? spec.defaultLogLevel,
    teamSync: e.ENGRAM_TEAM_SYNC_URL
      ? { url: e.ENGRAM_TEAM_SYNC_URL, apiKey: e.ENGRAM_TEAM_SYNC_KEY, stores }
      : undefined,
  };
  return { ...shared, ...spec.own(e, shared, invalid) };
}

function isParseError(value: unknown): value is { error: string } {
  return typeof value === 'object' && value !== null && 'error' in value;
}

export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n');
}

/**
 * ENGRAM_HOME as an absolute path (default ~/.engram). It may not exist yet (it is created on first use), but
 * it, or its nearest existing ancestor, must be a directory: a file there is a configuration error that says
 * what to do, instead of an ENOTDIR from whichever command touches it first.
 */
export function resolveEngramHome(env: {
  HOME?: string | undefined;
  ENGRAM_HOME?: string | undefined;
}): string {
  const home = resolve(env.ENGRAM_HOME ?? join(env.HOME ?? homedir(), '.engram'));
  let probe = home;
  while (true) {
    let stat: ReturnType<typeof statSync>;
    try {
      stat = statSync(probe, { throwIfNoEntry: false });
    } catch (error) {
      // ENOTDIR: a component above is a file; the walk up finds and names it.
      if ((error as NodeJS.ErrnoException).code !== 'ENOTDIR') throw error;
      stat = undefined;
    }
    if (stat) {
      if (!stat.isDirectory()) {
        throw new ConfigError(
          `ENGRAM_HOME is ${home}, but ${probe === home ? 'that' : probe} is ${stat.isFile() ? 'a file' : 'not a directory'}. ` +
            'Point ENGRAM_HOME at a directory (it is created if missing), or move the file away.',
        );
      }
      return home;
    }
    const parent = dirname(probe);
    if (parent === probe) return home;
    probe = parent;
  }
}
