import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  diffTrees,
  hashContent,
  hashTree,
  isVisibleMarkdown,
  readRegularFile,
  readRegularFileSync,
} from './tree-hash.js';

describe('tree hashes', () => {
  it('hashes visible Markdown files, recursively, skipping hidden entries and symlinks', async () => {
    const root = mkdtempSync(join(tmpdir(), 'engram-hash-'));
    mkdirSync(join(root, 'team'));
    mkdirSync(join(root, '.history', 'x'), { recursive: true });
    writeFileSync(join(root, 'a.md'), 'A');
    writeFileSync(join(root, 'team', 'b.md'), 'B');
    writeFileSync(join(root, 'notes.txt'), 'not memory');
    writeFileSync(join(root, '.history', 'x', 'a.md'), 'old A');
    writeFileSync(join(root, '.consolidate-lock'), '1');
    symlinkSync(join(root, 'a.md'), join(root, 'link.md'));
    const tree = await hashTree(root);
    expect([...tree.keys()].sort()).toEqual(['a.md', 'team/b.md']);
    expect(tree.get('a.md')).toBe(hashContent('A'));
    expect(await hashTree(join(root, 'missing'))).toEqual(new Map());
    expect(isVisibleMarkdown('team/.x/y.md')).toBe(false);
  });

  it('hashes every byte of large files and of many files (read past the first chunk, across yields)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'engram-hash-many-'));
    const big = Buffer.alloc(300_000, 'memory line\n');
    writeFileSync(join(root, 'big.md'), big);
    for (let i = 0; i < 400; i++) writeFileSync(join(root, `m${i}.md`), `memory ${i}\n`);
    const tree = await hashTree(root);
    expect(tree.size).toBe(401);
    expect(tree.get('big.md')).toBe(hashContent(big));
    expect(tree.get('m399.md')).toBe(hashContent('memory 399\n'));
  });

  it('reads only regular files, never through a last-component link, and says when it stopped at the cap', async () => {
    const root = mkdtempSync(join(tmpdir(), 'engram-read-regular-'));
    writeFileSync(join(root, 'a.md'), 'abcdef');
    symlinkSync(join(root, 'a.md'), join(root, 'link.md'));
    execFileSync('mkfifo', [join(root, 'pipe.md')]);
    for (const read of [readRegularFileSync, readRegularFile]) {
      expect((await read(join(root, 'a.md')))?.bytes.toString()).toBe('abcdef');
      expect(await read(join(root, 'a.md'), 4)).toMatchObject({ truncated: true });
      expect((await read(join(root, 'a.md'), 4))?.bytes.toString()).toBe('abcd');
      expect(await read(join(root, 'a.md'), 6)).toMatchObject({ truncated: false });
      // A FIFO is not waited on, a symlink is not followed, a missing file is no error.
      expect(await read(join(root, 'pipe.md'))).toBeUndefined();
      expect(await read(join(root, 'link.md'))).toBeUndefined();
      expect(await read(join(root, 'gone.md'))).toBeUndefined();
    }
  });

  it('diffs by content: an identical rewrite is no change; null means absent before', () => {
    const before = new Map<string, string | null>([
      ['same.md', 'h1'],
      ['changed.md', 'h2'],
      ['gone.md', 'h3'],
      ['was-absent.md', null],
    ]);
    const after = new Map([
      ['same.md', 'h1'],
      ['changed.md', 'h2b'],
      ['new.md', 'h4'],
      ['was-absent.md', 'h5'],
    ]);
    expect(diffTrees(before, after)).toEqual({
      created: ['new.md', 'was-absent.md'],
      updated: ['changed.md'],
      deleted: ['gone.md'],
    });
  });
});
