import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';

// `<memoryDir>/.consolidate-lock`, as Claude Code keeps it (docs/claude-code-memory.md §8.5–8): its body is the
// holder's PID and its mtime IS "last consolidated at". Engram's real lock lives in the queue's state store
// (it must work across machines); this file is stamped alongside it so that a Claude Code user sharing the
// memory directory sees the same "last consolidated" time, and rolled back the same way on failure.

export const CONSOLIDATE_LOCK_FILE = '.consolidate-lock';

export interface ConsolidateLockFile {
  mtimeMs: number;
  body: string;
}

export function consolidateLockPath(memoryDir: string): string {
  return join(memoryDir, CONSOLIDATE_LOCK_FILE);
}

/** The file's mtime (whole milliseconds) and body, or undefined when there is none. */
export async function readConsolidateLockFile(memoryDir: string): Promise<ConsolidateLockFile | undefined> {
  const path = consolidateLockPath(memoryDir);
  try {
    const [stat, body] = await Promise.all([fs.stat(path), fs.readFile(path, 'utf8')]);
    return { mtimeMs: Math.round(stat.mtimeMs), body };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Stamps the lock file: body = `holder` (a PID, so Claude Code's liveness check parses it), mtime = `atMs`
 * (the consolidation's start). Returns the prior mtime (0 when there was no file) for a rollback.
 */
export async function stampConsolidateLockFile(
  memoryDir: string,
  holder: string | number,
  atMs: number,
): Promise<number> {
  const prior = await readConsolidateLockFile(memoryDir).catch(() => undefined);
  const path = consolidateLockPath(memoryDir);
  await writeFileAtomic(path, String(holder), { mode: 0o600 });
  const at = new Date(atMs);
  await fs.utimes(path, at, at);
  return prior?.mtimeMs ?? 0;
}

/**
 * Undoes a stamp: with no prior time, removes the file; otherwise empties the body (so no live process looks
 * like its holder) and sets the mtime back to `priorMs`.
 */
export async function rollbackConsolidateLockFile(memoryDir: string, priorMs: number): Promise<void> {
  const path = consolidateLockPath(memoryDir);
  if (!priorMs) {
    await fs.rm(path, { force: true });
    return;
  }
  await writeFileAtomic(path, '', { mode: 0o600 });
  const at = new Date(priorMs);
  await fs.utimes(path, at, at);
}
