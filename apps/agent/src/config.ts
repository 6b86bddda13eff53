import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { type QueueBackendConfig, resolveBackendConfig } from '@engram/queue/backend-config';
import { z } from 'zod';
import { devStackBackend } from './dev-stack.js';

// The agent's configuration: environment only, validated at start with a readable error (DESIGN §8).

export class AgentConfigError extends Error {
  readonly code = 'CONFIG_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'AgentConfigError';
  }
}

const positiveInt = z.coerce.number().int().positive();

const envSchema = z.object({
  HOME: z.string().optional(),
  ENGRAM_HOME: z.string().min(1).optional(),
  ENGRAM_MEMORY_DIR: z.string().optional(),
  ANTHROPIC_API_KEY: z.string().optional(),
  ANTHROPIC_BASE_URL: z.url().optional(),
  ENGRAM_MODEL: z.string().min(1).default('claude-sonnet-5-5'),
  ENGRAM_SMALL_MODEL: z.string().min(1).default('claude-haiku-5-5'),
  ENGRAM_MAX_OUTPUT_TOKENS: positiveInt.default(16_000),
  ENGRAM_CONTEXT_WINDOW: positiveInt.default(200_000),
  ENGRAM_MAX_TURNS: positiveInt.default(50),
  ENGRAM_DRAIN_TIMEOUT_MS: z.coerce.number().int().min(0).default(60_000),
  ENGRAM_ENQUEUE_TIMEOUT_MS: positiveInt.default(2_000),
  ENGRAM_MANAGED_CLAUDE_MD: z.string().default('/etc/claude-code/CLAUDE.md'),
  ENGRAM_NAMESPACE: z
    .string()
    .regex(/^[A-Za-z0-9:_-]{1,64}$/)
    .default('engram'),
  ENGRAM_DISABLE_MEMORY: z.enum(['0', '1', 'true', 'false']).optional(),
  ENGRAM_CLEANUP_PERIOD_DAYS: z.coerce.number().int().min(0).default(30),
  ENGRAM_DREAM_MIN_HOURS: z.coerce.number().positive().default(24),
  ENGRAM_DREAM_MIN_SESSIONS: positiveInt.default(5),
  ENGRAM_DREAM_SCAN_INTERVAL_MS: positiveInt.default(10 * 60_000),
  ENGRAM_TEAM_SYNC_URL: z.url().optional(),
  ENGRAM_TEAM_MEMORY_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  ENGRAM_TEAM_SYNC_KEY: z.string().min(1).optional(),
  ENGRAM_TEAM_SYNC_WAIT_MS: z.coerce.number().int().min(0).default(3_000),
  ENGRAM_TEAM_SYNC_DEBOUNCE_MS: z.coerce.number().int().min(0).max(60_000).default(2_000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('warn'),
});

export interface AgentConfig {
  homeDir: string;
  engramHome: string;
  memoryDirOverride: string | undefined;
  backend: QueueBackendConfig;
  namespace: string;
  model: string;
  smallModel: string;
  maxOutputTokens: number;
  contextWindow: number;
  maxTurns: number;
  drainTimeoutMs: number;
  enqueueTimeoutMs: number;
  managedClaudeMdPath: string;
  anthropic: { apiKey: string | undefined; baseURL: string | undefined };
  memoryEnabled: boolean;
  dream: { minHours: number; minSessions: number; scanIntervalMs: number };
  /** Transcripts older than this are deleted (0 keeps them forever). */
  cleanupPeriodDays: number;
  logLevel: string;
  /**
   * Team memory sync: on when ENGRAM_TEAM_SYNC_URL is set (the workers need it and the key too). The key is
   * only read here for `engram team`, which talks to the service itself.
   */
  teamSync:
    | { url: string; apiKey: string | undefined; sessionStartWaitMs: number; debounceMs: number }
    | undefined;
  /** PostgreSQL for the team memory service `engram serve` hosts (packages/team-memory). */
  teamMemoryDatabaseUrl: string | undefined;
}

export function loadAgentConfig(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new AgentConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  let backend: QueueBackendConfig;
  try {
    backend = resolveBackendConfig(env);
  } catch (error) {
    throw new AgentConfigError(`Invalid configuration:\n  ${(error as Error).message}`);
  }
  const homeDir = e.HOME ?? homedir();
  const engramHome = resolve(e.ENGRAM_HOME ?? join(homeDir, '.engram'));
  // Nothing configured: use the queue of a running `engram dev`, if there is one.
  if (backend.implicit) backend = devStackBackend(engramHome) ?? backend;
  return {
    homeDir,
    engramHome,
    memoryDirOverride: e.ENGRAM_MEMORY_DIR || undefined,
    backend,
    namespace: e.ENGRAM_NAMESPACE,
    model: e.ENGRAM_MODEL,
    smallModel: e.ENGRAM_SMALL_MODEL,
    maxOutputTokens: e.ENGRAM_MAX_OUTPUT_TOKENS,
    contextWindow: e.ENGRAM_CONTEXT_WINDOW,
    maxTurns: e.ENGRAM_MAX_TURNS,
    drainTimeoutMs: e.ENGRAM_DRAIN_TIMEOUT_MS,
    enqueueTimeoutMs: e.ENGRAM_ENQUEUE_TIMEOUT_MS,
    managedClaudeMdPath: e.ENGRAM_MANAGED_CLAUDE_MD,
    anthropic: { apiKey: e.ANTHROPIC_API_KEY, baseURL: e.ANTHROPIC_BASE_URL },
    memoryEnabled: !(e.ENGRAM_DISABLE_MEMORY === '1' || e.ENGRAM_DISABLE_MEMORY === 'true'),
    cleanupPeriodDays: e.ENGRAM_CLEANUP_PERIOD_DAYS,
    dream: {
      minHours: e.ENGRAM_DREAM_MIN_HOURS,
      minSessions: e.ENGRAM_DREAM_MIN_SESSIONS,
      scanIntervalMs: e.ENGRAM_DREAM_SCAN_INTERVAL_MS,
    },
    logLevel: e.LOG_LEVEL,
    teamSync: e.ENGRAM_TEAM_SYNC_URL
      ? {
          url: e.ENGRAM_TEAM_SYNC_URL,
          apiKey: e.ENGRAM_TEAM_SYNC_KEY,
          sessionStartWaitMs: e.ENGRAM_TEAM_SYNC_WAIT_MS,
          debounceMs: e.ENGRAM_TEAM_SYNC_DEBOUNCE_MS,
        }
      : undefined,
    teamMemoryDatabaseUrl: e.ENGRAM_TEAM_MEMORY_DATABASE_URL,
  };
}
