import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
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

// I/O strategy (as in memory-core's scan): a job hashes (and a staged one copies) its memory directory, a few
// hundred small files, and every async read is four thread-pool round trips (open, stat, read, close) that a
// loaded worker waits for one by one; synchronous calls on a local disk are several times faster. The loop
// yields every SYNC_SLICE_MS, and once a file is slow (a network volume) the rest go asynchronously.
const SYNC_SLICE_MS = 5;
const SLOW_FILE_MS = 2;
// Opened without blocking and without following a final symlink, and judged on the descriptor: a FIFO or a
// link swapped in after the walk is skipped, never waited on.
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOFOLLOW ?? 0);

export interface RegularFileRead {
  bytes: Buffer;
  stat: Stats;
  /** More than `maxBytes` followed (only the cap was read). */
  truncated: boolean;
}

/** Synchronously reads a regular file (at most `maxBytes`); undefined when it is gone or not a regular file. */
export function readRegularFileSync(
  path: string,
  maxBytes = Number.POSITIVE_INFINITY,
): RegularFileRead | undefined {
  let fd: number;
  try {
    fd = openSync(path, OPEN_FLAGS);
  } catch {
    return undefined;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return undefined;
    const chunks: Buffer[] = [];
    let total = 0;
    while (total <= maxBytes) {
      const want = Math.min(Math.max(stat.size - total + 1, 4096), maxBytes + 1 - total);
      const chunk = Buffer.allocUnsafe(want);
      const n = readSync(fd, chunk, 0, want, total);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      total += n;
    }
    const all = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total);
    return total > maxBytes
      ? { bytes: all.subarray(0, maxBytes), stat, truncated: true }
      : { bytes: all, stat, truncated: false };
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * The same read, asynchronously (for a slow filesystem): memory-core's one bounded read, with this module's
 * answer for a file that is gone or not regular (undefined).
 */
export async function readRegularFile(
  path: string,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<RegularFileRead | undefined> {
  return readRegularFileBounded(path, maxBytes, { followSymlinks: false }).catch(() => undefined);
}

/**
 * Runs `sync(item)` for each item on the event loop's thread, yielding every SYNC_SLICE_MS; once one call is
 * slower than SLOW_FILE_MS, the rest run through `async(item)`.
 */
export async function eachFileSliced<T>(
  items: readonly T[],
  sync: (item: T) => void,
  async: (item: T) => Promise<void>,
): Promise<void> {
  let fast = true;
  let sliceStart = performance.now();
  for (const item of items) {
    if (!fast) {
      await async(item);
      continue;
    }
    const started = performance.now();
    sync(item);
    const now = performance.now();
    if (now - started > SLOW_FILE_MS) fast = false;
    if (now - sliceStart > SYNC_SLICE_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
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
    return hashOfRead(
      await readRegularFileBounded(path, MEMORY_FILE_HASH_MAX_BYTES, { followSymlinks: false }),
    );
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    return `${UNHASHED_PREFIX}${typeof code === 'string' ? code : 'error'}`;
  }
}

/** The hash of one bounded read: its bytes' sha256, or the oversize marker when only the cap was read. */
function hashOfRead(read: {
  bytes: Buffer;
  truncated: boolean;
  stat: { size: number; mtimeMs: number };
}): string {
  if (!read.truncated) return hashContent(read.bytes);
  return `${OVERSIZE_HASH_PREFIX}${read.stat.size}:${read.stat.mtimeMs}:${hashContent(read.bytes)}`;
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
  // Fast path: synchronous bounded reads in slices; anything the sync read cannot take (gone, swapped for a
  // link or a FIFO after the walk) gets hashFile's answer, so both paths hash a file the same way.
  const odd: typeof listing.files = [];
  await eachFileSliced(
    listing.files,
    (file) => {
      const read = readRegularFileSync(file.path, MEMORY_FILE_HASH_MAX_BYTES);
      if (read) out.set(file.rel, hashOfRead(read));
      else odd.push(file);
    },
    async (file) => {
      odd.push(file);
    },
  );
  for (const file of odd) {
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
