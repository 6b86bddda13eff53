import { createModelClient, type ModelClient } from '@engram/agent-runtime/model/client';
import type { AgentSessionDeps } from '@engram/agent-session/agent-session';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import { TeamSyncTrigger } from '@engram/memory-client/team-sync-trigger';
import { type AgentConfig, AgentConfigError } from './config.js';

// Composition root for commands that talk to the model: one model client, one memory queue per process.

export interface AgentRuntime extends AgentSessionDeps {
  close(): Promise<void>;
}

export function createModelClientFor(config: AgentConfig): ModelClient {
  if (!config.anthropic.apiKey && !config.anthropic.baseURL) {
    throw new AgentConfigError(
      'ANTHROPIC_API_KEY is not set. Export your API key (or point ANTHROPIC_BASE_URL at an Anthropic-compatible ' +
        'server), or try `engram demo`, which needs no key.',
    );
  }
  return createModelClient({
    apiKey: config.anthropic.apiKey ?? 'unset',
    ...(config.anthropic.baseURL ? { baseURL: config.anthropic.baseURL } : {}),
    maxRetries: 2,
  });
}

export function createAgentRuntime(config: AgentConfig): AgentRuntime {
  const client = createModelClientFor(config);
  const memory = config.memoryEnabled ? new MemoryQueue(config) : undefined;
  const teamSync = memory && config.teamSync ? new TeamSyncTrigger(memory, config.teamSync) : undefined;
  const close = async () => {
    // Flush team memory before the queue connection goes (one push per project this process opened).
    await teamSync?.flush();
    await memory?.close();
  };
  return { config, client, memory, teamSync, dream: config.dream, close };
}
