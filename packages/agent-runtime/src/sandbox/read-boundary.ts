import { constants, promises as fs, type Stats } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';

// The read half of a job's boundary, judged on what was opened, never on a path looked at first. A path is
// opened with O_PATH (Linux: no read access is taken, so a FIFO cannot block and a device's open() has no
// side effect), the descriptor is fstat'ed and its real path read back from /proc/self/fd/N; only then is
// it judged (inside the boundary's roots; a regular file or a directory) and, for a file, reopened through
// that same descriptor O_RDONLY|O_NONBLOCK and read up to a cap counted on the bytes read, not on
// `stat.size` (which a FIFO, /dev/zero or a growing file do not honour). A symlink swapped in at any moment
// changes which inode is opened, never which inode is judged.

/** Linux's O_PATH (the same value on x86-64 and arm64); Node does not export it. */
const O_PATH = 0o10000000;
const PROC_FD = '/proc/self/fd';

export type ReadBoundary =
  /** A job with a tenant: only below these real paths (its workspace and its own ENGRAM_HOME area). */
  | { kind: 'roots'; roots: readonly string[] }
  /** A CLI/local job: anything, except kernel and device trees and other users' homes. */
  | { kind: 'local'; ownHome?: string };

export type ReadBoundaryErrorCode =
  | 'OUTSIDE_BOUNDARY'
  | 'NOT_REGULAR'
  | 'NOT_FOUND'
  | 'TOO_LARGE'
  | 'IS_DIRECTORY';

/** A read this job may not make, or of something that is not a readable file; asking again does not help. */
export class ReadBoundaryError extends EngramError {
  declare readonly code: ReadBoundaryErrorCode;
  constructor(code: ReadBoundaryErrorCode, message: string) {
    super(code, message, { retryable: false });
  }
}

const LOCAL_DENIED = ['/proc', '/sys', '/dev'];

function isUnder(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/** A boundary of real paths (roots resolved once; a missing root simply matches nothing). */
export async function rootsBoundary(roots: readonly string[]): Promise<ReadBoundary> {
  const real = await Promise.all(roots.map((r) => fs.realpath(r).catch(() => resolve(r))));
  return { kind: 'roots', roots: [...new Set(real)] };
}

/** Whether the real path `real` is readable under `boundary`. */
export function insideBoundary(boundary: ReadBoundary, real: string): boolean {
  if (boundary.kind === 'roots') return boundary.roots.some((root) => isUnder(real, root));
  if (LOCAL_DENIED.some((d) => isUnder(real, d))) return false;
  for (const homes of ['/home', '/root']) {
    if (!isUnder(real, homes)) continue;
    if (boundary.ownHome && isUnder(real, boundary.ownHome)) return true;
    return false;
  }
  return true;
}

const opensByDescriptor = process.platform === 'linux';

export interface OpenedEntry {
  /** The real path of the opened inode. */
  realPath: string;
  stat: Stats;
}

/** Opens `path` without read access, judges the inode it names, and closes it. Directories and files only. */
export async function judgePath(boundary: ReadBoundary, path: string): Promise<OpenedEntry> {
  const handle = await openPath(path);
  try {
    return await judge(boundary, path, handle);
  } finally {
    await handle.close();
  }
}

export interface HeldEntry extends OpenedEntry {
  /** The judged inode, held open (O_PATH on Linux): `/proc/self/fd/<fd>` names it and nothing else. */
  handle: fs.FileHandle;
  /** `/proc/self/fd/<fd>` where descriptors work, else the real path (judged by name, not race-free). */
  anchor: string;
}

/**
 * Like `judgePath`, but the judged inode stays open: a search then runs from `anchor` (the descriptor), so
 * a root renamed or re-linked after the judgment changes nothing. The caller closes `handle`.
 */
export async function openJudged(boundary: ReadBoundary, path: string): Promise<HeldEntry> {
  const handle = await openPath(path);
  try {
    const entry = await judge(boundary, path, handle);
    return { ...entry, handle, anchor: opensByDescriptor ? `${PROC_FD}/${handle.fd}` : entry.realPath };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

async function openPath(path: string): Promise<fs.FileHandle> {
  try {
    return await fs.open(path, opensByDescriptor ? O_PATH : constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new ReadBoundaryError('NOT_FOUND', `${path} does not exist`);
    }
    if (code === 'EACCES' || code === 'EPERM') {
      throw new ReadBoundaryError('OUTSIDE_BOUNDARY', `${path} is not readable`);
    }
    throw error;
  }
}

async function judge(boundary: ReadBoundary, path: string, handle: fs.FileHandle): Promise<OpenedEntry> {
  const stat = await handle.stat();
  const realPath = opensByDescriptor
    ? await fs.readlink(`${PROC_FD}/${handle.fd}`)
    : // Without /proc/self/fd the real path is resolved by name: not race-free (documented in hosted-api.md).
      await fs.realpath(path);
  if (!insideBoundary(boundary, realPath)) {
    throw new ReadBoundaryError('OUTSIDE_BOUNDARY', `${path} is outside what this job may read`);
  }
  if (!stat.isFile() && !stat.isDirectory()) {
    throw new ReadBoundaryError('NOT_REGULAR', `${path} is not a regular file or a directory`);
  }
  return { realPath, stat };
}

export interface BoundedRead extends OpenedEntry {
  data: Buffer;
}

/**
 * Reads the regular file at `path` if `boundary` allows what it names, at most `maxBytes` (more is
 * `too_large`, judged on the bytes read). `boundary` undefined: any path, still regular files only and
 * non-blocking.
 */
export async function readFileBounded(
  boundary: ReadBoundary | undefined,
  path: string,
  maxBytes: number,
): Promise<BoundedRead> {
  const judged = await openPath(path);
  let entry: OpenedEntry;
  let handle: fs.FileHandle;
  try {
    entry = await judge(boundary ?? { kind: 'roots', roots: ['/'] }, path, judged);
    if (entry.stat.isDirectory()) throw new ReadBoundaryError('IS_DIRECTORY', `${path} is a directory`);
    // Reopen the judged inode itself (never the name again); O_NONBLOCK in case it were a FIFO after all.
    handle = opensByDescriptor
      ? await fs.open(`${PROC_FD}/${judged.fd}`, constants.O_RDONLY | constants.O_NONBLOCK)
      : judged;
  } catch (error) {
    await judged.close();
    throw error;
  }
  try {
    const reopened = await handle.stat();
    if (!reopened.isFile() || reopened.ino !== entry.stat.ino || reopened.dev !== entry.stat.dev) {
      throw new ReadBoundaryError('NOT_REGULAR', `${path} changed while it was opened`);
    }
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const room = maxBytes + 1 - total;
      const buf = Buffer.allocUnsafe(Math.min(64 * 1024, room));
      const { bytesRead } = await handle.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      chunks.push(buf.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxBytes) {
        throw new ReadBoundaryError('TOO_LARGE', `${path} is larger than ${maxBytes} bytes`);
      }
    }
    return { ...entry, stat: reopened, data: Buffer.concat(chunks, total) };
  } finally {
    if (handle !== judged) await handle.close();
    await judged.close();
  }
}
