import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../fixtures.test-helpers.js';
import { defaultTools, toolDefinitions } from '../tools/registry.js';
import {
  type CacheSafeParams,
  CacheSafeParamsError,
  cacheSafeParamsPathFor,
  loadCacheSafeParams,
  saveCacheSafeParams,
  toolResultsDirFor,
} from './cache-safe-params.js';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => {
  ({ dir, cleanup } = await makeTempDir());
});
afterEach(() => cleanup());

const params: CacheSafeParams = {
  model: 'claude-sonnet-5-5',
  system: [{ type: 'text', text: 'system prompt' }],
  tools: toolDefinitions(defaultTools()),
  userContext: '# claudeMd\nbe brief',
  maxTokens: 8_192,
};

describe('cache-safe params', () => {
  it('round-trips through an owner-only file, without cache markers', async () => {
    const path = join(dir, 'session', 'cache-safe-params.json');
    await saveCacheSafeParams(path, {
      ...params,
      system: [{ type: 'text', text: 'system prompt', cache_control: { type: 'ephemeral' } }],
    });
    expect(await loadCacheSafeParams(path)).toEqual(params);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await readFile(path, 'utf8')).not.toContain('cache_control');
  });

  it('keeps the tool definitions byte for byte', async () => {
    const path = join(dir, 'p.json');
    await saveCacheSafeParams(path, params);
    expect(JSON.stringify((await loadCacheSafeParams(path)).tools)).toBe(JSON.stringify(params.tools));
  });

  it('fails with typed errors when missing or invalid', async () => {
    await expect(loadCacheSafeParams(join(dir, 'none.json'))).rejects.toMatchObject({
      code: 'CACHE_SAFE_PARAMS_MISSING',
    });
    const bad = join(dir, 'bad.json');
    await writeFile(bad, JSON.stringify({ model: 'm', system: [], tools: [], maxTokens: -1 }));
    const error = await loadCacheSafeParams(bad).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CacheSafeParamsError);
    expect(error).toMatchObject({ code: 'CACHE_SAFE_PARAMS_INVALID' });
    expect((error as Error).message).toMatch(/maxTokens/);
  });

  it('lives beside the transcript, in the session directory', () => {
    expect(cacheSafeParamsPathFor('/h/projects/-repo/abc.jsonl')).toBe(
      '/h/projects/-repo/abc/cache-safe-params.json',
    );
    expect(toolResultsDirFor('/h/projects/-repo/abc.jsonl')).toBe('/h/projects/-repo/abc/tool-results');
  });
});
