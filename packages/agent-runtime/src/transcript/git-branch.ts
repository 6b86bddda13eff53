import { promises as fs, type Stats, statSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';

// Claude Code stamps every transcript entry with the launch directory's git branch (`gitBranch`;
// docs/claude-code-format.md, "Transcripts"). Read from the nearest `.git` (a directory, or a worktree's
// `gitdir:` file) without running git: `ref: refs/heads/<name>` → `<name>`, a detached HEAD → `HEAD`.

export async function readGitBranch(cwd: string): Promise<string | undefined> {
  let dir = resolve(cwd);
  for (;;) {
    const dotGit = join(dir, '.git');
    // A synchronous probe that answers "absent" without an exception (the usual answer on the way up).
    let stat: Stats | undefined;
    try {
      stat = statSync(dotGit, { throwIfNoEntry: false });
    } catch {
      stat = undefined;
    }
    if (stat) {
      let gitDir = dotGit;
      if (stat.isFile()) {
        const match = /^gitdir:\s*(.+?)\s*$/m.exec(await fs.readFile(dotGit, 'utf8').catch(() => ''));
        if (!match?.[1]) return undefined;
        gitDir = isAbsolute(match[1]) ? match[1] : resolve(dir, match[1]);
      }
      const head = (await fs.readFile(join(gitDir, 'HEAD'), 'utf8').catch(() => '')).trim();
      if (head === '') return undefined;
      const ref = /^ref:\s*refs\/heads\/(.+)$/.exec(head);
      return ref?.[1] ?? 'HEAD';
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}
