import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { git, initRepo, makeTempDir } from '../testing/temp-dir.test-helpers.js';
import { findCanonicalGitRoot, findGitRoot, findProjectRoot } from './git-root.js';

let root: string;
let cleanup: () => void;
let mainRepo: string;
let worktree: string;
let bareRepo: string;
let bareWorktree: string;

beforeAll(() => {
  ({ dir: root, cleanup } = makeTempDir('engram-git-'));
  mainRepo = join(root, 'main');
  mkdirSync(join(mainRepo, 'src', 'deep'), { recursive: true });
  initRepo(mainRepo);
  worktree = join(root, 'wt-feature');
  git(mainRepo, 'worktree', 'add', '-q', '-b', 'feature', worktree);
  mkdirSync(join(worktree, 'pkg'), { recursive: true });

  bareRepo = join(root, 'bare.git');
  git(root, 'clone', '-q', '--bare', mainRepo, bareRepo);
  bareWorktree = join(root, 'bare-wt');
  git(bareRepo, 'worktree', 'add', '-q', '-b', 'bare-feature', bareWorktree);
}, 30_000);

afterAll(() => cleanup());

describe('findCanonicalGitRoot', () => {
  it('returns undefined outside any repository, and the project root falls back to the directory', async () => {
    const plain = join(root, 'plain', 'sub');
    mkdirSync(plain, { recursive: true });
    expect(await findCanonicalGitRoot(plain)).toBeUndefined();
    expect(await findProjectRoot(plain)).toBe(plain);
  });

  it('finds the root of a normal repository from the root and from a subdirectory', async () => {
    expect(await findCanonicalGitRoot(mainRepo)).toBe(mainRepo);
    expect(await findCanonicalGitRoot(join(mainRepo, 'src', 'deep'))).toBe(mainRepo);
    expect(await findProjectRoot(join(mainRepo, 'src'))).toBe(mainRepo);
  });

  it('maps a linked worktree (and its subdirectories) to the main repository, so they share one memory', async () => {
    expect(await findGitRoot(worktree)).toBe(worktree);
    expect(await findCanonicalGitRoot(worktree)).toBe(mainRepo);
    expect(await findCanonicalGitRoot(join(worktree, 'pkg'))).toBe(mainRepo);
  });

  it('uses the common dir itself as the identity for worktrees of a bare repository', async () => {
    expect(await findCanonicalGitRoot(bareWorktree)).toBe(bareRepo);
  });

  it('keeps a submodule-style .git file (gitdir without commondir) at its own root', async () => {
    const sub = join(root, 'submodule-like');
    const modules = join(root, 'modules-store', 'sub');
    mkdirSync(sub, { recursive: true });
    mkdirSync(modules, { recursive: true });
    writeFileSync(join(modules, 'HEAD'), 'ref: refs/heads/main\n');
    writeFileSync(join(sub, '.git'), `gitdir: ${modules}\n`);
    expect(await findCanonicalGitRoot(sub)).toBe(sub);
  });

  it('refuses a crafted .git file that points at another repository’s real worktree (back-link mismatch)', async () => {
    const attacker = join(root, 'attacker-1');
    mkdirSync(attacker, { recursive: true });
    const victimWorktreeGitDir = join(mainRepo, '.git', 'worktrees', 'wt-feature');
    writeFileSync(join(attacker, '.git'), `gitdir: ${victimWorktreeGitDir}\n`);
    expect(await findCanonicalGitRoot(attacker)).toBe(attacker);
  });

  it('refuses a crafted gitdir that is not a direct child of <commondir>/worktrees', async () => {
    const attacker = join(root, 'attacker-2');
    const fake = join(attacker, 'fake-gitdir');
    mkdirSync(fake, { recursive: true });
    writeFileSync(join(fake, 'commondir'), `${join(mainRepo, '.git')}\n`);
    writeFileSync(join(fake, 'gitdir'), `${join(attacker, '.git')}\n`);
    writeFileSync(join(attacker, '.git'), 'gitdir: fake-gitdir\n');
    expect(await findCanonicalGitRoot(attacker)).toBe(attacker);
  });

  it('refuses a symlink smuggling another repository’s worktree dir into the repo', async () => {
    const attacker = join(root, 'attacker-3');
    mkdirSync(attacker, { recursive: true });
    symlinkSync(join(mainRepo, '.git', 'worktrees', 'wt-feature'), join(attacker, 'link'));
    writeFileSync(join(attacker, '.git'), 'gitdir: link\n');
    expect(await findCanonicalGitRoot(attacker)).toBe(attacker);
  });

  it('falls back to the worktree root for garbage, empty, missing-target and oversized .git files', async () => {
    const cases: Array<[string, string]> = [
      ['garbage', 'not a pointer at all\n'],
      ['empty', ''],
      ['missing', `gitdir: ${join(root, 'does-not-exist')}\n`],
      ['huge', `gitdir: ${'x'.repeat(70_000)}\n`],
    ];
    for (const [name, content] of cases) {
      const dir = join(root, `bad-${name}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, '.git'), content);
      expect(await findCanonicalGitRoot(dir), name).toBe(dir);
    }
  });

  it('falls back when the worktree back-link points somewhere else', async () => {
    const other = join(root, 'relinked');
    git(mainRepo, 'worktree', 'add', '-q', '-b', 'relinked', other);
    // Point the back-link at a different worktree's .git file.
    writeFileSync(join(mainRepo, '.git', 'worktrees', 'relinked', 'gitdir'), `${join(worktree, '.git')}\n`);
    expect(await findCanonicalGitRoot(other)).toBe(other);
  });
});
