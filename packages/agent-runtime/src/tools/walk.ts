import { promises as fs } from 'node:fs';
import { join } from 'node:path';

// Directory walking shared by Grep and Glob (pure Node: no ripgrep on a clean machine). Version-control
// internals and dependency folders are skipped, as ripgrep's defaults would skip them in a typical repo.

export const SKIPPED_DIRECTORIES = new Set(['.git', '.hg', '.svn', '.jj', 'node_modules']);

export interface WalkOptions {
  signal?: AbortSignal;
  /** Directories (by name) not to descend into. */
  skip?: ReadonlySet<string>;
  /** Stop after this many files. */
  maxFiles?: number;
}

/** Yields absolute paths of regular files under `root`, depth-first in name order (deterministic). */
export async function* walkFiles(root: string, options: WalkOptions = {}): AsyncGenerator<string> {
  const skip = options.skip ?? SKIPPED_DIRECTORIES;
  const max = options.maxFiles ?? Number.POSITIVE_INFINITY;
  let count = 0;
  const stack: string[] = [root];
  while (stack.length > 0) {
    if (options.signal?.aborted) return;
    const dir = stack.pop()!;
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      continue; // unreadable directory: skip, as ripgrep does
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const subdirs: string[] = [];
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!skip.has(entry.name)) subdirs.push(path);
      } else if (entry.isFile()) {
        yield path;
        if (++count >= max) return;
      }
    }
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i]!);
  }
}
