import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import {
  CONSOLIDATE_LOCK_FILE,
  readConsolidateLockFile,
  rollbackConsolidateLockFile,
  stampConsolidateLockFile,
} from './lock-file.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe('.consolidate-lock', () => {
  it('stamps body = pid and mtime = the consolidation start; rolls back to the prior mtime or removes it', async () => {
    const t = makeTempDir();
    cleanups.push(t.cleanup);
    const dir = join(t.dir, 'memory');
    mkdirSync(dir);
    const first = Date.parse('2026-11-01T10:00:00Z');
    expect(await stampConsolidateLockFile(dir, 4242, first)).toBe(0);
    expect(await readConsolidateLockFile(dir)).toEqual({ mtimeMs: first, body: '4242' });

    const second = Date.parse('2026-11-30T10:00:00Z');
    expect(await stampConsolidateLockFile(dir, 777, second)).toBe(first);
    await rollbackConsolidateLockFile(dir, first);
    expect(statSync(join(dir, CONSOLIDATE_LOCK_FILE)).mtimeMs).toBe(first);
    // Emptied, so no live process looks like the holder.
    expect(readFileSync(join(dir, CONSOLIDATE_LOCK_FILE), 'utf8')).toBe('');

    await rollbackConsolidateLockFile(dir, 0);
    expect(existsSync(join(dir, CONSOLIDATE_LOCK_FILE))).toBe(false);
    expect(await readConsolidateLockFile(dir)).toBeUndefined();
  });
});
