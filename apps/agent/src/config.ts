import { homedir } from 'node:os';
import {
  ConfigError,
  loadSettings,
  nonNegativeInt,
  positiveInt,
  type SharedSettings,
  sharedEnvSchema,
  type TeamSyncSettings,
} from '@engram/config/env';
import { type QueueBackendConfig, resolveBackendConfig } from '@engram/queue/backend-config';
import { parseStoreBindings, type StoreBindings } from '@engram/team-memory/client/protocol';
import { z } from 'zod';
import { readDevStack } from './dev-stack.js';

// The agent's configuration: environment only, validated at start with a readable error. The settings it
// shares with the workers (home, queue, models, team sync, …) and the loader come from @engram/config; this
// file adds the agent's own.

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
});

export interface AgentConfig extends SharedSettings<QueueBackendConfig, StoreBindings> {
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
  /** Set when the model is the scripted playground of a keyless `engram dev --scripted-model`. */
  scriptedModel: boolean;
  memoryEnabled: boolean;
  dream: { minHours: number; minSessions: number; scanIntervalMs: number };
  /**
   * Team memory sync (the workers need the URL and the key too). The key is only read here for `engram team`,
   * which talks to the service itself.
   */
  teamSync:
    | (TeamSyncSettings<StoreBindings> & { sessionStartWaitMs: number; debounceMs: number })
    | undefined;
  /** PostgreSQL for the team memory service `engram serve` hosts (packages/team-memory). */
  teamMemoryDatabaseUrl: string | undefined;
}

export function loadAgentConfig(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  return loadSettings(env, {
    what: 'configuration',
    schema: envSchema,
    defaultLogLevel: 'warn',
    resolveBackend: resolveBackendConfig,
    parseStores: parseStoreBindings,
    error: (message) => new AgentConfigError(message),
    own: (e, shared) => {
      // Nothing configured: use the queue (and, with no key, the scripted model) of a running `engram dev`.
      const keyless = !shared.anthropic.apiKey && !shared.anthropic.baseURL;
      const dev = shared.backend.implicit || keyless ? readDevStack(shared.engramHome) : undefined;
      const backend: QueueBackendConfig =
        shared.backend.implicit && dev?.backend
          ? dev.backend.kind === 'postgres'
            ? { kind: 'postgres', url: dev.backend.url, implicit: false }
            : { kind: 'redis', url: dev.backend.url, implicit: false }
          : shared.backend;
      const scriptedModel = keyless && !!dev?.scriptedModel;
      return {
        backend,
        homeDir: e.HOME ?? homedir(),
        maxOutputTokens: e.ENGRAM_MAX_OUTPUT_TOKENS,
        contextWindow: e.ENGRAM_CONTEXT_WINDOW,
        maxTurns: e.ENGRAM_MAX_TURNS,
        drainTimeoutMs: e.ENGRAM_DRAIN_TIMEOUT_MS,
        enqueueTimeoutMs: e.ENGRAM_ENQUEUE_TIMEOUT_MS,
        managedClaudeMdPath: e.ENGRAM_MANAGED_CLAUDE_MD,
        anthropic: scriptedModel
          ? { apiKey: 'scripted-playground', baseURL: dev?.scriptedModel }
          : shared.anthropic,
        scriptedModel,
        memoryEnabled: !e.ENGRAM_DISABLE_MEMORY,
        dream: {
          minHours: e.ENGRAM_DREAM_MIN_HOURS,
          minSessions: e.ENGRAM_DREAM_MIN_SESSIONS,
          scanIntervalMs: e.ENGRAM_DREAM_SCAN_INTERVAL_MS,
        },
        teamSync: shared.teamSync && {
          ...shared.teamSync,
          sessionStartWaitMs: e.ENGRAM_TEAM_SYNC_WAIT_MS,
          debounceMs: e.ENGRAM_TEAM_SYNC_DEBOUNCE_MS,
        },
        teamMemoryDatabaseUrl: e.ENGRAM_TEAM_MEMORY_DATABASE_URL,
      };
    },
  });
}
