import { promises as fs, lstatSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';

// Memory is keyed by the canonical git root so every worktree of a repository shares one memory directory.
// A worktree's `.git` file names its git dir; we follow it to the repository's common dir only after checking
// that the link is genuine in both directions, because a crafted `.git` file in a cloned repo could otherwise
// point the memory directory (and its write permission) at any other project. Any doubt → the worktree root.
// Paths are returned as given, never Unicode-normalised: Claude Code sanitizes them that way
// (docs/claude-code-format.md, "Paths").

/**
 * Nearest ancestor of `startDir` (inclusive) that contains a `.git` entry (directory or file). Each probe is a
 * synchronous `lstat` that answers "absent" without an exception: absence is the usual answer on the way up,
 * and a rejected promise per level (a thread-pool hop and an Error each) was a measurable share of a served
 * turn (BENCHMARKS.md, hosted soak).
 */
export async function findGitRoot(startDir: string): Promise<string | undefined> {
  let dir = resolve(startDir);
  for (;;) {
    try {
      if (lstatSync(join(dir, '.git'), { throwIfNoEntry: false })) return dir;
    } catch {
      // unreadable (EACCES, ENOTDIR): keep walking up, as for an absent entry
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/**
 * The directory that identifies the repository `startDir` belongs to: the main worktree's root for a normal
 * repository and for all of its linked worktrees; the common git dir itself when the worktrees hang off a
 * bare repository; the worktree's own root whenever the `.git` indirection cannot be verified (submodules,
 * hand-crafted `.git` files, missing or inconsistent back-links). `undefined` outside any repository.
 */
export async function findCanonicalGitRoot(startDir: string): Promise<string | undefined> {
  const gitRoot = await findGitRoot(startDir);
  if (gitRoot === undefined) return undefined;
  const canonical = await resolveCommonRoot(gitRoot);
  return canonical ?? gitRoot;
}

/** The project root memory is keyed by: the canonical git root, else the directory itself. */
export async function findProjectRoot(cwd: string): Promise<string> {
  return (await findCanonicalGitRoot(cwd)) ?? resolve(cwd);
}

async function resolveCommonRoot(gitRoot: string): Promise<string | undefined> {
  const dotGit = join(gitRoot, '.git');
  let stat: Awaited<ReturnType<typeof fs.lstat>>;
  try {
    stat = await fs.lstat(dotGit);
  } catch {
    return undefined;
  }
  // A `.git` directory is a main worktree: it is its own identity.
  if (stat.isDirectory()) return gitRoot;
  if (!stat.isFile()) return undefined;
  try {
    const pointer = await readSmallFile(dotGit);
    const match = /^gitdir:[ \t]*(.+?)[ \t]*$/m.exec(pointer);
    if (!match?.[1]) return undefined;
    const worktreeGitDir = await fs.realpath(resolve(gitRoot, match[1]));

    // A submodule's gitdir has no commondir file: it is its own repository, keyed by its own root.
    const commonDirRaw = (await readSmallFile(join(worktreeGitDir, 'commondir'))).trim();
    if (commonDirRaw === '') return undefined;
    const commonDir = await fs.realpath(
      isAbsolute(commonDirRaw) ? commonDirRaw : resolve(worktreeGitDir, commonDirRaw),
    );

    // The worktree's git dir must be a direct child of <commonDir>/worktrees ...
    if (dirname(worktreeGitDir) !== join(commonDir, 'worktrees')) return undefined;
    // ... and that git dir's back-link must point at this very worktree's `.git` file.
    const backLinkRaw = (await readSmallFile(join(worktreeGitDir, 'gitdir'))).trim();
    if (backLinkRaw === '') return undefined;
    const backLink = await fs.realpath(resolve(worktreeGitDir, backLinkRaw));
    const expected = join(await fs.realpath(gitRoot), '.git');
    if (backLink !== expected) return undefined;

    // Worktrees of a bare repository: the common dir is not inside a working tree, so it is the identity.
    if (basename(commonDir) !== '.git') return commonDir;
    return dirname(commonDir);
  } catch {
    return undefined;
  }
}

const MAX_POINTER_BYTES = 64 * 1024;

/** Reads a git pointer file, refusing anything large enough to be something else. */
async function readSmallFile(path: string): Promise<string> {
  const handle = await fs.open(path, 'r');
  try {
    const buffer = Buffer.alloc(MAX_POINTER_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, MAX_POINTER_BYTES, 0);
    if (bytesRead === MAX_POINTER_BYTES) throw new RangeError('git pointer file is unexpectedly large');
    return buffer.toString('utf8', 0, bytesRead);
  } finally {
    await handle.close();
  }
}
