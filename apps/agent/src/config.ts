import {
  type AgentSessionConfig,
  agentSessionEnvSchema,
  agentSessionSpec,
} from '@engram/agent-session/config';
import { ConfigError, loadSettings, nonNegativeInt } from '@engram/config/env';
import type { QueueBackendConfig } from '@engram/queue/backend-config';
import { z } from 'zod';
import { readDevStack } from './dev-stack.js';

// The agent's configuration: environment only, validated at start with a readable error. The settings it
// shares with the workers and the loader come from @engram/config, a session's own from
// @engram/agent-session; this file adds what the CLI and `engram serve` need besides.

export class AgentConfigError extends ConfigError {
  constructor(message: string) {
    super(message);
    this.name = 'AgentConfigError';
  }
}

const envSchema = agentSessionEnvSchema.extend({
  ENGRAM_DRAIN_TIMEOUT_MS: nonNegativeInt.default(60_000),
  ENGRAM_TEAM_MEMORY_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
});

export interface AgentConfig extends AgentSessionConfig {
  /** How long a short-lived command waits for its turn's memory work before it exits. */
  drainTimeoutMs: number;
  /** Set when the model is the scripted playground of a keyless `engram dev --scripted-model`. */
  scriptedModel: boolean;
  /** PostgreSQL for the team memory service `engram serve` hosts (packages/team-memory). */
  teamMemoryDatabaseUrl: string | undefined;
}

export function loadAgentConfig(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  return loadSettings(env, {
    ...agentSessionSpec,
    schema: envSchema,
    error: (message) => new AgentConfigError(message),
    own: (e, shared, invalid) => {
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
        ...agentSessionSpec.own(e, shared, invalid),
        backend,
        anthropic: scriptedModel
          ? { apiKey: 'scripted-playground', baseURL: dev?.scriptedModel }
          : shared.anthropic,
        scriptedModel,
        drainTimeoutMs: e.ENGRAM_DRAIN_TIMEOUT_MS,
        teamMemoryDatabaseUrl: e.ENGRAM_TEAM_MEMORY_DATABASE_URL,
      };
    },
  });
}
