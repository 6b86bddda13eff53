import { walkFiles as walkTree } from '@engram/fs-walk/walk';

// Glob's walk (pure Node: no ripgrep on a clean machine), through the one directory walker: hidden files
// count, version-control internals and dependency folders are skipped (as ripgrep's defaults would skip them
// in a typical repo), symlinks are neither listed nor followed, unreadable directories are passed over.

export const SKIPPED_DIRECTORIES = new Set(['.git', '.hg', '.svn', '.jj', 'node_modules']);

export interface WalkOptions {
  signal?: AbortSignal;
  /** Directories (by name) not to descend into. */
  skip?: ReadonlySet<string>;
  /** Stop after this many files. */
  maxFiles?: number;
  /** Open each directory relative to its parent with O_NOFOLLOW (fs-walk `descriptors`; Linux). */
  descriptors?: boolean;
}

/**
 * Yields the paths of regular files under `root` relative to it (forward slashes), depth-first in name
 * order (deterministic).
 */
export async function* walkFiles(root: string, options: WalkOptions = {}): AsyncGenerator<string> {
  if (options.signal?.aborted) return;
  const files = walkTree(root, {
    hidden: true,
    sorted: true,
    skipDirectories: options.skip ?? SKIPPED_DIRECTORIES,
    ...(options.maxFiles !== undefined ? { maxFiles: options.maxFiles } : {}),
    ...(options.descriptors ? { descriptors: true } : {}),
  });
  for await (const file of files) {
    // An aborted call ends the listing quietly; the tool call is being cancelled anyway.
    if (options.signal?.aborted) return;
    yield file.rel;
  }
}
