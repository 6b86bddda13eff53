import { promises as fs } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { isStrictlyWithin, realpathDeepestExisting, resolveInside } from '../paths/containment.js';
import { ENTRYPOINT_NAME, MemoryPathError, TEAM_DIRNAME } from '../paths/memory-paths.js';
import { scanForSecrets } from '../security/secret-scanner.js';
import { readRegularFileBounded } from './bounded-read.js';
import { memoryAgeDays, memoryFreshnessLabel } from './freshness.js';
import {
  MemoryFormatError,
  type MemoryStamp,
  parseMemoryFile,
  rewriteMemoryFile,
  type SerializableMemory,
  serializeMemoryFile,
} from './frontmatter.js';
import { type PointerUpkeep, removeIndexEntry, upkeepIndexPointers } from './index-file.js';
import { type LinkableMemory, type MemoryLinkReport, memoryLinkReport } from './links.js';
import type { MemoryType } from './memory-types.js';
import { type MemoryFileProblem, scanMemoryDir } from './scan.js';

// File-level operations on one memory, for the CLI and for jobs that write memories directly (not through a
// model's Write tool). Every path goes through the containment check; every write is atomic (0600 files in
// 0700 directories); team memory refuses content that looks like a secret.

export class TeamSecretError extends EngramError {
  constructor(readonly labels: string[]) {
    super(
      'TEAM_SECRET',
      `Refusing to write to team memory: the content contains what looks like a secret (${labels.join(', ')}). ` +
        'Team memory is shared with every collaborator on the project; remove the secret and try again.',
      { retryable: false },
    );
  }
}

/** Checks a memory file path given relative to the memory directory; returns it normalized. */
export function validateMemoryRelPath(relPath: string): string {
  const fail = (why: string) =>
    new MemoryPathError(
      'INVALID_MEMORY_FILE',
      `Invalid memory file path (${why}); use a relative path like "topic.md".`,
    );
  if (typeof relPath !== 'string' || relPath.trim() === '') throw fail('empty');
  if (/[\0\r\n\\]/.test(relPath)) throw fail('contains a NUL, newline or backslash');
  if (relPath.startsWith('/') || /^[A-Za-z]:/.test(relPath) || relPath.startsWith('~'))
    throw fail('not relative');
  const normalized = posix.normalize(relPath).replace(/^\.\//, '');
  const segments = normalized.split('/');
  if (segments.includes('..')) throw fail('leaves the memory directory');
  if (segments.some((s) => s.startsWith('.'))) throw fail('hidden files and directories are not scanned');
  if (!normalized.endsWith('.md')) throw fail('must end in .md');
  if (posix.basename(normalized) === ENTRYPOINT_NAME) throw fail('MEMORY.md is the index, not a memory');
  return normalized;
}

export async function ensureMemoryDir(memoryDir: string): Promise<void> {
  await fs.mkdir(memoryDir, { recursive: true, mode: 0o700 });
}

export interface WriteMemoryOptions {
  /** Defaults to `<memoryDir>/team`. */
  teamDir?: string;
  /** Recorded as `metadata.originSessionId`. */
  originSessionId?: string;
  now?: Date;
}

/**
 * Writes one memory atomically. A new file (or one whose frontmatter is not YAML) is written in the current
 * form; an existing file is rewritten in place — only `fields` change, every other byte of its frontmatter
 * stays (rewriteMemoryFile). `metadata.modified` (and `originSessionId` with `options.originSessionId`) is
 * maintained on every write. Throws MemoryPathError for a path outside the memory directory and
 * TeamSecretError for secret-looking content in team memory.
 */
export async function writeMemoryFile(
  memoryDir: string,
  relPath: string,
  fields: SerializableMemory,
  body: string,
  options: WriteMemoryOptions = {},
): Promise<{ path: string; created: boolean }> {
  const rel = validateMemoryRelPath(relPath);
  const target = await resolveInside(join(memoryDir, rel), memoryDir);
  if (!target.ok) {
    throw new MemoryPathError('OUTSIDE_MEMORY_DIR', `Cannot write ${rel}: ${target.reason}.`);
  }
  const stamp: MemoryStamp = {
    modified: (options.now ?? new Date()).toISOString(),
    ...(options.originSessionId ? { originSessionId: options.originSessionId } : {}),
  };
  let existing: string | undefined;
  try {
    existing = await fs.readFile(target.path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  let text: string | undefined;
  if (existing !== undefined) {
    try {
      text = rewriteMemoryFile(existing, { ...fields, stamp }, rel, body);
    } catch (error) {
      // Unparseable file: the caller is replacing it; nothing to keep.
      if (!(error instanceof MemoryFormatError)) throw error;
    }
  }
  text ??= serializeMemoryFile({ ...fields, stamp }, body);
  const teamDir = options.teamDir ?? join(memoryDir, TEAM_DIRNAME);
  if ((await resolveInside(target.path, teamDir)).ok) {
    const found = scanForSecrets(text);
    if (found.length > 0) throw new TeamSecretError(found.map((f) => f.label));
  }
  await writeFileAtomic(target.path, text, { mode: 0o600 });
  return { path: target.path, created: existing === undefined };
}

/** Reads and parses one memory file (relative path), after the containment check. */
/** Reading a memory stops here (writes are capped at 256 KiB by the memory policy). */
export const MAX_MEMORY_FILE_READ_BYTES = 1024 * 1024;

export async function readMemoryFile(memoryDir: string, relPath: string) {
  const rel = validateMemoryRelPath(relPath);
  const target = await resolveInside(join(memoryDir, rel), memoryDir);
  if (!target.ok) throw new MemoryPathError('OUTSIDE_MEMORY_DIR', `Cannot read ${rel}: ${target.reason}.`);
  // Judged on the opened descriptor: a symlink swapped in after the containment check, or a FIFO, is refused.
  const read = await readRegularFileBounded(target.path, MAX_MEMORY_FILE_READ_BYTES, {
    followSymlinks: false,
  });
  if (read.truncated)
    throw new MemoryPathError(
      'TOO_LARGE',
      `${rel} is over ${MAX_MEMORY_FILE_READ_BYTES} bytes; a memory file should be a few KB — split it.`,
    );
  return {
    path: target.path,
    mtimeMs: read.stat.mtimeMs,
    ...parseMemoryFile(read.bytes.toString('utf8'), rel),
  };
}

export interface MemoryListing {
  /** Relative to the memory directory, forward slashes. */
  file: string;
  path: string;
  type?: MemoryType;
  name?: string;
  description: string | null;
  mtimeMs: number;
  ageDays: number;
  /** 'today' | 'yesterday' | 'N days ago' */
  age: string;
}

/** Every memory (no 200 cap), newest first, plus the files that could not be read — for `engram memory list`. */
export async function listMemories(
  memoryDir: string,
  options: { now?: number; signal?: AbortSignal } = {},
): Promise<{ memories: MemoryListing[]; problems: MemoryFileProblem[] }> {
  const now = options.now ?? Date.now();
  const scan = await scanMemoryDir(memoryDir, {
    maxFiles: Number.POSITIVE_INFINITY,
    now,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const memories = scan.headers.map((h): MemoryListing => {
    const listing: MemoryListing = {
      file: h.filename,
      path: h.filePath,
      description: h.description,
      mtimeMs: h.mtimeMs,
      ageDays: memoryAgeDays(h.mtimeMs, now),
      age: memoryFreshnessLabel(h.mtimeMs, now),
    };
    if (h.type !== undefined) listing.type = h.type;
    if (h.name !== undefined) listing.name = h.name;
    return listing;
  });
  return { memories, problems: scan.problems };
}

/**
 * Deletes one memory file and the index line(s) pointing at it (`team/x.md` → the team index). The directory
 * entry itself is removed (a symlink, not its target). Missing file or entry is not an error.
 */
export async function forgetMemory(
  memoryDir: string,
  file: string,
): Promise<{ fileRemoved: boolean; indexLinesRemoved: number }> {
  const rel = validateMemoryRelPath(file);
  const realRoot = await realpathDeepestExisting(memoryDir);
  const parent = await realpathDeepestExisting(dirname(join(memoryDir, rel)));
  if (
    !realRoot.ok ||
    !parent.ok ||
    (parent.path !== realRoot.path && !isStrictlyWithin(parent.path, realRoot.path))
  ) {
    throw new MemoryPathError(
      'OUTSIDE_MEMORY_DIR',
      `Cannot remove ${rel}: it is not inside the memory directory.`,
    );
  }
  let fileRemoved = true;
  try {
    await fs.unlink(join(parent.path, posix.basename(rel)));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    fileRemoved = false;
  }
  const inTeam = rel.startsWith(`${TEAM_DIRNAME}/`);
  const indexPath = inTeam
    ? join(memoryDir, TEAM_DIRNAME, ENTRYPOINT_NAME)
    : join(memoryDir, ENTRYPOINT_NAME);
  const key = inTeam ? rel.slice(TEAM_DIRNAME.length + 1) : rel;
  const { removed } = await removeIndexEntry(indexPath, key);
  return { fileRemoved, indexLinesRemoved: removed };
}

/**
 * Maintains `metadata.node_type`, `modified` and `originSessionId` on a file a memory job just wrote, as
 * Claude Code does after each Write/Edit in the memory directory; nothing else in the file changes. Skipped
 * when the file changed since `text` was read (a later writer wins) or its frontmatter is not YAML.
 */
async function stampMemoryText(path: string, rel: string, text: string, stamp: MemoryStamp): Promise<void> {
  let next: string;
  try {
    next = rewriteMemoryFile(text, { stamp }, rel);
  } catch {
    return;
  }
  if (next === text) return;
  // `path` was resolved inside the directory by the caller; re-read the same way to see a later writer.
  const now = await readRegularFileBounded(path, MAX_MEMORY_FILE_READ_BYTES, { followSymlinks: false }).catch(
    () => undefined,
  );
  if (!now || now.truncated || now.bytes.toString('utf8') !== text) return;
  await writeFileAtomic(path, next, { mode: 0o600 });
}

/** What pointer upkeep did for one memory file (and its frontmatter's type and name). */
export interface PointerResult {
  added: boolean;
  type?: MemoryType;
  name?: string;
  titleUpdated?: boolean;
}

/**
 * Makes sure a memory file has a pointer in the MEMORY.md of its scope (team/ files in team/MEMORY.md, all
 * others in the root index), built from its frontmatter. Pointer maintenance is mechanical, so jobs guarantee
 * it after a model wrote memories instead of trusting the model to have done step two. With `stamp`, the
 * file's `metadata` is maintained first (stampMemoryText). An existing pointer whose title Engram wrote
 * follows a renamed `name` (upkeepIndexPointers: Claude Code re-slugs names). Returns the file's type.
 */
export async function ensureIndexPointer(
  memoryDir: string,
  relPath: string,
  options: { stamp?: MemoryStamp } = {},
): Promise<PointerResult> {
  return (await ensureIndexPointers(memoryDir, [relPath], options))[0] as PointerResult;
}

/**
 * `ensureIndexPointer` for several files at once, in order: each index is read once and written at most once
 * (a job's commit keeps every file it wrote). Every path is checked before anything is written.
 */
export async function ensureIndexPointers(
  memoryDir: string,
  relPaths: readonly string[],
  options: { stamp?: MemoryStamp } = {},
): Promise<PointerResult[]> {
  const rels = relPaths.map((p) => validateMemoryRelPath(p));
  const results: PointerResult[] = rels.map(() => ({ added: false }));
  const byIndex = new Map<string, Array<{ at: number; item: PointerUpkeep }>>();
  for (const [at, rel] of rels.entries()) {
    const inTeam = rel.startsWith(`${TEAM_DIRNAME}/`);
    const file = inTeam ? rel.slice(TEAM_DIRNAME.length + 1) : rel;
    let fields: { name?: string; description?: string; type?: MemoryType } = {};
    // The file a fork (or a person) left: resolved inside the directory and read bounded, judged on the opened
    // descriptor. A link out of the directory, a FIFO or a missing file gets no pointer, like a missing one.
    const target = await resolveInside(join(memoryDir, rel), memoryDir);
    if (!target.ok) continue;
    let read: Awaited<ReturnType<typeof readRegularFileBounded>>;
    try {
      read = await readRegularFileBounded(target.path, MAX_MEMORY_FILE_READ_BYTES, { followSymlinks: false });
    } catch {
      continue;
    }
    try {
      const text = read.bytes.toString('utf8');
      fields = parseMemoryFile(text, rel);
      // A stamp rewrites the whole file: never from a truncated read.
      if (options.stamp && !read.truncated) await stampMemoryText(target.path, rel, text, options.stamp);
    } catch {
      // An unparseable memory still gets a pointer (the scan reports the problem).
    }
    results[at] = {
      added: false,
      ...(fields.type ? { type: fields.type } : {}),
      ...(fields.name ? { name: fields.name } : {}),
    };
    const indexPath = join(inTeam ? join(memoryDir, TEAM_DIRNAME) : memoryDir, ENTRYPOINT_NAME);
    const items = byIndex.get(indexPath) ?? [];
    items.push({ at, item: { file, name: fields.name, hook: fields.description ?? '' } });
    byIndex.set(indexPath, items);
  }
  for (const [indexPath, items] of byIndex) {
    const done = await upkeepIndexPointers(
      indexPath,
      items.map((i) => i.item),
    );
    for (const [k, { at }] of items.entries()) {
      const { added, titleUpdated } = done[k] as { added: boolean; titleUpdated: boolean };
      results[at] = { ...(results[at] as PointerResult), added, ...(titleUpdated ? { titleUpdated } : {}) };
    }
  }
  return results;
}

/**
 * `[[slug]]` links of one memory, resolved against every memory in the directory, its backlinks, and the
 * links that name no memory yet (memdir/links.ts). Unreadable files are skipped (the scan reports them).
 */
export async function readMemoryLinkReport(memoryDir: string, relPath: string): Promise<MemoryLinkReport> {
  const rel = validateMemoryRelPath(relPath);
  const { memories } = await listMemories(memoryDir);
  const linkable: LinkableMemory[] = [];
  for (const m of [...memories].sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0))) {
    try {
      const parsed = parseMemoryFile(await fs.readFile(m.path, 'utf8'), m.file);
      linkable.push({ file: m.file, ...(parsed.name ? { name: parsed.name } : {}), body: parsed.body });
    } catch {
      // unreadable or not a memory: no links either way
    }
  }
  return memoryLinkReport(rel, linkable);
}
