import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@engram/config/env';
import { describe, expect, it } from 'vitest';
import { loadAgentSessionConfig } from './config.js';

// A foreground session's configuration: the shared settings from @engram/config's loader plus the session's
// own limits and trigger thresholds, each with its default.

describe('agent session configuration', () => {
  const home = join(tmpdir(), `session-config-${process.pid}`);

  it('adds the session’s own settings, with their defaults, to the shared ones', () => {
    const config = loadAgentSessionConfig({ HOME: home, REDIS_URL: 'redis://127.0.0.1:6390' });
    expect(config).toMatchObject({
      engramHome: join(home, '.engram'),
      homeDir: home,
      backend: { kind: 'redis', url: 'redis://127.0.0.1:6390', implicit: false },
      maxOutputTokens: 16_000,
      contextWindow: 200_000,
      maxTurns: 50,
      enqueueTimeoutMs: 2_000,
      managedClaudeMdPath: '/etc/claude-code/CLAUDE.md',
      memoryEnabled: true,
      dream: { minHours: 24, minSessions: 5, scanIntervalMs: 600_000 },
      logLevel: 'warn',
      teamSync: undefined,
    });
  });

  it('extends the shared team sync with the session-start wait and the push debounce', () => {
    const config = loadAgentSessionConfig({
      HOME: home,
      ENGRAM_TEAM_SYNC_URL: 'https://team.example',
      ENGRAM_TEAM_SYNC_WAIT_MS: '500',
    });
    expect(config.teamSync).toEqual({
      url: 'https://team.example',
      apiKey: undefined,
      stores: { byRepo: {} },
      sessionStartWaitMs: 500,
      debounceMs: 2_000,
    });
  });

  it('names an invalid setting of the session’s own', () => {
    expect(() => loadAgentSessionConfig({ HOME: home, ENGRAM_TEAM_SYNC_DEBOUNCE_MS: '70000' })).toThrow(
      ConfigError,
    );
    expect(() => loadAgentSessionConfig({ HOME: home, ENGRAM_MAX_TURNS: '0' })).toThrow(
      /^Invalid configuration:\n {2}ENGRAM_MAX_TURNS/,
    );
  });
});
