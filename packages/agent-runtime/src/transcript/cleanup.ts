import { promises as fs } from 'node:fs';
import { join } from 'node:path';

// Transcript retention (DESIGN §7): session transcripts (`*.jsonl`) and persisted tool results older than the
// retention period are deleted, then session and project directories left empty. Memory directories and
// session-memory notes are never touched. Age is the file's mtime (an active session keeps its file fresh).

export const DEFAULT_CLEANUP_PERIOD_DAYS = 30;
const DAY_MS = 86_400_000;

export interface CleanupReport {
  removedFiles: string[];
  removedDirs: string[];
}

async function entries(dir: string) {
  try {
    return await fs.readdir(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

async function removeIfOlder(path: string, cutoffMs: number, report: CleanupReport): Promise<void> {
  try {
    const stat = await fs.lstat(path);
    if (stat.isFile() && stat.mtimeMs < cutoffMs) {
      await fs.rm(path, { force: true });
      report.removedFiles.push(path);
    }
  } catch {
    // raced with another cleaner or the session itself: leave it
  }
}

async function removeIfEmpty(dir: string, report: CleanupReport): Promise<void> {
  try {
    await fs.rmdir(dir); // fails unless empty, which is exactly the rule
    report.removedDirs.push(dir);
  } catch {
    // not empty, or gone
  }
}

/** Cleans `<engramHome>/projects/*`: old transcripts and tool results, then empty session/project dirs. */
export async function cleanupOldTranscripts(
  projectsDir: string,
  opts: { periodDays?: number; nowMs?: number } = {},
): Promise<CleanupReport> {
  const report: CleanupReport = { removedFiles: [], removedDirs: [] };
  const days = opts.periodDays ?? DEFAULT_CLEANUP_PERIOD_DAYS;
  if (!(days > 0)) return report;
  const cutoffMs = (opts.nowMs ?? Date.now()) - days * DAY_MS;
  for (const project of await entries(projectsDir)) {
    if (!project.isDirectory()) continue;
    const projectDir = join(projectsDir, project.name);
    for (const entry of await entries(projectDir)) {
      const path = join(projectDir, entry.name);
      if (entry.isFile() && entry.name.endsWith('.jsonl')) {
        await removeIfOlder(path, cutoffMs, report);
      } else if (entry.isDirectory() && entry.name !== 'memory') {
        // A session directory: its tool results age out; its session-memory notes stay.
        const toolResults = join(path, 'tool-results');
        for (const result of await entries(toolResults)) {
          if (result.isFile()) await removeIfOlder(join(toolResults, result.name), cutoffMs, report);
        }
        await removeIfEmpty(toolResults, report);
        await removeIfOlder(join(path, 'cache-safe-params.json'), cutoffMs, report);
        await removeIfEmpty(path, report);
      }
    }
    await removeIfEmpty(projectDir, report);
  }
  return report;
}
