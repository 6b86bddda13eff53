import { createHash } from 'node:crypto';
import { walk } from '@engram/fs-walk/walk';
import { readRegularFileBounded } from '@engram/memory-core/memdir/bounded-read';

// What a directory holds, as content hashes: the ground truth a fork's receipt is computed from. A fork's
// journal says what it meant to write; only a before/after comparison of the bytes on disk says what it did.

/** Relative path (forward slashes) → sha256 of the content. */
export type TreeState = Map<string, string>;

export interface HashTreeOptions {
  /** Which relative paths count (default: visible `*.md` files, which is what memory is made of). */
  include?: (rel: string) => boolean;
  /** Stop after this many entries walked (a memory directory holds notes, not a file tree). */
  maxEntries?: number;
}

export const HASH_TREE_MAX_ENTRIES = 50_000;

export const isVisibleMarkdown = (rel: string): boolean =>
  rel.endsWith('.md') && !rel.split('/').some((segment) => segment.startsWith('.'));

export function hashContent(content: string | Buffer): string {
  return createHash('sha256').update(content).digest('hex');
}

/**
 * Largest memory file whose content is hashed, staged or committed (a memory file is a note: the write policy
 * caps a fork's writes at 256 KiB). Reads stop here, whatever the file claims or grows to.
 */
export const MEMORY_FILE_HASH_MAX_BYTES = 4 * 1024 * 1024;

/** Prefixes of the hashes of files that are there but whose content is not hashed (never a sha256 in hex). */
export const OVERSIZE_HASH_PREFIX = 'oversize:';
export const UNHASHED_PREFIX = 'unhashed:';

/**
 * The hash of one entry of a memory directory, from one bounded read (`readRegularFileBounded`: opened
 * non-blocking without following a final symlink, judged on the descriptor, at most the cap read):
 *   - absent (ENOENT, ENOTDIR): null;
 *   - a regular file within the cap: the sha256 of its bytes;
 *   - a regular file over the cap: `oversize:<size>:<mtimeMs>:<sha256 of the first cap bytes>` — stable while
 *     the file is untouched, changed by any write that moves its size or time;
 *   - anything else that is there (a symlink, FIFO, socket, device, directory, an unreadable file):
 *     `unhashed:<code>`.
 * A marker never equals a content hash, so a compare-and-set never takes such a file for an absent one or for
 * one with given bytes: it is never overwritten, copied or credited as a write of known content.
 */
export async function hashFile(path: string): Promise<string | null> {
  try {
    const read = await readRegularFileBounded(path, MEMORY_FILE_HASH_MAX_BYTES, { followSymlinks: false });
    if (!read.truncated) return hashContent(read.bytes);
    return `${OVERSIZE_HASH_PREFIX}${read.stat.size}:${read.stat.mtimeMs}:${hashContent(read.bytes)}`;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    return `${UNHASHED_PREFIX}${typeof code === 'string' ? code : 'error'}`;
  }
}

/**
 * Hashes every regular file under `root` that `include` accepts (`hashFile`: bounded, an oversize file is a
 * marker). Hidden entries (`.history`) and symlinks are skipped. A missing root is an empty tree; a file that
 * vanishes mid-walk is skipped.
 */
export async function hashTree(root: string, opts: HashTreeOptions = {}): Promise<TreeState> {
  const include = opts.include ?? isVisibleMarkdown;
  const listing = await walk(root, {
    include: (_name, rel) => include(rel),
    maxEntries: opts.maxEntries ?? HASH_TREE_MAX_ENTRIES,
  });
  const out: TreeState = new Map();
  for (const file of listing.files) {
    const hash = await hashFile(file.path);
    if (hash !== null) out.set(file.rel, hash);
  }
  return out;
}

export interface TreeChange {
  created: string[];
  updated: string[];
  deleted: string[];
}

/** What changed from `before` to `after`, by content (a rewrite with the same bytes is no change). */
export function diffTrees(before: ReadonlyMap<string, string | null>, after: TreeState): TreeChange {
  const created: string[] = [];
  const updated: string[] = [];
  const deleted: string[] = [];
  for (const [rel, hash] of after) {
    const was = before.get(rel);
    if (was === undefined || was === null) created.push(rel);
    else if (was !== hash) updated.push(rel);
  }
  for (const [rel, hash] of before) if (hash !== null && !after.has(rel)) deleted.push(rel);
  return { created: created.sort(), updated: updated.sort(), deleted: deleted.sort() };
}
