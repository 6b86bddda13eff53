import { randomBytes } from 'node:crypto';
import { promises as fs, type Stats } from 'node:fs';
import { dirname, join } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { isStrictlyWithin, realpathDeepestExisting } from '../paths/containment.js';
import { listMarkdownFiles } from './walk.js';

// The consolidation safety net's copy (docs/design.md §5 dream; issue 9 §4): before a dream writes, every Markdown
// file of the memory directory (memories, MEMORY.md, team/, logs/…) is copied with its mtime under
// `memory/.history/<id>/`, so a bad run — or any later regret — can be undone with restoreSnapshot.
//
// - Atomic: the copy is written into `.history/.tmp-<id>/` and renamed into place; a snapshot directory that
//   exists is complete (it also carries `.snapshot.json`, written last before the rename).
// - `.history` sits in a hidden directory, so the memory scan (which skips dot entries) never lists snapshots
//   as memories, and the snapshot walk never copies earlier snapshots.
// - Retention is bounded by pruneSnapshots (keep the newest N).

export const HISTORY_DIRNAME = '.history';
export const SNAPSHOT_META_FILE = '.snapshot.json';
export const DEFAULT_SNAPSHOT_KEEP = 10;
/** Total bytes one snapshot copies at most; a memory directory is notes, not data. */
export const MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024;
/** Temp directories of crashed snapshotters older than this are removed by pruneSnapshots. */
const STALE_TEMP_MS = 60 * 60_000;

const SNAPSHOT_ID = /^\d{8}T\d{9}Z-[a-z0-9]{1,32}$/;

export type SnapshotErrorCode = 'INVALID_ID' | 'NOT_FOUND' | 'TOO_LARGE' | 'OUTSIDE_MEMORY_DIR';

export class SnapshotError extends EngramError {
  declare readonly code: SnapshotErrorCode;
  constructor(code: SnapshotErrorCode, message: string) {
    super(code, message, { retryable: false });
  }
}

export interface SnapshotFile {
  /** Relative to the memory directory, forward slashes. */
  path: string;
  bytes: number;
  mtimeMs: number;
}

export interface SnapshotInfo {
  id: string;
  createdAt: string;
  /** Free text: who took it and why (e.g. `dream job 42`). */
  label?: string;
  files: SnapshotFile[];
  bytes: number;
}

export interface CreateSnapshotOptions {
  label?: string;
  /** Defaults to now; part of the id, so ids sort by time. */
  now?: Date;
}

function historyDir(memoryDir: string): string {
  return join(memoryDir, HISTORY_DIRNAME);
}

function makeId(now: Date): string {
  const stamp = now.toISOString().replace(/[-:.]/g, ''); // 20261130T120000123Z
  return `${stamp}-${randomBytes(4).toString('hex')}`;
}

/** The directory holding snapshot `id` (a tree of Markdown files readable like a memory directory). */
export function snapshotDir(memoryDir: string, id: string): string {
  return join(historyDir(memoryDir), validateSnapshotId(id));
}

/** Throws SnapshotError('INVALID_ID') for anything that is not a snapshot id (no paths, no dots). */
export function validateSnapshotId(id: string): string {
  if (typeof id !== 'string' || !SNAPSHOT_ID.test(id)) {
    throw new SnapshotError(
      'INVALID_ID',
      `"${String(id).slice(0, 80)}" is not a snapshot id; run \`engram memory history\` to list them.`,
    );
  }
  return id;
}

/** Copies every Markdown file of `memoryDir` (mtimes kept) into a new snapshot; returns its description. */
export async function createSnapshot(
  memoryDir: string,
  opts: CreateSnapshotOptions = {},
): Promise<SnapshotInfo> {
  const now = opts.now ?? new Date();
  const id = makeId(now);
  const history = historyDir(memoryDir);
  await fs.mkdir(history, { recursive: true, mode: 0o700 });
  const temp = join(history, `.tmp-${id}`);
  await fs.mkdir(temp, { mode: 0o700 });
  try {
    const files: SnapshotFile[] = [];
    let total = 0;
    for (const rel of await listMarkdownFiles(memoryDir, { includeIndexes: true })) {
      const source = join(memoryDir, rel);
      let data: Buffer;
      let stat: Stats;
      try {
        [data, stat] = await Promise.all([fs.readFile(source), fs.stat(source)]);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw error;
      }
      total += data.length;
      if (total > MAX_SNAPSHOT_BYTES) {
        throw new SnapshotError(
          'TOO_LARGE',
          `The memory directory holds more than ${MAX_SNAPSHOT_BYTES / 1024 / 1024} MiB of Markdown; it is too large to snapshot before a consolidation.`,
        );
      }
      const target = join(temp, rel);
      await fs.mkdir(dirname(target), { recursive: true, mode: 0o700 });
      await fs.writeFile(target, data, { mode: 0o600 });
      await fs.utimes(target, stat.atime, stat.mtime);
      files.push({ path: rel, bytes: data.length, mtimeMs: stat.mtimeMs });
    }
    const info: SnapshotInfo = {
      id,
      createdAt: now.toISOString(),
      ...(opts.label ? { label: opts.label } : {}),
      files,
      bytes: total,
    };
    await fs.writeFile(join(temp, SNAPSHOT_META_FILE), `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });
    await fs.rename(temp, join(history, id));
    return info;
  } catch (error) {
    await fs.rm(temp, { recursive: true, force: true });
    throw error;
  }
}

async function readInfo(memoryDir: string, id: string): Promise<SnapshotInfo | undefined> {
  try {
    const raw = await fs.readFile(join(historyDir(memoryDir), id, SNAPSHOT_META_FILE), 'utf8');
    const info = JSON.parse(raw) as SnapshotInfo;
    return info && info.id === id && Array.isArray(info.files) ? info : undefined;
  } catch {
    return undefined;
  }
}

/** Complete snapshots, newest first. A memory directory without history has none. */
export async function listSnapshots(memoryDir: string): Promise<SnapshotInfo[]> {
  let names: string[];
  try {
    names = await fs.readdir(historyDir(memoryDir));
  } catch {
    return [];
  }
  const infos: SnapshotInfo[] = [];
  for (const name of names
    .filter((n) => SNAPSHOT_ID.test(n))
    .sort()
    .reverse()) {
    const info = await readInfo(memoryDir, name);
    if (info) infos.push(info);
  }
  return infos;
}

export interface RestoreOptions {
  /** Snapshot the current state first, so the restore itself can be undone. Default true. */
  backupCurrent?: boolean;
  /** Label of that backup. */
  backupLabel?: string;
}

export interface RestoreResult {
  id: string;
  /** Files written back (they differed or were missing). */
  restored: string[];
  /** Markdown files that did not exist when the snapshot was taken, now removed. */
  removed: string[];
  /** The snapshot of the state before the restore, when one was taken. */
  backupId?: string;
}

/**
 * Puts the memory directory back as it was in snapshot `id`: each file is rewritten atomically (temp + rename)
 * with its recorded mtime, and Markdown files created after the snapshot are removed. `.history` and other
 * hidden entries are left alone. Throws SnapshotError for an unknown id.
 */
export async function restoreSnapshot(
  memoryDir: string,
  id: string,
  opts: RestoreOptions = {},
): Promise<RestoreResult> {
  validateSnapshotId(id);
  const info = await readInfo(memoryDir, id);
  if (!info) {
    throw new SnapshotError(
      'NOT_FOUND',
      `No snapshot ${id} in this project's memory history; run \`engram memory history\` to list them.`,
    );
  }
  const backup =
    opts.backupCurrent === false
      ? undefined
      : await createSnapshot(memoryDir, { label: opts.backupLabel ?? `before restoring ${id}` });

  const realRoot = await realpathDeepestExisting(memoryDir);
  if (!realRoot.ok) throw new SnapshotError('OUTSIDE_MEMORY_DIR', 'The memory directory cannot be resolved.');
  const source = join(historyDir(memoryDir), id);
  const restored: string[] = [];
  const keep = new Set<string>();
  for (const file of info.files) {
    keep.add(file.path);
    const target = join(memoryDir, file.path);
    // A directory replaced by a symlink since the snapshot must not carry the write out of the memory dir.
    const parent = await realpathDeepestExisting(dirname(target));
    if (!parent.ok || (parent.path !== realRoot.path && !isStrictlyWithin(parent.path, realRoot.path))) {
      throw new SnapshotError(
        'OUTSIDE_MEMORY_DIR',
        `Cannot restore ${file.path}: its directory now resolves outside the memory directory.`,
      );
    }
    const data = await fs.readFile(join(source, file.path));
    const current = await fs.readFile(target).catch(() => undefined);
    if (!current?.equals(data)) {
      await writeFileAtomic(target, data, { mode: 0o600 });
      restored.push(file.path);
    }
    const mtime = new Date(file.mtimeMs);
    await fs.utimes(target, mtime, mtime);
  }
  const removed: string[] = [];
  for (const rel of await listMarkdownFiles(memoryDir, { includeIndexes: true })) {
    if (keep.has(rel)) continue;
    await fs.rm(join(memoryDir, rel), { force: true });
    removed.push(rel);
  }
  return { id, restored, removed, ...(backup ? { backupId: backup.id } : {}) };
}

/** Keeps the newest `keep` snapshots (default 10) and removes older ones and stale temp directories. */
export async function pruneSnapshots(
  memoryDir: string,
  opts: { keep?: number; now?: number } = {},
): Promise<{ removed: string[] }> {
  const keep = Math.max(0, Math.floor(opts.keep ?? DEFAULT_SNAPSHOT_KEEP));
  const history = historyDir(memoryDir);
  let names: string[];
  try {
    names = await fs.readdir(history);
  } catch {
    return { removed: [] };
  }
  const removed: string[] = [];
  const ids = names
    .filter((n) => SNAPSHOT_ID.test(n))
    .sort()
    .reverse();
  for (const id of ids.slice(keep)) {
    await fs.rm(join(history, id), { recursive: true, force: true });
    removed.push(id);
  }
  const now = opts.now ?? Date.now();
  for (const name of names.filter((n) => n.startsWith('.tmp-'))) {
    const path = join(history, name);
    const stat = await fs.stat(path).catch(() => undefined);
    if (stat && now - stat.mtimeMs > STALE_TEMP_MS) await fs.rm(path, { recursive: true, force: true });
  }
  return { removed };
}
