import { promises as fs, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  createExclusive,
  isTempFileName,
  removeStaleTempFiles,
  TEMP_PREFIX,
  writeFileAtomic,
} from './atomic-write.js';

const dir = () => mkdtempSync(join(tmpdir(), 'engram-atomic-'));

describe('writeFileAtomic', () => {
  it('creates missing directories 0700 and new files 0600, leaving no temp file', async () => {
    const root = dir();
    const target = join(root, 'a', 'b', 'note.md');
    await writeFileAtomic(target, 'hello');
    expect(await fs.readFile(target, 'utf8')).toBe('hello');
    expect(statSync(target).mode & 0o777).toBe(0o600);
    expect(statSync(join(root, 'a')).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(root, 'a', 'b'))).toEqual(['note.md']);
  });

  it('replaces an existing file whole and keeps its mode', async () => {
    const target = join(dir(), 'x.md');
    writeFileSync(target, 'old', { mode: 0o644 });
    await writeFileAtomic(target, 'new content');
    expect(await fs.readFile(target, 'utf8')).toBe('new content');
    expect(statSync(target).mode & 0o777).toBe(0o644);
  });

  it('concurrent writers never interleave: the file holds one complete version', async () => {
    const target = join(dir(), 'race.md');
    const versions = Array.from({ length: 20 }, (_, i) => `${String(i).repeat(5000)}\n`);
    await Promise.all(versions.map((v) => writeFileAtomic(target, v)));
    expect(versions).toContain(await fs.readFile(target, 'utf8'));
  });
});

describe('createExclusive', () => {
  it('creates once and reports false on the second attempt without overwriting', async () => {
    const target = join(dir(), 'once.txt');
    expect(await createExclusive(target, 'first')).toBe(true);
    expect(await createExclusive(target, 'second')).toBe(false);
    expect(await fs.readFile(target, 'utf8')).toBe('first');
    expect(readdirSync(join(target, '..')).filter(isTempFileName)).toEqual([]);
  });
});

describe('removeStaleTempFiles', () => {
  it('removes only old temp files', async () => {
    const root = dir();
    const stale = join(root, `${TEMP_PREFIX}a.md.1.abc`);
    writeFileSync(stale, 'x');
    const past = new Date(Date.now() - 120_000);
    await fs.utimes(stale, past, past);
    writeFileSync(join(root, `${TEMP_PREFIX}b.md.1.def`), 'y');
    writeFileSync(join(root, 'keep.md'), 'z');
    expect(await removeStaleTempFiles(root, 60_000)).toEqual([stale]);
    expect(readdirSync(root).sort()).toEqual([`${TEMP_PREFIX}b.md.1.def`, 'keep.md']);
  });
});
