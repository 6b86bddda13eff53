import { promises as fs } from 'node:fs';
import { isAbsolute, join, normalize, sep } from 'node:path';
import { isSessionId, SESSION_ID_RULE } from '@engram/config/session-id';
import { EngramError } from '@engram/errors/engram-error';
import { findProjectRoot } from './git-root.js';
import { sanitizePath } from './sanitize.js';

// Where everything lives under ENGRAM_HOME (docs/design.md §3). Memory is keyed by the project root (canonical git
// root), transcripts and session memory by the launch directory, exactly as Claude Code lays them out.

export const PROJECTS_DIRNAME = 'projects';
export const MEMORY_DIRNAME = 'memory';
export const ENTRYPOINT_NAME = 'MEMORY.md';
export const TEAM_DIRNAME = 'team';
export const TOOL_RESULTS_DIRNAME = 'tool-results';
export const SESSION_MEMORY_DIRNAME = 'session-memory';
export const SESSION_MEMORY_FILENAME = 'summary.md';

export type MemoryPathErrorCode =
  | 'EMPTY'
  | 'RELATIVE'
  | 'TILDE'
  | 'TOO_SHORT'
  | 'DRIVE_ROOT'
  | 'UNC'
  | 'NUL_BYTE'
  | 'TOO_LARGE'
  | 'INVALID_SESSION_ID'
  | 'INVALID_MEMORY_FILE'
  | 'INVALID_DIR_NAME'
  | 'OUTSIDE_MEMORY_DIR';

export class MemoryPathError extends EngramError {
  declare readonly code: MemoryPathErrorCode;
  constructor(code: MemoryPathErrorCode, message: string) {
    super(code, message, { retryable: false });
  }
}

/**
 * Validates an `ENGRAM_MEMORY_DIR` value. Unset or empty → `undefined` (no override). Otherwise returns the
 * normalized absolute path (NFC, no trailing separator) or throws a MemoryPathError: anything that could make
 * a large or foreign part of the filesystem count as "memory" — and so become writable by memory agents — is
 * refused. `~` is never expanded here: a value starting with `~` is reported, not guessed at.
 */
export function validateMemoryDirOverride(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  const label = 'ENGRAM_MEMORY_DIR';
  if (value.includes('\0')) {
    throw new MemoryPathError('NUL_BYTE', `${label} contains a NUL byte; set it to a plain absolute path.`);
  }
  if (value.startsWith('\\\\') || value.startsWith('//')) {
    throw new MemoryPathError(
      'UNC',
      `${label} is a UNC/network path (starts with \\\\ or //); use a local absolute directory.`,
    );
  }
  if (/^[A-Za-z]:[\\/]*$/.test(value)) {
    throw new MemoryPathError('DRIVE_ROOT', `${label} is a drive root (${value}); use a directory below it.`);
  }
  if (value.startsWith('~')) {
    throw new MemoryPathError(
      'TILDE',
      `${label} starts with "~", which is not expanded; write the absolute path (e.g. /home/me/notes).`,
    );
  }
  const normalized = stripTrailingSeparators(normalize(value)).normalize('NFC');
  if (!isAbsolute(normalized)) {
    throw new MemoryPathError('RELATIVE', `${label} must be an absolute path; got a relative path.`);
  }
  if (normalized.length < 3) {
    throw new MemoryPathError(
      'TOO_SHORT',
      `${label} resolves to "${normalized}", which is too broad to be a memory directory; use a dedicated directory.`,
    );
  }
  return normalized;
}

function stripTrailingSeparators(path: string): string {
  let end = path.length;
  while (end > 1 && (path[end - 1] === '/' || path[end - 1] === sep)) end--;
  return path.slice(0, end);
}

/**
 * Session ids become file and directory names and travel in job payloads, so they follow the one rule of
 * @engram/config/session-id (no separators, dots, NUL or hidden names). Returns the id or throws.
 */
export function validateSessionId(sessionId: string): string {
  if (!isSessionId(sessionId)) {
    throw new MemoryPathError(
      'INVALID_SESSION_ID',
      `Session id must be ${SESSION_ID_RULE}; got ${JSON.stringify(sessionId)}.`,
    );
  }
  return sessionId;
}

export interface EngramPaths {
  engramHome: string;
  cwd: string;
  /** Canonical git root of cwd, else cwd. */
  projectRoot: string;
  /** ENGRAM_HOME/projects/<sanitize(projectRoot)> */
  projectDir: string;
  /** Absolute, no trailing separator (ENGRAM_MEMORY_DIR is NFC-normalised, as Claude Code does). */
  memoryDir: string;
  memoryIndexPath: string;
  teamDir: string;
  teamIndexPath: string;
  /** ENGRAM_HOME/projects/<sanitize(cwd)> */
  transcriptDir: string;
  transcriptPath(sessionId: string): string;
  sessionDir(sessionId: string): string;
  toolResultsDir(sessionId: string): string;
  sessionMemoryPath(sessionId: string): string;
}

export interface EngramPathOptions {
  engramHome: string;
  cwd: string;
  /** Raw ENGRAM_MEMORY_DIR value; validated here. */
  memoryDirOverride?: string;
}

/**
 * Resolves every Engram path for a session launched in `cwd` (looks up the canonical git root). Directories an
 * earlier Engram created under the NFC-normalised name are adopted first (adoptLegacyNormalizedDir).
 */
export async function resolveEngramPaths(opts: EngramPathOptions): Promise<EngramPaths> {
  const cwd = requireAbsolute(opts.cwd, 'cwd');
  const projectRoot = await findProjectRoot(cwd);
  const paths = engramPathsFor({ ...opts, cwd, projectRoot });
  const projectsDir = join(paths.engramHome, PROJECTS_DIRNAME);
  await adoptLegacyNormalizedDir(projectsDir, paths.projectRoot);
  if (paths.cwd !== paths.projectRoot) await adoptLegacyNormalizedDir(projectsDir, paths.cwd);
  return paths;
}

/**
 * Engram before Claude Code 2.1.x compatibility NFC-normalised a path before sanitizing it; Claude Code does
 * not (docs/claude-code-format.md, "Paths"), so a decomposed (NFD) path maps to a different directory now.
 * This moves what the old directory holds into the new one, never losing anything: when the new directory
 * does not exist the old one is renamed; otherwise every entry missing from the new one is moved over
 * (directories merged recursively) and an entry present in both stays in the old directory. Returns the
 * names of entries left behind (empty when the old directory is gone or never existed).
 */
export async function adoptLegacyNormalizedDir(projectsDir: string, rawPath: string): Promise<string[]> {
  const current = sanitizePath(rawPath);
  const legacy = sanitizePath(rawPath.normalize('NFC'));
  if (current === legacy) return [];
  const from = join(projectsDir, legacy);
  const to = join(projectsDir, current);
  const left: string[] = [];
  try {
    await mergeInto(from, to, '', left);
  } catch (error) {
    // An unreadable or racing directory stays where it is; the next start tries again.
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') left.push('.');
  }
  return left;
}

async function mergeInto(from: string, to: string, rel: string, left: string[]): Promise<void> {
  const fromStat = await fs.lstat(from).catch(() => undefined);
  if (fromStat === undefined) return;
  const toStat = await fs.lstat(to).catch(() => undefined);
  if (toStat === undefined) {
    try {
      await fs.rename(from, to);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') left.push(rel || '.');
    }
    return;
  }
  if (!fromStat.isDirectory() || !toStat.isDirectory() || fromStat.isSymbolicLink()) {
    left.push(rel || '.');
    return;
  }
  for (const name of await fs.readdir(from)) {
    await mergeInto(join(from, name), join(to, name), rel ? `${rel}/${name}` : name, left);
  }
  await fs.rmdir(from).catch(() => undefined); // only when now empty
}

/** Synchronous variant for callers that already know the project root (e.g. from a job payload). */
export function engramPathsFor(opts: EngramPathOptions & { projectRoot: string }): EngramPaths {
  const cwd = stripTrailingSeparators(normalize(requireAbsolute(opts.cwd, 'cwd')));
  const projectRoot = stripTrailingSeparators(normalize(requireAbsolute(opts.projectRoot, 'projectRoot')));
  return {
    ...engramPathsFromDirNames({
      engramHome: opts.engramHome,
      projectDirName: sanitizePath(projectRoot),
      transcriptDirName: sanitizePath(cwd),
      ...(opts.memoryDirOverride !== undefined ? { memoryDirOverride: opts.memoryDirOverride } : {}),
    }),
    cwd,
    projectRoot,
  };
}

export interface DirNamePathOptions {
  engramHome: string;
  /** sanitizePath(projectRoot), as carried by job payloads. */
  projectDirName: string;
  /** sanitizePath(cwd), as carried by job payloads. */
  transcriptDirName: string;
  memoryDirOverride?: string | undefined;
}

/**
 * Paths for a worker that knows a session only by the sanitized directory names in its job payload (the
 * original project root and cwd belong to the agent's machine). `cwd` and `projectRoot` are unknown here and
 * set to the corresponding directories under ENGRAM_HOME.
 */
export function engramPathsFromDirNames(opts: DirNamePathOptions): EngramPaths {
  for (const [label, name] of [
    ['projectDirName', opts.projectDirName],
    ['transcriptDirName', opts.transcriptDirName],
  ] as const) {
    if (!/^[A-Za-z0-9-]{1,250}$/.test(name)) {
      throw new MemoryPathError(
        'INVALID_DIR_NAME',
        `${label} must be a sanitized directory name ([A-Za-z0-9-]).`,
      );
    }
  }
  const engramHome = stripTrailingSeparators(normalize(requireAbsolute(opts.engramHome, 'engramHome')));
  const projectDir = join(engramHome, PROJECTS_DIRNAME, opts.projectDirName);
  const memoryDir = validateMemoryDirOverride(opts.memoryDirOverride) ?? join(projectDir, MEMORY_DIRNAME);
  const teamDir = join(memoryDir, TEAM_DIRNAME);
  const transcriptDir = join(engramHome, PROJECTS_DIRNAME, opts.transcriptDirName);
  const sessionDir = (sessionId: string) => join(transcriptDir, validateSessionId(sessionId));
  return {
    engramHome,
    cwd: transcriptDir,
    projectRoot: projectDir,
    projectDir,
    memoryDir,
    memoryIndexPath: join(memoryDir, ENTRYPOINT_NAME),
    teamDir,
    teamIndexPath: join(teamDir, ENTRYPOINT_NAME),
    transcriptDir,
    transcriptPath: (sessionId) => join(transcriptDir, `${validateSessionId(sessionId)}.jsonl`),
    sessionDir,
    toolResultsDir: (sessionId) => join(sessionDir(sessionId), TOOL_RESULTS_DIRNAME),
    sessionMemoryPath: (sessionId) =>
      join(sessionDir(sessionId), SESSION_MEMORY_DIRNAME, SESSION_MEMORY_FILENAME),
  };
}

function requireAbsolute(value: string, label: string): string {
  if (typeof value !== 'string' || value === '') {
    throw new MemoryPathError('EMPTY', `${label} is empty; pass an absolute path.`);
  }
  if (value.includes('\0')) throw new MemoryPathError('NUL_BYTE', `${label} contains a NUL byte.`);
  if (!isAbsolute(value)) {
    throw new MemoryPathError(
      'RELATIVE',
      `${label} must be an absolute path (resolve it against the launch directory first).`,
    );
  }
  // As given: Claude Code sanitizes without Unicode normalisation (docs/claude-code-format.md, "Paths").
  return value;
}

/**
 * String-only check (no filesystem access) that `path` lies strictly inside `memoryDir`, after normalizing
 * `..` and Unicode — the rule Claude Code's isAutoMemPath applies when classifying transcript tool calls.
 * Relative paths, `~` and NUL are never memory paths. Not a security check for writes: use resolveInside.
 */
export function isMemoryPathSync(path: string, memoryDir: string): boolean {
  if (typeof path !== 'string' || path === '' || path.includes('\0')) return false;
  if (!isAbsolute(path) || !isAbsolute(memoryDir)) return false;
  const target = normalize(path).normalize('NFC');
  const root = stripTrailingSeparators(normalize(memoryDir)).normalize('NFC');
  const prefix = root.endsWith(sep) ? root : root + sep;
  return target.startsWith(prefix) && target.length > prefix.length;
}
