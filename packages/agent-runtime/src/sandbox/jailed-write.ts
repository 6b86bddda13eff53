import { randomBytes } from 'node:crypto';
import { constants, existsSync, promises as fs } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { TEMP_PREFIX, writeFileAtomic } from '@engram/fs-atomic/atomic-write';

// The final write of an unattended Write/Edit, confined to one directory without a window between check and
// use. A path is only a name: a symlink swapped in after a policy looked at it would redirect a plain
// open() or rename(). Here nothing is looked up by its full path. The root is opened once; every directory
// below it is opened relative to the previous one's descriptor (through Linux's /proc/self/fd/N, the
// openat() Node lacks) with O_NOFOLLOW, so each step is a real directory, never a link; the temp file is
// created O_EXCL|O_NOFOLLOW in the last one and renamed onto the target within it (rename replaces a
// name, never follows it). Whatever is swapped in concurrently, the bytes land below the root or not at all.
// The result is atomic as fs-atomic's writeFileAtomic: the old file or the new one, fsynced.

export type JailedWriteErrorCode =
  | 'OUTSIDE_ROOT'
  | 'SYMLINK_IN_PATH'
  | 'HARD_LINK'
  | 'NOT_A_FILE'
  | 'UNSUPPORTED_PLATFORM';

/** A write the jail refused (a link on the way, outside its root, not a file); asking again does not help. */
export class JailedWriteError extends EngramError {
  declare readonly code: JailedWriteErrorCode;
  constructor(code: JailedWriteErrorCode, message: string) {
    super(code, message, { retryable: false });
  }
}

export interface JailedWriteOptions {
  /** Mode for a new file (an existing file keeps its own). Default 0o600. */
  mode?: number;
  /** Mode for directories created on the way. Default 0o700. */
  dirMode?: number;
}

const PROC_FD = '/proc/self/fd';
let procFdWorks: boolean | undefined;

/** Whether descriptor-relative lookups work here (Linux with /proc mounted). */
export function jailedWriteSupported(): boolean {
  procFdWorks ??= process.platform === 'linux' && existsSync(`${PROC_FD}/0`);
  return procFdWorks;
}

/** The segments of `target` below `root` (either spelling of root: as given, or its real path). */
export function segmentsBelow(root: string, realRoot: string, target: string): string[] {
  const abs = resolve(target);
  for (const base of [resolve(root), realRoot]) {
    const rel = relative(base, abs);
    if (rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel)) return rel.split(sep);
  }
  throw new JailedWriteError('OUTSIDE_ROOT', 'the path is outside the directory this agent may write');
}

const at = (fd: number, name: string) => `${PROC_FD}/${fd}/${name}`;

async function openDirBelow(parent: fs.FileHandle, name: string, dirMode: number): Promise<fs.FileHandle> {
  const flags = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
  try {
    return await fs.open(at(parent.fd, name), flags);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      await fs.mkdir(at(parent.fd, name), { mode: dirMode }).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'EEXIST') throw e;
      });
      return await openDirBelow(parent, name, dirMode);
    }
    if (code === 'ELOOP' || code === 'ENOTDIR') {
      throw new JailedWriteError(
        'SYMLINK_IN_PATH',
        `a component of the path (${name}) is a symlink or not a directory`,
      );
    }
    throw error;
  }
}

/**
 * Writes `data` to `target`, which must lie below `root`. `root` itself is trusted (it comes from the
 * caller, not the model) and created if missing. Returns the new file's mtime.
 */
export async function writeFileJailed(
  root: string,
  target: string,
  data: string | Uint8Array,
  options: JailedWriteOptions = {},
): Promise<{ mtimeMs: number }> {
  if (!jailedWriteSupported()) return await writeCheckedByPath(root, target, data, options);
  const dirMode = options.dirMode ?? 0o700;
  await fs.mkdir(root, { recursive: true, mode: dirMode });
  const realRoot = await fs.realpath(root);
  const segments = segmentsBelow(root, realRoot, target);
  if (segments.some((s) => s === '' || s === '.' || s === '..')) {
    throw new JailedWriteError('OUTSIDE_ROOT', 'the path has an empty, . or .. segment');
  }
  const name = segments.pop()!;
  let dir = await fs.open(realRoot, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    for (const segment of segments) {
      const next = await openDirBelow(dir, segment, dirMode);
      await dir.close();
      dir = next;
    }
    let mode = options.mode ?? 0o600;
    try {
      const existing = await fs.lstat(at(dir.fd, name));
      if (existing.isSymbolicLink()) {
        throw new JailedWriteError('SYMLINK_IN_PATH', 'the file is a symlink');
      }
      if (!existing.isFile()) throw new JailedWriteError('NOT_A_FILE', 'the path is not a regular file');
      if (existing.nlink > 1) {
        throw new JailedWriteError('HARD_LINK', 'the file has other hard links');
      }
      mode = existing.mode & 0o777;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    const tempName = `${TEMP_PREFIX}${name}.${process.pid}.${randomBytes(6).toString('hex')}`.slice(0, 255);
    const temp = await fs.open(
      at(dir.fd, tempName),
      constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW,
      mode,
    );
    let mtimeMs: number;
    try {
      await temp.writeFile(data);
      await temp.sync();
      mtimeMs = (await temp.stat()).mtimeMs;
    } catch (error) {
      await temp.close().catch(() => {});
      await fs.rm(at(dir.fd, tempName), { force: true });
      throw error;
    }
    await temp.close();
    try {
      await fs.rename(at(dir.fd, tempName), at(dir.fd, name));
    } catch (error) {
      await fs.rm(at(dir.fd, tempName), { force: true });
      throw error;
    }
    await dir.sync().catch(() => {});
    return { mtimeMs };
  } finally {
    await dir.close();
  }
}

/**
 * Where descriptor-relative lookups are missing (not Linux): every component is checked with lstat, then
 * written atomically by path. Not race-free against a concurrent link swap — but there the sandbox is
 * unavailable, so an unattended agent has no Bash, and nothing it controls can create a link at all.
 */
async function writeCheckedByPath(
  root: string,
  target: string,
  data: string | Uint8Array,
  options: JailedWriteOptions,
): Promise<{ mtimeMs: number }> {
  await fs.mkdir(root, { recursive: true, mode: options.dirMode ?? 0o700 });
  const realRoot = await fs.realpath(root);
  const segments = segmentsBelow(root, realRoot, target);
  let path = realRoot;
  for (const [i, segment] of segments.entries()) {
    path = `${path}${sep}${segment}`;
    const stat = await fs.lstat(path).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return undefined;
      throw e;
    });
    if (!stat) break;
    if (stat.isSymbolicLink()) throw new JailedWriteError('SYMLINK_IN_PATH', `${segment} is a symlink`);
    if (i === segments.length - 1 && stat.nlink > 1) {
      throw new JailedWriteError('HARD_LINK', 'the file has other hard links');
    }
  }
  const finalPath = join(realRoot, ...segments);
  await writeFileAtomic(finalPath, data, options);
  return { mtimeMs: (await fs.lstat(finalPath)).mtimeMs };
}
