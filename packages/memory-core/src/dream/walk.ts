import { type Dirent, promises as fs } from 'node:fs';
import { join } from 'node:path';
import { ENTRYPOINT_NAME } from '../paths/memory-paths.js';

// The Markdown files of a memory directory as consolidation sees them: recursive, `*.md`, regular files only,
// skipping every hidden entry (so `.history/` snapshots, `.consolidate-lock` and editor/temp files never count)
// and every symlink (a snapshot copies bytes it owns; a link could point anywhere). Bounded.

/** Markdown files handled at most; a memory directory this large is not a memory directory. */
export const MAX_DREAM_FILES = 5_000;
/** Directory entries visited at most. */
const MAX_WALK_ENTRIES = 50_000;

export class DreamFilesError extends Error {
  override readonly name = 'DreamFilesError';
  constructor(
    readonly code: 'TOO_MANY_FILES' | 'UNREADABLE',
    message: string,
  ) {
    super(message);
  }
}

export interface WalkOptions {
  /** Include `MEMORY.md` files (the root index and team/MEMORY.md). Default false. */
  includeIndexes?: boolean;
}

/** Relative paths (forward slashes), sorted. A missing directory is empty. */
export async function listMarkdownFiles(root: string, opts: WalkOptions = {}): Promise<string[]> {
  const found: string[] = [];
  const pending = [''];
  let visited = 0;
  while (pending.length > 0) {
    const rel = pending.pop() as string;
    let entries: Dirent[];
    try {
      entries = await fs.readdir(rel === '' ? root : join(root, rel), { withFileTypes: true });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      throw new DreamFilesError(
        'UNREADABLE',
        `Cannot list ${rel === '' ? 'the memory directory' : rel} (${code ?? String(error)}); check its permissions.`,
      );
    }
    for (const entry of entries) {
      if (++visited > MAX_WALK_ENTRIES) {
        throw new DreamFilesError(
          'TOO_MANY_FILES',
          `The memory directory has more than ${MAX_WALK_ENTRIES} entries; it should hold notes, not a file tree.`,
        );
      }
      if (entry.name.startsWith('.')) continue;
      const childRel = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) pending.push(childRel);
      else if (entry.isFile() && entry.name.endsWith('.md')) {
        if (entry.name === ENTRYPOINT_NAME && !opts.includeIndexes) continue;
        found.push(childRel);
        if (found.length > MAX_DREAM_FILES) {
          throw new DreamFilesError(
            'TOO_MANY_FILES',
            `The memory directory has more than ${MAX_DREAM_FILES} Markdown files; consolidate or archive some first.`,
          );
        }
      }
    }
  }
  return found.sort();
}
