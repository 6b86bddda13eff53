import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  boolFlag,
  ConfigError,
  loadSettings,
  positiveInt,
  resolveEngramHome,
  type SettingsSpec,
  type SharedEnv,
  sharedEnvSchema,
} from './env.js';
import { isSessionId, sessionIdSchema } from './session-id.js';

describe('shared configuration', () => {
  it('parses booleans one way for every process', () => {
    for (const v of ['1', 'true', 'TRUE', 'yes', 'on', ' On ']) expect(boolFlag.parse(v)).toBe(true);
    for (const v of ['0', 'false', 'no', 'off']) expect(boolFlag.parse(v)).toBe(false);
    expect(boolFlag.safeParse('maybe').success).toBe(false);
    expect(sharedEnvSchema.parse({}).ENGRAM_DISABLE_MEMORY).toBe(false);
    expect(sharedEnvSchema.parse({ ENGRAM_DISABLE_MEMORY: 'yes' }).ENGRAM_DISABLE_MEMORY).toBe(true);
  });

  it('resolves ENGRAM_HOME under HOME by default and accepts a directory that does not exist yet', () => {
    const home = join(tmpdir(), `cfg-${process.pid}`);
    expect(resolveEngramHome({ HOME: home })).toBe(join(home, '.engram'));
    expect(resolveEngramHome({ ENGRAM_HOME: join(home, 'a', 'b') })).toBe(join(home, 'a', 'b'));
  });

  it('refuses an ENGRAM_HOME that is a file, or lies below one, saying what to do', () => {
    const dir = join(tmpdir(), `cfg-file-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'not-a-dir');
    writeFileSync(file, 'x');
    expect(() => resolveEngramHome({ ENGRAM_HOME: file })).toThrow(ConfigError);
    expect(() => resolveEngramHome({ ENGRAM_HOME: file })).toThrow(
      /is a file\. Point ENGRAM_HOME at a directory/,
    );
    expect(() => resolveEngramHome({ ENGRAM_HOME: join(file, 'sub') })).toThrow(
      new RegExp(`but ${file} is a file`),
    );
  });

  it('loads every process the same way: the shared settings once, then only what the process adds', () => {
    class OwnError extends ConfigError {}
    const schema = sharedEnvSchema.extend({ OWN_LIMIT: positiveInt.default(7) });
    const spec: SettingsSpec<SharedEnv & { OWN_LIMIT: number }, string, string, { limit: number }> = {
      what: 'test configuration',
      schema,
      defaultLogLevel: 'warn',
      resolveBackend: (env) => `backend:${env.REDIS_URL ?? 'default'}`,
      parseStores: (value) => (value === 'bad' ? { error: 'not a store id' } : `stores:${value ?? ''}`),
      own: (e, _shared, invalid) =>
        e.OWN_LIMIT > 100 ? invalid('OWN_LIMIT: over 100') : { limit: e.OWN_LIMIT },
      error: (message) => new OwnError(message),
    };
    const home = join(tmpdir(), `cfg-load-${process.pid}`);
    const config = loadSettings(
      {
        HOME: home,
        REDIS_URL: 'redis://q',
        ENGRAM_TEAM_SYNC_URL: 'https://team.example',
        ENGRAM_TEAM_MEMORY_STORE: 'memstore_1',
        ANTHROPIC_API_KEY: 'k',
      },
      spec,
    );
    expect(config).toEqual({
      engramHome: join(home, '.engram'),
      memoryDirOverride: undefined,
      backend: 'backend:redis://q',
      namespace: 'engram',
      model: 'claude-sonnet-5-5',
      smallModel: 'claude-haiku-5-5',
      anthropic: { apiKey: 'k', baseURL: undefined },
      cleanupPeriodDays: 30,
      logLevel: 'warn',
      teamSync: { url: 'https://team.example', apiKey: undefined, stores: 'stores:memstore_1' },
      limit: 7,
    });
    expect(loadSettings({ HOME: home, LOG_LEVEL: 'debug' }, spec).logLevel).toBe('debug');
    // Every failure is the process's own error, naming the configuration and the variable.
    for (const [env, line] of [
      [{ OWN_LIMIT: 'many' }, 'OWN_LIMIT'],
      [{ OWN_LIMIT: '101' }, 'OWN_LIMIT: over 100'],
      [{ ENGRAM_TEAM_MEMORY_STORE: 'bad' }, 'ENGRAM_TEAM_MEMORY_STORE: not a store id'],
      [{ ENGRAM_NAMESPACE: 'a b' }, 'ENGRAM_NAMESPACE'],
    ] as const) {
      const thrown = (() => {
        try {
          loadSettings({ HOME: home, ...env }, spec);
        } catch (error) {
          return error as Error;
        }
      })();
      expect(thrown).toBeInstanceOf(OwnError);
      expect(thrown?.message).toMatch(/^Invalid test configuration:\n/);
      expect(thrown?.message).toContain(line);
    }
  });

  it('has one session-id rule: UUIDs and simple ids pass; dots, separators and hidden names do not', () => {
    expect(isSessionId('0b3c9f8e-2d4a-4c6b-9a1e-7f5d3c2b1a09')).toBe(true);
    expect(isSessionId('s_1-a')).toBe(true);
    for (const bad of ['a.b', '.x', '-x', '_x', 'a/b', '', 'x'.repeat(129), 'a\u0000'])
      expect(sessionIdSchema.safeParse(bad).success, bad).toBe(false);
  });

  it('runs inside the test run’s own temporary directory, removed when the run ends', () => {
    expect(tmpdir()).toMatch(/engram-test-run-/);
  });
});
