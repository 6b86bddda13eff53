import { statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { z } from 'zod';

// The settings the agent (CLI, `engram serve`) and the workers share, parsed one way: the same names, the
// same defaults, the same boolean rule. Each process adds its own settings to `sharedEnvSchema` and turns a
// parse failure into its ConfigError with `describeIssues`.

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

/**
 * The settings every process resolves the same way (agents and workers: the data home, the memory directory
 * override, the queue engine, the key namespace, the two models). `Backend` is the queue's backend type, which
 * this package does not know.
 */
export interface SharedSettings<Backend> {
  engramHome: string;
  memoryDirOverride: string | undefined;
  backend: Backend;
  namespace: string;
  model: string;
  smallModel: string;
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
});

/**
 * The shared settings from a parsed environment, once each process has resolved the two it decides itself (the
 * home: the agent honours HOME; the backend: the agent may take a running dev stack's).
 */
export function sharedSettings<Backend>(
  e: z.output<typeof sharedEnvSchema>,
  resolved: { engramHome: string; backend: Backend },
): SharedSettings<Backend> {
  return {
    engramHome: resolved.engramHome,
    memoryDirOverride: e.ENGRAM_MEMORY_DIR || undefined,
    backend: resolved.backend,
    namespace: e.ENGRAM_NAMESPACE,
    model: e.ENGRAM_MODEL,
    smallModel: e.ENGRAM_SMALL_MODEL,
  };
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
