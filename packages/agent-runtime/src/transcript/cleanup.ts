import { promises as fs } from 'node:fs';
import { join } from 'node:path';

// Transcript retention (docs/claude-code-format.md, "Settings and retention"). A session's footprint is its
// transcript `<id>.jsonl` plus the `<id>/` directory beside it (subagents/, tool-results/, session-memory/,
// cache-safe-params.json). It goes as a whole, only when every file of it is older than the period that
// applies to that session, or not at all. Nothing that cannot be attributed to such a session is touched:
// `memory/` directories, files that are not `<id>.jsonl`, directories without a transcript beside them.
// Age is mtime (an active session keeps its files fresh).

export const DEFAULT_CLEANUP_PERIOD_DAYS = 30;
const DAY_MS = 86_400_000;
const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** Bytes of a transcript read to learn the session's launch directory (its first entry with `cwd`). */
const CWD_HEAD_BYTES = 64 * 1024;
/** A footprint with more entries than this is not a session's; it is left alone. */
const MAX_FOOTPRINT_ENTRIES = 100_000;

export interface CleanupReport {
  removedFiles: string[];
  removedDirs: string[];
  /** Old sessions kept because a longer period applied to them or their age could not be established. */
  keptSessions: number;
}

export interface CleanupOptions {
  /** The period for every session (days, > 0); `Infinity` or ≤ 0 disables retention. */
  periodDays?: number;
  nowMs?: number;
  /**
   * The period for one session, given the launch directory its transcript records (undefined when it records
   * none). Returns days; `undefined` means "cannot tell" and keeps the session. Called only for sessions older
   * than `periodDays`; the longer of the two applies.
   */
  periodForSession?: (cwd: string | undefined) => Promise<number | undefined>;
}

async function entries(dir: string) {
  try {
    return await fs.readdir(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

/**
 * Newest file mtime under `dir` (lstat: a symlink counts as itself, never its target; directories' own mtimes
 * do not count), or undefined when the tree cannot be read whole.
 */
async function newestMtime(dir: string, budget: { left: number }): Promise<number | undefined> {
  let newest = Number.NEGATIVE_INFINITY;
  let listing: import('node:fs').Dirent[];
  try {
    listing = await fs.readdir(dir, { withFileTypes: true });
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? newest : undefined;
  }
  for (const entry of listing) {
    if (--budget.left < 0) return undefined;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      const inner = await newestMtime(path, budget);
      if (inner === undefined) return undefined;
      newest = Math.max(newest, inner);
    } else {
      try {
        newest = Math.max(newest, (await fs.lstat(path)).mtimeMs);
      } catch {
        return undefined;
      }
    }
  }
  return newest;
}

/** The `cwd` of the first entry that records one, within the transcript's first 64 KiB. */
export async function transcriptCwd(transcript: string): Promise<string | undefined> {
  let handle: import('node:fs/promises').FileHandle | undefined;
  try {
    handle = await fs.open(transcript, 'r');
    const buffer = Buffer.alloc(CWD_HEAD_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, CWD_HEAD_BYTES, 0);
    const lines = buffer.toString('utf8', 0, bytesRead).split('\n');
    if (bytesRead === CWD_HEAD_BYTES) lines.pop(); // a cut line
    for (const line of lines) {
      if (!line.includes('"cwd"')) continue;
      try {
        const entry = JSON.parse(line) as { cwd?: unknown };
        if (typeof entry.cwd === 'string' && entry.cwd !== '') return entry.cwd;
      } catch {
        // a damaged line: look at the next
      }
    }
    return undefined;
  } catch {
    return undefined;
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/** Cleans `<engramHome>/projects/*` session by session, then removes project directories left empty. */
export async function cleanupOldTranscripts(
  projectsDir: string,
  opts: CleanupOptions = {},
): Promise<CleanupReport> {
  const report: CleanupReport = { removedFiles: [], removedDirs: [], keptSessions: 0 };
  const days = opts.periodDays ?? DEFAULT_CLEANUP_PERIOD_DAYS;
  if (!(days > 0) || !Number.isFinite(days)) return report;
  const nowMs = opts.nowMs ?? Date.now();
  const baseCutoff = nowMs - days * DAY_MS;
  for (const project of await entries(projectsDir)) {
    if (!project.isDirectory() || project.name.startsWith('.')) continue;
    const projectDir = join(projectsDir, project.name);
    const listing = await entries(projectDir);
    const dirs = new Set(listing.filter((e) => e.isDirectory()).map((e) => e.name));
    for (const entry of listing) {
      if (!entry.isFile() || !entry.name.endsWith('.jsonl')) continue;
      const id = entry.name.slice(0, -'.jsonl'.length);
      if (!SESSION_ID.test(id) || id.includes('..') || id === 'memory') continue;
      await cleanSession(projectDir, id, dirs.has(id), baseCutoff, days, nowMs, opts, report);
    }
    try {
      await fs.rmdir(projectDir); // only when empty
      report.removedDirs.push(projectDir);
    } catch {
      // not empty, or gone
    }
  }
  return report;
}

async function cleanSession(
  projectDir: string,
  id: string,
  hasDir: boolean,
  baseCutoff: number,
  baseDays: number,
  nowMs: number,
  opts: CleanupOptions,
  report: CleanupReport,
): Promise<void> {
  const transcript = join(projectDir, `${id}.jsonl`);
  const sessionDir = join(projectDir, id);
  let newest: number | undefined;
  try {
    newest = (await fs.lstat(transcript)).mtimeMs;
  } catch {
    return;
  }
  if (newest >= baseCutoff) return;
  if (hasDir) {
    const inner = await newestMtime(sessionDir, { left: MAX_FOOTPRINT_ENTRIES });
    if (inner === undefined) {
      report.keptSessions++;
      return;
    }
    newest = Math.max(newest, inner);
    if (newest >= baseCutoff) return;
  }
  if (opts.periodForSession) {
    const days = await opts.periodForSession(await transcriptCwd(transcript));
    if (days === undefined || !(days > 0) || !Number.isFinite(days)) {
      report.keptSessions++;
      return;
    }
    if (newest >= nowMs - Math.max(baseDays, days) * DAY_MS) {
      report.keptSessions++;
      return;
    }
  }
  // The transcript goes last: a run interrupted half-way leaves it, so the next run still attributes the rest.
  try {
    // Re-check: the session may have been resumed while its directory was being measured.
    if ((await fs.lstat(transcript)).mtimeMs >= baseCutoff) return;
    if (hasDir) {
      await fs.rm(sessionDir, { recursive: true, force: true });
      report.removedDirs.push(sessionDir);
    }
    await fs.rm(transcript, { force: true });
    report.removedFiles.push(transcript);
  } catch {
    // raced with another cleaner or the session itself: the next run looks again
  }
}
