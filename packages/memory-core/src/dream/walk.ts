import { EngramError } from '@engram/errors/engram-error';
import { walk } from '@engram/fs-walk/walk';
import { ENTRYPOINT_NAME } from '../paths/memory-paths.js';

// The Markdown files of a memory directory as consolidation sees them: recursive, `*.md`, regular files only,
// skipping every hidden entry (so `.history/` snapshots, `.consolidate-lock` and editor/temp files never count)
// and every symlink (a snapshot copies bytes it owns; a link could point anywhere). Bounded.

/** Markdown files handled at most; a memory directory this large is not a memory directory. */
export const MAX_DREAM_FILES = 5_000;
/** Directory entries visited at most. */
const MAX_WALK_ENTRIES = 50_000;

export class DreamFilesError extends EngramError {
  declare readonly code: 'TOO_MANY_FILES' | 'UNREADABLE';
  constructor(code: 'TOO_MANY_FILES' | 'UNREADABLE', message: string) {
    super(code, message, { retryable: code === 'UNREADABLE' });
  }
}

export interface WalkOptions {
  /** Include `MEMORY.md` files (the root index and team/MEMORY.md). Default false. */
  includeIndexes?: boolean;
}

/** Relative paths (forward slashes), sorted. A missing directory is empty. */
export async function listMarkdownFiles(root: string, opts: WalkOptions = {}): Promise<string[]> {
  const listing = await walk(root, {
    include: (name) => name.endsWith('.md') && (opts.includeIndexes === true || name !== ENTRYPOINT_NAME),
    maxEntries: MAX_WALK_ENTRIES,
    maxFiles: MAX_DREAM_FILES,
  });
  for (const error of listing.errors) {
    // A directory that vanished (or turned into a file) mid-walk holds nothing to handle.
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') continue;
    throw new DreamFilesError(
      'UNREADABLE',
      `Cannot list ${error.rel === '' ? 'the memory directory' : error.rel} (${error.code}); check its permissions.`,
    );
  }
  if (listing.truncated === 'entries') {
    throw new DreamFilesError(
      'TOO_MANY_FILES',
      `The memory directory has more than ${MAX_WALK_ENTRIES} entries; it should hold notes, not a file tree.`,
    );
  }
  if (listing.truncated === 'files') {
    throw new DreamFilesError(
      'TOO_MANY_FILES',
      `The memory directory has more than ${MAX_DREAM_FILES} Markdown files; consolidate or archive some first.`,
    );
  }
  return listing.files.map((file) => file.rel).sort();
}
