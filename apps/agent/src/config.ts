import { homedir } from 'node:os';
import {
  ConfigError,
  describeIssues,
  LOG_LEVELS,
  nonNegativeInt,
  positiveInt,
  resolveEngramHome,
  type SharedSettings,
  sharedEnvSchema,
  sharedSettings,
} from '@engram/config/env';
import { type QueueBackendConfig, resolveBackendConfig } from '@engram/queue/backend-config';
import { parseStoreBindings, type StoreBindings } from '@engram/team-memory/client/protocol';
import { z } from 'zod';
import { readDevStack } from './dev-stack.js';

// The agent's configuration: environment only, validated at start with a readable error. The settings it
// shares with the workers (home, model, namespace, booleans) come from @engram/config, so both read them alike.

export class AgentConfigError extends ConfigError {
  constructor(message: string) {
    super(message);
    this.name = 'AgentConfigError';
  }
}

const envSchema = sharedEnvSchema.extend({
  ENGRAM_MAX_OUTPUT_TOKENS: positiveInt.default(16_000),
  ENGRAM_CONTEXT_WINDOW: positiveInt.default(200_000),
  ENGRAM_MAX_TURNS: positiveInt.default(50),
  ENGRAM_DRAIN_TIMEOUT_MS: nonNegativeInt.default(60_000),
  ENGRAM_ENQUEUE_TIMEOUT_MS: positiveInt.default(2_000),
  ENGRAM_MANAGED_CLAUDE_MD: z.string().default('/etc/claude-code/CLAUDE.md'),
  ENGRAM_DREAM_MIN_HOURS: z.coerce.number().positive().default(24),
  ENGRAM_DREAM_MIN_SESSIONS: positiveInt.default(5),
  ENGRAM_DREAM_SCAN_INTERVAL_MS: positiveInt.default(10 * 60_000),
  ENGRAM_TEAM_MEMORY_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  ENGRAM_TEAM_SYNC_WAIT_MS: z.coerce.number().int().min(0).default(3_000),
  ENGRAM_TEAM_SYNC_DEBOUNCE_MS: z.coerce.number().int().min(0).max(60_000).default(2_000),
  LOG_LEVEL: z.enum(LOG_LEVELS).default('warn'),
});

export interface AgentConfig extends SharedSettings<QueueBackendConfig> {
  homeDir: string;
  maxOutputTokens: number;
  contextWindow: number;
  maxTurns: number;
  drainTimeoutMs: number;
  enqueueTimeoutMs: number;
  managedClaudeMdPath: string;
  /**
   * A served turn's tenant workspace root (set by `engram serve` per tenant, never from the environment):
   * CLAUDE.md discovery and `@` imports stay inside it and the tenant's own home. Unset for the CLI.
   */
  workspaceRoot?: string;
  anthropic: { apiKey: string | undefined; baseURL: string | undefined };
  /** Set when the model is the scripted playground of a keyless `engram dev --scripted-model`. */
  scriptedModel: boolean;
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
    | {
        url: string;
        apiKey: string | undefined;
        sessionStartWaitMs: number;
        debounceMs: number;
        /** ENGRAM_TEAM_MEMORY_STORE: which projects sync through a memory store (client/protocol.ts). */
        stores: StoreBindings;
      }
    | undefined;
  /** PostgreSQL for the team memory service `engram serve` hosts (packages/team-memory). */
  teamMemoryDatabaseUrl: string | undefined;
}

export function loadAgentConfig(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) throw new AgentConfigError(`Invalid configuration:\n${describeIssues(parsed.error)}`);
  const e = parsed.data;
  const stores = parseStoreBindings(e.ENGRAM_TEAM_MEMORY_STORE);
  if ('error' in stores)
    throw new AgentConfigError(`Invalid configuration:\n  ENGRAM_TEAM_MEMORY_STORE: ${stores.error}`);
  let backend: QueueBackendConfig;
  try {
    backend = resolveBackendConfig(env);
  } catch (error) {
    throw new AgentConfigError(`Invalid configuration:\n  ${(error as Error).message}`);
  }
  const homeDir = e.HOME ?? homedir();
  let engramHome: string;
  try {
    engramHome = resolveEngramHome({ HOME: homeDir, ENGRAM_HOME: e.ENGRAM_HOME });
  } catch (error) {
    throw new AgentConfigError((error as Error).message);
  }
  // Nothing configured: use the queue (and, with no key, the scripted model) of a running `engram dev`.
  const dev =
    backend.implicit || (!e.ANTHROPIC_API_KEY && !e.ANTHROPIC_BASE_URL)
      ? readDevStack(engramHome)
      : undefined;
  if (backend.implicit && dev?.backend) {
    backend =
      dev.backend.kind === 'postgres'
        ? { kind: 'postgres', url: dev.backend.url, implicit: false }
        : { kind: 'redis', url: dev.backend.url, implicit: false };
  }
  const scriptedModel = !e.ANTHROPIC_API_KEY && !e.ANTHROPIC_BASE_URL && !!dev?.scriptedModel;
  return {
    ...sharedSettings(e, { engramHome, backend }),
    homeDir,
    maxOutputTokens: e.ENGRAM_MAX_OUTPUT_TOKENS,
    contextWindow: e.ENGRAM_CONTEXT_WINDOW,
    maxTurns: e.ENGRAM_MAX_TURNS,
    drainTimeoutMs: e.ENGRAM_DRAIN_TIMEOUT_MS,
    enqueueTimeoutMs: e.ENGRAM_ENQUEUE_TIMEOUT_MS,
    managedClaudeMdPath: e.ENGRAM_MANAGED_CLAUDE_MD,
    anthropic: scriptedModel
      ? { apiKey: 'scripted-playground', baseURL: dev?.scriptedModel }
      : { apiKey: e.ANTHROPIC_API_KEY, baseURL: e.ANTHROPIC_BASE_URL },
    scriptedModel,
    memoryEnabled: !e.ENGRAM_DISABLE_MEMORY,
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
          stores,
        }
      : undefined,
    teamMemoryDatabaseUrl: e.ENGRAM_TEAM_MEMORY_DATABASE_URL,
  };
}
