import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type WalkOptions, type WalkResult, walk, walkFiles, walkSync } from './walk.js';

let root: string;
let outside: string;

function touch(path: string): void {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, 'x');
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'engram-fs-walk-'));
  outside = mkdtempSync(join(tmpdir(), 'engram-fs-walk-outside-'));
  touch(join(root, 'b.md'));
  touch(join(root, 'a.md'));
  touch(join(root, 'notes.txt'));
  touch(join(root, '.hidden.md'));
  touch(join(root, '.history', 'old.md'));
  touch(join(root, 'topics', 'z.md'));
  touch(join(root, 'topics', 'deep', 'deeper', 'd.md'));
  touch(join(root, 'node_modules', 'pkg', 'index.md'));
  touch(join(outside, 'secret.md'));
  symlinkSync(join(outside, 'secret.md'), join(root, 'link.md'));
  symlinkSync(outside, join(root, 'linked-dir'));
  symlinkSync(root, join(root, 'topics', 'loop'));
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

const rels = (result: WalkResult) => result.files.map((f) => f.rel).sort();

async function bothWays(opts: WalkOptions, at = root): Promise<WalkResult> {
  const sync = walkSync(at, opts);
  const async = await walk(at, opts);
  expect(rels(async)).toEqual(rels(sync));
  expect(async.errors).toEqual(sync.errors);
  expect(async.truncated).toBe(sync.truncated);
  expect(async.rootMissing).toBe(sync.rootMissing);
  return sync;
}

describe('walkSync / walk', () => {
  it('lists regular files recursively; skips hidden entries and every symlink by default; never follows links', async () => {
    const result = await bothWays({});
    expect(rels(result)).toEqual([
      'a.md',
      'b.md',
      'node_modules/pkg/index.md',
      'notes.txt',
      'topics/deep/deeper/d.md',
      'topics/z.md',
    ]);
    expect(result.errors).toEqual([]);
    expect(result.rootMissing).toBe(false);
    const a = result.files.find((f) => f.rel === 'a.md');
    expect(a).toEqual({ rel: 'a.md', path: join(root, 'a.md'), symlink: false });
  });

  it("symlinks: 'list' lists links as files (flagged) but still never enters a linked directory", async () => {
    const result = await bothWays({ symlinks: 'list', include: (name) => name.endsWith('.md') });
    expect(rels(result)).toContain('link.md');
    expect(result.files.find((f) => f.rel === 'link.md')?.symlink).toBe(true);
    // The directory links are listed as entries (a caller decides about them), their contents never are.
    expect(rels(result).some((r) => r.includes('secret') || r.startsWith('topics/loop/'))).toBe(false);
  });

  it('hidden: true lists dot files and enters dot directories', async () => {
    const result = await bothWays({ hidden: true });
    expect(rels(result)).toEqual(expect.arrayContaining(['.hidden.md', '.history/old.md']));
  });

  it('include filters files by name and relative path; skipDirectories is honoured at any depth', async () => {
    const result = await bothWays({
      include: (name, rel) => name.endsWith('.md') && rel !== 'b.md',
      skipDirectories: new Set(['node_modules', 'deeper']),
    });
    expect(rels(result)).toEqual(['a.md', 'topics/z.md']);
  });

  it('maxDepth counts the root as 0', async () => {
    expect(rels(await bothWays({ maxDepth: 0 }))).toEqual(['a.md', 'b.md', 'notes.txt']);
    expect(rels(await bothWays({ maxDepth: 1, skipDirectories: new Set(['node_modules']) }))).toEqual([
      'a.md',
      'b.md',
      'notes.txt',
      'topics/z.md',
    ]);
  });

  it('sorted: files of a directory in name order, then its subdirectories, depth-first', async () => {
    const result = await bothWays({ sorted: true, skipDirectories: new Set(['node_modules']) });
    expect(result.files.map((f) => f.rel)).toEqual([
      'a.md',
      'b.md',
      'notes.txt',
      'topics/z.md',
      'topics/deep/deeper/d.md',
    ]);
  });

  it('stops at maxEntries and maxFiles and says so', async () => {
    const entries = await bothWays({ maxEntries: 3, sorted: true });
    expect(entries.truncated).toBe('entries');
    expect(entries.files.length).toBeLessThanOrEqual(3);
    const files = await bothWays({ maxFiles: 2, sorted: true });
    expect(files.truncated).toBe('files');
    expect(files.files.map((f) => f.rel)).toEqual(['a.md', 'b.md']);
    expect((await bothWays({})).truncated).toBeUndefined();
  });

  it('a missing root is an empty listing, not an error; a file in its place is an error', async () => {
    const missing = await bothWays({}, join(root, 'nope'));
    expect(missing).toEqual({ files: [], errors: [], rootMissing: true });
    const file = await bothWays({}, join(root, 'a.md'));
    expect(file.rootMissing).toBe(false);
    expect(file.errors).toEqual([{ rel: '', path: join(root, 'a.md'), code: 'ENOTDIR' }]);
  });

  it('rejects with the signal’s reason when aborted', async () => {
    const controller = new AbortController();
    const reason = new Error('stop');
    controller.abort(reason);
    expect(() => walkSync(root, { signal: controller.signal })).toThrow(reason);
    await expect(walk(root, { signal: controller.signal })).rejects.toBe(reason);
  });
});

describe('walkFiles', () => {
  it('yields the same files one at a time and lets the caller stop early', async () => {
    const all: string[] = [];
    for await (const file of walkFiles(root, { sorted: true })) all.push(file.rel);
    expect(all).toEqual(walkSync(root, { sorted: true }).files.map((f) => f.rel));
    const firstTwo: string[] = [];
    for await (const file of walkFiles(root, { sorted: true })) {
      firstTwo.push(file.rel);
      if (firstTwo.length === 2) break;
    }
    expect(firstTwo).toEqual(all.slice(0, 2));
  });

  it('passes unreadable directories to onError', async () => {
    const errors: string[] = [];
    for await (const _ of walkFiles(join(root, 'a.md'), { onError: (e) => errors.push(e.code) })) {
      // nothing to list
    }
    expect(errors).toEqual(['ENOTDIR']);
  });

  it.skipIf(process.platform !== 'linux')(
    'descriptors: the same listing; a directory swapped for a link mid-walk is an error, never entered (by path it is)',
    async () => {
      const byDescriptor: string[] = [];
      for await (const f of walkFiles(root, { sorted: true, hidden: true, descriptors: true })) {
        byDescriptor.push(f.rel);
      }
      expect(byDescriptor).toEqual(walkSync(root, { sorted: true, hidden: true }).files.map((f) => f.rel));
      const swapped = async (descriptors: boolean) => {
        const tree = mkdtempSync(join(tmpdir(), 'engram-fs-walk-swap-'));
        touch(join(tree, 'a.md'));
        touch(join(tree, 'sub', 'own.md'));
        const seen: string[] = [];
        const errors: string[] = [];
        const files = walkFiles(tree, { sorted: true, descriptors, onError: (e) => errors.push(e.code) });
        for await (const f of files) {
          seen.push(f.rel);
          // The root is listed and `sub` is pending: swap it for a link to another tree now.
          if (f.rel === 'a.md') {
            rmSync(join(tree, 'sub'), { recursive: true });
            symlinkSync(outside, join(tree, 'sub'));
          }
        }
        rmSync(tree, { recursive: true, force: true });
        return { seen, errors };
      };
      expect(await swapped(true)).toEqual({
        seen: ['a.md'],
        errors: [expect.stringMatching(/^(ELOOP|ENOTDIR)$/)],
      });
      // What the flag prevents: the walk by path follows the swapped-in link.
      expect((await swapped(false)).seen).toEqual(['a.md', 'sub/secret.md']);
    },
  );
});
