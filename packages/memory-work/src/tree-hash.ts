import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, promises as fs, openSync, readSync } from 'node:fs';
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

// I/O strategy (as in memory-core's scan): a job hashes its memory directory two or three times, a few hundred
// small files each, and every async read is four thread-pool round trips (open, stat, read, close) that a
// loaded worker waits for one by one; synchronous reads of a local disk are several times faster. The loop
// yields every SYNC_SLICE_MS, and once a read is slow (a network volume) the rest are read asynchronously.
const SYNC_SLICE_MS = 5;
const SLOW_READ_MS = 2;
// Opened without blocking and without following a final symlink, and judged on the descriptor: a FIFO or a
// link swapped in after the walk is skipped, never waited on.
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOFOLLOW ?? 0);

function readRegularSync(path: string): Buffer | undefined {
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
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.max(stat.size - total + 1, 4096));
      const n = readSync(fd, chunk, 0, chunk.length, total);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      total += n;
    }
    return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

async function readRegular(path: string): Promise<Buffer | undefined> {
  const handle = await fs.open(path, OPEN_FLAGS).catch(() => undefined);
  if (!handle) return undefined;
  try {
    return (await handle.stat()).isFile() ? await handle.readFile() : undefined;
  } catch {
    return undefined;
  } finally {
    await handle.close().catch(() => {});
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
  let sync = true;
  let sliceStart = performance.now();
  for (const file of listing.files) {
    let content: Buffer | undefined;
    if (sync) {
      const started = performance.now();
      content = readRegularSync(file.path);
      const now = performance.now();
      if (now - started > SLOW_READ_MS) sync = false;
      if (now - sliceStart > SYNC_SLICE_MS) {
        await new Promise((resolve) => setImmediate(resolve));
        sliceStart = performance.now();
      }
    } else content = await readRegular(file.path);
    if (content !== undefined) out.set(file.rel, hashContent(content));
  }
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
