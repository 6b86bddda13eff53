import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  diffTrees,
  hashContent,
  hashFile,
  hashTree,
  isVisibleMarkdown,
  MEMORY_FILE_HASH_MAX_BYTES,
  OVERSIZE_HASH_PREFIX,
  readRegularFile,
  readRegularFileSync,
  UNHASHED_PREFIX,
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

  it('hashes one bounded read: a file at the cap by content, one over it as a marker that never equals a content hash', async () => {
    const root = mkdtempSync(join(tmpdir(), 'engram-hash-cap-'));
    const atCap = Buffer.alloc(MEMORY_FILE_HASH_MAX_BYTES, 'a');
    writeFileSync(join(root, 'at-cap.md'), atCap);
    writeFileSync(join(root, 'over.md'), Buffer.concat([atCap, Buffer.from('b')]));
    expect(await hashFile(join(root, 'at-cap.md'))).toBe(hashContent(atCap));
    const over = await hashFile(join(root, 'over.md'));
    expect(over?.startsWith(OVERSIZE_HASH_PREFIX)).toBe(true);
    expect(over).toContain(`:${MEMORY_FILE_HASH_MAX_BYTES + 1}:`);
    // Stable while untouched; a write moves it (its size and time), so a compare-and-set sees the change.
    expect(await hashFile(join(root, 'over.md'))).toBe(over);
    appendFileSync(join(root, 'over.md'), 'c');
    const grown = await hashFile(join(root, 'over.md'));
    expect(grown).not.toBe(over);
    expect(grown?.startsWith(OVERSIZE_HASH_PREFIX)).toBe(true);
    // In a tree the file is there (not taken for deleted), under its marker.
    const tree = await hashTree(root);
    expect(tree.get('over.md')).toBe(grown);
    expect(tree.get('at-cap.md')).toBe(hashContent(atCap));
  });

  it('hashes nothing it would have to follow or block on: a symlink, a FIFO, a directory are markers; absent is null', async () => {
    const root = mkdtempSync(join(tmpdir(), 'engram-hash-kinds-'));
    writeFileSync(join(root, 'real.md'), 'real');
    symlinkSync(join(root, 'real.md'), join(root, 'link.md'));
    execFileSync('mkfifo', [join(root, 'pipe.md')]);
    mkdirSync(join(root, 'dir.md'));
    expect(await hashFile(join(root, 'real.md'))).toBe(hashContent('real'));
    // The link is not followed (a compare-and-set never takes it for the file it points at, nor for absent).
    expect(await hashFile(join(root, 'link.md'))).toBe(`${UNHASHED_PREFIX}ELOOP`);
    // A FIFO named like a memory is opened non-blocking and judged on its descriptor: no hang.
    expect(await hashFile(join(root, 'pipe.md'))).toBe(`${UNHASHED_PREFIX}NOT_A_REGULAR_FILE`);
    expect(await hashFile(join(root, 'dir.md'))).toBe(`${UNHASHED_PREFIX}NOT_A_REGULAR_FILE`);
    expect(await hashFile(join(root, 'missing.md'))).toBeNull();
    expect(await hashFile(join(root, 'real.md', 'under-a-file.md'))).toBeNull();
    // The walk lists neither the link nor the FIFO (regular files only).
    expect([...(await hashTree(root)).keys()]).toEqual(['real.md']);
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
