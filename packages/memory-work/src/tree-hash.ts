import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
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
  for (const file of listing.files) {
    const content = await fs.readFile(file.path).catch(() => undefined);
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
