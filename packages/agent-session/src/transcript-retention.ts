import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { cleanupOldTranscripts } from '@engram/agent-runtime/transcript/cleanup';
import { findProjectRoot } from '@engram/memory-core/paths/git-root';

// Housekeeping the foreground does for the shared ENGRAM_HOME: transcript retention, at most once a day across
// every process (Engram's own marker file's mtime), in the background — it never delays a turn.
//
// The period honours Claude Code's `cleanupPeriodDays` (docs/claude-code-format.md, "Settings and
// retention"): the user settings under ENGRAM_HOME, and for each old session the project and local settings
// of the directory its transcript records. The longest period wins; a settings file that cannot be read as
// JSON, or a `cleanupPeriodDays` that is not a non-negative integer, stops the cleanup for what it governs.

/** Engram's marker; Claude Code keeps its own, which Engram never touches. */
export const CLEANUP_MARKER = '.engram-last-cleanup';
const ONCE_A_DAY_MS = 86_400_000;

export type SettingsPeriod =
  | { kind: 'absent' }
  | { kind: 'days'; days: number }
  /** The file exists but is not JSON, or `cleanupPeriodDays` is not a non-negative integer. */
  | { kind: 'invalid'; file: string };

/** `cleanupPeriodDays` of one settings file. */
export async function readSettingsPeriod(file: string): Promise<SettingsPeriod> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? { kind: 'absent' } : { kind: 'invalid', file };
  }
  let data: unknown;
  try {
    data = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    return { kind: 'invalid', file };
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return { kind: 'invalid', file };
  const value = (data as Record<string, unknown>).cleanupPeriodDays;
  if (value === undefined) return { kind: 'absent' };
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) return { kind: 'invalid', file };
  return { kind: 'days', days: value };
}

/**
 * Combines periods: `undefined` when any source is invalid (nothing it governs may be deleted), else the
 * longest. 0 in a settings file asks Claude Code to delete everything — the shortest keep — so it never
 * shortens Engram's period.
 */
function longest(base: number, periods: SettingsPeriod[]): number | undefined {
  let days = base;
  for (const period of periods) {
    if (period.kind === 'invalid') return undefined;
    if (period.kind === 'days' && period.days > 0) days = Math.max(days, period.days);
  }
  return days;
}

/** The settings files Claude Code reads for a project directory: project, then local. */
export function projectSettingsFiles(projectDir: string): string[] {
  return [join(projectDir, '.claude', 'settings.json'), join(projectDir, '.claude', 'settings.local.json')];
}

/**
 * Runs retention if it has not run in the last day. `periodDays` is ENGRAM_CLEANUP_PERIOD_DAYS (0 keeps
 * everything). Returns whether a cleanup ran.
 */
export async function maybeCleanupTranscripts(
  engramHome: string,
  periodDays: number,
  nowMs = Date.now(),
): Promise<boolean> {
  if (!(periodDays > 0)) return false;
  const marker = join(engramHome, CLEANUP_MARKER);
  try {
    if (nowMs - (await fs.stat(marker)).mtimeMs < ONCE_A_DAY_MS) return false;
  } catch {
    // never ran here
  }
  await fs.mkdir(engramHome, { recursive: true, mode: 0o700 });
  await fs.writeFile(marker, new Date(nowMs).toISOString(), { mode: 0o600 });
  const base = longest(periodDays, [await readSettingsPeriod(join(engramHome, 'settings.json'))]);
  if (base === undefined) return true;
  const perCwd = new Map<string, Promise<number | undefined>>();
  const periodForSession = (cwd: string | undefined): Promise<number | undefined> => {
    if (cwd === undefined || !cwd.startsWith('/')) return Promise.resolve(undefined);
    let found = perCwd.get(cwd);
    if (found === undefined) {
      found = (async () => {
        // The launch directory's settings and, when it is inside a repository, the repository root's.
        const dirs = new Set([cwd]);
        try {
          if ((await fs.stat(cwd)).isDirectory()) dirs.add(await findProjectRoot(cwd));
        } catch {
          // The directory is gone: its settings are gone with it, only the user settings apply.
        }
        const files = [...dirs].flatMap(projectSettingsFiles);
        return longest(base, await Promise.all(files.map(readSettingsPeriod)));
      })();
      perCwd.set(cwd, found);
    }
    return found;
  };
  await cleanupOldTranscripts(join(engramHome, 'projects'), { periodDays: base, nowMs, periodForSession });
  return true;
}
