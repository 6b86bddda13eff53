import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import {
  ensureSessionMemoryFile,
  readSessionMemoryFile,
  readSessionMemoryForCompact,
  restoreSessionMemoryFile,
  sessionMemoryConfigPaths,
} from './summary-file.js';
import { DEFAULT_SESSION_MEMORY_TEMPLATE as T } from './template.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function tempSummaryPath() {
  const { dir, cleanup } = makeTempDir();
  cleanups.push(cleanup);
  return { dir, path: join(dir, 's1', 'session-memory', 'summary.md') };
}

describe('the notes file', () => {
  it('is created once from the template, 0600 in a 0700 directory, and never overwritten', async () => {
    const { path } = tempSummaryPath();
    expect(await ensureSessionMemoryFile(path, T)).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(path, '..')).mode & 0o777).toBe(0o700);
    writeFileSync(path, 'real notes');
    expect(await ensureSessionMemoryFile(path, T)).toBe(false);
    expect(await readSessionMemoryFile(path)).toBe('real notes');
  });

  it('is usable for compaction only when it exists and is more than the template', async () => {
    const { path } = tempSummaryPath();
    expect(await readSessionMemoryForCompact(path, T)).toBeUndefined();
    await ensureSessionMemoryFile(path, T);
    expect(await readSessionMemoryForCompact(path, T)).toBeUndefined();
    await restoreSessionMemoryFile(path, `${T}- did things\n`);
    expect(await readSessionMemoryForCompact(path, T)).toEqual({
      content: `${T}- did things\n`,
      truncated: false,
      summaryPath: path,
    });
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('has custom template and prompt files under ENGRAM_HOME/session-memory/config', () => {
    expect(sessionMemoryConfigPaths('/h')).toEqual({
      templatePath: '/h/session-memory/config/template.md',
      promptPath: '/h/session-memory/config/prompt.md',
    });
  });
});
