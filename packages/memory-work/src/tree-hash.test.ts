import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { diffTrees, hashContent, hashTree, isVisibleMarkdown } from './tree-hash.js';

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
