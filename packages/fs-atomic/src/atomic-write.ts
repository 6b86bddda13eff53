import { randomBytes } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import { basename, dirname, join } from 'node:path';

// Every file Engram writes goes through here: a temp file in the same directory, fsync, then rename, so a
// process killed at any instant leaves either the old file or the new one — never half of either.

export const TEMP_PREFIX = '.engram-tmp-';

export interface AtomicWriteOptions {
  /** Mode for a newly created file (an existing file keeps its own mode). Default 0o600. */
  mode?: number;
  /** Mode for directories created on the way. Default 0o700. */
  dirMode?: number;
}

export function isTempFileName(name: string): boolean {
  return name.startsWith(TEMP_PREFIX);
}

export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<void> {
  const dir = dirname(path);
  await fs.mkdir(dir, { recursive: true, mode: options.dirMode ?? 0o700 });
  let mode = options.mode ?? 0o600;
  try {
    mode = (await fs.stat(path)).mode & 0o777;
  } catch {
    // new file: use the requested mode
  }
  const temp = join(dir, `${TEMP_PREFIX}${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}`);
  const handle = await fs.open(temp, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, mode);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => {});
    await fs.rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  try {
    await fs.rename(temp, path);
  } catch (error) {
    await fs.rm(temp, { force: true });
    throw error;
  }
  await syncDir(dir);
}

/**
 * Creates `path` only if it does not exist (O_EXCL). Returns false when it already existed, so a retried job
 * that reaches the same step again reuses the first result instead of overwriting it.
 */
export async function createExclusive(
  path: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<boolean> {
  await fs.mkdir(dirname(path), { recursive: true, mode: options.dirMode ?? 0o700 });
  const temp = join(
    dirname(path),
    `${TEMP_PREFIX}${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}`,
  );
  await fs.writeFile(temp, data, { mode: options.mode ?? 0o600, flag: 'wx' });
  try {
    // link() fails with EEXIST instead of replacing, which gives exclusive-create semantics to a complete file.
    await fs.link(temp, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await fs.rm(temp, { force: true });
  }
}

/** Removes temp files an earlier killed writer left behind in `dir` (older than `olderThanMs`). */
export async function removeStaleTempFiles(dir: string, olderThanMs = 60_000): Promise<string[]> {
  const removed: string[] = [];
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch {
    return removed;
  }
  const now = Date.now();
  for (const name of names) {
    if (!isTempFileName(name)) continue;
    const full = join(dir, name);
    try {
      const stat = await fs.stat(full);
      if (now - stat.mtimeMs >= olderThanMs) {
        await fs.rm(full, { force: true });
        removed.push(full);
      }
    } catch {
      // raced with another cleaner
    }
  }
  return removed;
}

async function syncDir(dir: string): Promise<void> {
  try {
    const handle = await fs.open(dir, constants.O_RDONLY);
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Some filesystems refuse fsync on a directory; the rename itself is still atomic.
  }
}
