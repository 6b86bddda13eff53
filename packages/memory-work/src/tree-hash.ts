import { createHash } from 'node:crypto';
import { closeSync, constants, promises as fs, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { walk } from '@engram/fs-walk/walk';

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

/** The same read, asynchronously (for a slow filesystem). */
export async function readRegularFile(
  path: string,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<RegularFileRead | undefined> {
  const handle = await fs.open(path, OPEN_FLAGS).catch(() => undefined);
  if (!handle) return undefined;
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return undefined;
    const chunks: Buffer[] = [];
    let total = 0;
    while (total <= maxBytes) {
      const want = Math.min(Math.max(stat.size - total + 1, 4096), maxBytes + 1 - total);
      const { bytesRead, buffer } = await handle.read(Buffer.allocUnsafe(want), 0, want, total);
      if (bytesRead === 0) break;
      chunks.push(buffer.subarray(0, bytesRead));
      total += bytesRead;
    }
    const all = Buffer.concat(chunks, total);
    return total > maxBytes
      ? { bytes: all.subarray(0, maxBytes), stat, truncated: true }
      : { bytes: all, stat, truncated: false };
  } catch {
    return undefined;
  } finally {
    await handle.close().catch(() => {});
  }
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
 * Hashes every regular file under `root` that `include` accepts. Hidden entries (`.history`) and symlinks
 * are skipped. A missing root is an empty tree; a file that vanishes mid-walk is skipped.
 */
export async function hashTree(root: string, opts: HashTreeOptions = {}): Promise<TreeState> {
  const include = opts.include ?? isVisibleMarkdown;
  const listing = await walk(root, {
    include: (_name, rel) => include(rel),
    maxEntries: opts.maxEntries ?? HASH_TREE_MAX_ENTRIES,
  });
  const out: TreeState = new Map();
  await eachFileSliced(
    listing.files,
    (file) => {
      const read = readRegularFileSync(file.path);
      if (read) out.set(file.rel, hashContent(read.bytes));
    },
    async (file) => {
      const read = await readRegularFile(file.path);
      if (read) out.set(file.rel, hashContent(read.bytes));
    },
  );
  return out;
}

/** The hash of one file, or null when it does not exist. */
export async function hashFile(path: string): Promise<string | null> {
  const content = await fs.readFile(path).catch(() => undefined);
  return content === undefined ? null : hashContent(content);
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
