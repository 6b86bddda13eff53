import { homedir } from 'node:os';
import {
  loadSettings,
  positiveInt,
  type SettingsSpec,
  type SharedSettings,
  sharedEnvSchema,
  type TeamSyncSettings,
} from '@engram/config/env';
import { type QueueBackendConfig, resolveBackendConfig } from '@engram/queue/backend-config';
import { parseStoreBindings, type StoreBindings } from '@engram/team-memory/client/protocol';
import { z } from 'zod';

// What a foreground session reads from its configuration: the settings every process shares (@engram/config)
// plus the session's own — its limits, where managed instructions live, the memory triggers' thresholds. An
// app adds its own settings on top (`agentSessionSpec`).

export const agentSessionEnvSchema = sharedEnvSchema.extend({
  ENGRAM_MAX_OUTPUT_TOKENS: positiveInt.default(16_000),
  ENGRAM_CONTEXT_WINDOW: positiveInt.default(200_000),
  ENGRAM_MAX_TURNS: positiveInt.default(50),
  ENGRAM_ENQUEUE_TIMEOUT_MS: positiveInt.default(2_000),
  ENGRAM_MANAGED_CLAUDE_MD: z.string().default('/etc/claude-code/CLAUDE.md'),
  ENGRAM_DREAM_MIN_HOURS: z.coerce.number().positive().default(24),
  ENGRAM_DREAM_MIN_SESSIONS: positiveInt.default(5),
  ENGRAM_DREAM_SCAN_INTERVAL_MS: positiveInt.default(10 * 60_000),
  ENGRAM_TEAM_SYNC_WAIT_MS: z.coerce.number().int().min(0).default(3_000),
  ENGRAM_TEAM_SYNC_DEBOUNCE_MS: z.coerce.number().int().min(0).max(60_000).default(2_000),
});

export type AgentSessionEnv = z.output<typeof agentSessionEnvSchema>;

export interface AgentSessionConfig extends SharedSettings<QueueBackendConfig, StoreBindings> {
  /** The user's home: user-level CLAUDE.md files. */
  homeDir: string;
  maxOutputTokens: number;
  contextWindow: number;
  maxTurns: number;
  enqueueTimeoutMs: number;
  managedClaudeMdPath: string;
  /**
   * A served turn's tenant workspace root (set by `engram serve` per tenant, never from the environment):
   * CLAUDE.md discovery and `@` imports stay inside it and the tenant's own home. Unset for the CLI.
   */
  workspaceRoot?: string;
  memoryEnabled: boolean;
  dream: { minHours: number; minSessions: number; scanIntervalMs: number };
  /** The team sync the foreground triggers: the bounded wait at session start, the push debounce. */
  teamSync:
    | (TeamSyncSettings<StoreBindings> & { sessionStartWaitMs: number; debounceMs: number })
    | undefined;
}

type OwnSettings = Omit<AgentSessionConfig, keyof SharedSettings<QueueBackendConfig, StoreBindings>> &
  Pick<AgentSessionConfig, 'teamSync'>;

/** How `loadSettings` reads a foreground session's configuration; an app spreads it and extends `schema`/`own`. */
export const agentSessionSpec: SettingsSpec<AgentSessionEnv, QueueBackendConfig, StoreBindings, OwnSettings> =
  {
    what: 'configuration',
    schema: agentSessionEnvSchema,
    defaultLogLevel: 'warn',
    resolveBackend: resolveBackendConfig,
    parseStores: parseStoreBindings,
    own: (e, shared) => ({
      homeDir: e.HOME ?? homedir(),
      maxOutputTokens: e.ENGRAM_MAX_OUTPUT_TOKENS,
      contextWindow: e.ENGRAM_CONTEXT_WINDOW,
      maxTurns: e.ENGRAM_MAX_TURNS,
      enqueueTimeoutMs: e.ENGRAM_ENQUEUE_TIMEOUT_MS,
      managedClaudeMdPath: e.ENGRAM_MANAGED_CLAUDE_MD,
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
    }),
  };

/** A foreground session's configuration from the environment alone (no app's additions). */
export function loadAgentSessionConfig(env: NodeJS.ProcessEnv = process.env): AgentSessionConfig {
  return loadSettings(env, agentSessionSpec);
}
