import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { boolFlag, ConfigError, resolveEngramHome, sharedEnvSchema, sharedSettings } from './env.js';
import { isSessionId, sessionIdSchema } from './session-id.js';

describe('shared configuration', () => {
  it('parses booleans one way for every process', () => {
    for (const v of ['1', 'true', 'TRUE', 'yes', 'on', ' On ']) expect(boolFlag.parse(v)).toBe(true);
    for (const v of ['0', 'false', 'no', 'off']) expect(boolFlag.parse(v)).toBe(false);
    expect(boolFlag.safeParse('maybe').success).toBe(false);
    expect(sharedEnvSchema.parse({}).ENGRAM_DISABLE_MEMORY).toBe(false);
    expect(sharedEnvSchema.parse({ ENGRAM_DISABLE_MEMORY: 'yes' }).ENGRAM_DISABLE_MEMORY).toBe(true);
  });

  it('builds the shared settings one way: defaults, an empty memory-dir override as none, the resolved parts', () => {
    const backend = { kind: 'test' };
    expect(
      sharedSettings(sharedEnvSchema.parse({ ENGRAM_MEMORY_DIR: '' }), { engramHome: '/h', backend }),
    ).toEqual({
      engramHome: '/h',
      memoryDirOverride: undefined,
      backend,
      namespace: 'engram',
      model: 'claude-sonnet-5-5',
      smallModel: 'claude-haiku-5-5',
    });
    const e = sharedEnvSchema.parse({
      ENGRAM_MEMORY_DIR: '/m',
      ENGRAM_NAMESPACE: 'n1',
      ENGRAM_SMALL_MODEL: 's',
    });
    expect(sharedSettings(e, { engramHome: '/h', backend })).toMatchObject({
      memoryDirOverride: '/m',
      namespace: 'n1',
      smallModel: 's',
    });
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
