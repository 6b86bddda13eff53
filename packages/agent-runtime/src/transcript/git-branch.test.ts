import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readGitBranch } from './git-branch.js';

describe('readGitBranch', () => {
  it('reads the branch from .git/HEAD above the launch directory, a worktree gitdir file, or a detached HEAD', async () => {
    const root = mkdtempSync(join(tmpdir(), 'engram-branch-'));
    mkdirSync(join(root, 'repo', '.git'), { recursive: true });
    mkdirSync(join(root, 'repo', 'src', 'deep'), { recursive: true });
    writeFileSync(join(root, 'repo', '.git', 'HEAD'), 'ref: refs/heads/feature/login\n');
    expect(await readGitBranch(join(root, 'repo', 'src', 'deep'))).toBe('feature/login');

    mkdirSync(join(root, 'repo', '.git', 'worktrees', 'wt'), { recursive: true });
    writeFileSync(join(root, 'repo', '.git', 'worktrees', 'wt', 'HEAD'), '3f2a1b\n');
    mkdirSync(join(root, 'wt'));
    writeFileSync(join(root, 'wt', '.git'), 'gitdir: ../repo/.git/worktrees/wt\n');
    expect(await readGitBranch(join(root, 'wt'))).toBe('HEAD');

    const plain = mkdtempSync(join(tmpdir(), 'engram-nobranch-'));
    expect(await readGitBranch(plain)).toBeUndefined();
  });
});
