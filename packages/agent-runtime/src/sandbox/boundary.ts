import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { ReadBoundary } from './read-boundary.js';

// The filesystem boundary of a run, as plain configuration its caller states: a memory job's fork (the job
// handler, through the fork plan), a served turn (turn-runner), `engram sandbox`. Nothing reads it off a
// permission policy: the policy is a filter, this is the boundary, and a run that has none says so
// (`{ kind: 'attended' }`: a person approves each call). `prepareUnattended` (unattended.ts) resolves it into
// what the tools see (`ToolContext.boundary`).

/** The one directory an unattended agent may change. */
export interface WriteJail {
  /** Write/Edit land only below it, through the jailed writer (created if missing). */
  root: string;
  /**
   * Whether Bash may write `root` too: 'read-only' for a memory fork (only Write/Edit, after the policy,
   * change memory, so Bash cannot plant a link or `.git` there), 'write-root' for a served workspace.
   */
  bash: 'read-only' | 'write-root';
  /** Directories besides `root` that Write/Edit (never Bash) may change: a served turn's memory directory. */
  alsoWritable?: readonly string[];
}

/**
 * A directory the agent names by one path and works on at another: a staged fork's prompt names the live
 * memory directory (`visible`) while its files are a private copy (`actual`). Every file tool maps a path
 * under `visible` to the same relative path under `actual` before it opens or judges anything, and shows
 * `visible` in what it returns; Bash sees `actual` mounted at `visible`.
 */
export interface PathAlias {
  visible: string;
  actual: string;
}

/** A run no person approves: every field is required except the alias. */
export interface UnattendedBoundary {
  kind: 'unattended';
  jail: WriteJail;
  /** What Read, Grep, Glob and Write/Edit's read-before-write may open, judged on the opened inode. */
  read: ReadBoundary;
  /**
   * What Bash sees besides the jail root (read-only), its world: a tenant's job its workspace and ENGRAM_HOME
   * area, a CLI fork its working directory (`worldFor`). Nothing else of the host is mounted.
   */
  world: readonly string[];
  alias?: PathAlias;
}

/** A run a person approves call by call (the CLI's foreground): no jail, no OS sandbox, no read boundary. */
export interface AttendedBoundary {
  kind: 'attended';
}

export type RunBoundary = UnattendedBoundary | AttendedBoundary;

export const ATTENDED: AttendedBoundary = { kind: 'attended' };

/** A job's Bash world from its read boundary: a tenant's roots, or (a local job) its working directory. */
export function worldFor(read: ReadBoundary, cwd: string): readonly string[] {
  return read.kind === 'roots' ? read.roots : [cwd];
}

function below(path: string, dir: string): string | undefined {
  const rel = relative(dir, path);
  if (rel === '') return '';
  return rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel) ? undefined : rel;
}

/**
 * `path` (absolute, as the tool resolved it) as the file tools open it: under `alias.actual` it stays as it
 * is; under `alias.visible` it becomes the same relative path under `actual`. The path is normalised first,
 * so `..` never climbs out of `actual` by way of the mapping; where it leads is judged on what is opened.
 */
export function actualPath(alias: PathAlias | undefined, path: string): string {
  if (!alias) return path;
  const abs = resolve(path);
  if (below(abs, alias.actual) !== undefined) return abs;
  const rel = below(abs, alias.visible);
  return rel === undefined ? abs : rel === '' ? alias.actual : join(alias.actual, rel);
}

/** `path` as the agent is shown it: under `alias.actual`, the same relative path under `visible`. */
export function visiblePath(alias: PathAlias | undefined, path: string): string {
  if (!alias) return path;
  const rel = below(resolve(path), alias.actual);
  return rel === undefined ? path : rel === '' ? alias.visible : join(alias.visible, rel);
}

/** The inputs of the file tools that name a path (Read/Write/Edit `file_path`, Glob/Grep `path`). */
const PATH_INPUTS = ['file_path', 'path'] as const;

/**
 * A tool call's input as the tools will open it: each path input resolved against `cwd` (the tools' working
 * directory; the process's when not given) and mapped through the alias (`actualPath`), so a permission
 * policy judges the same file the tool opens. Unchanged without an alias.
 */
export function actualInput(
  alias: PathAlias | undefined,
  input: Record<string, unknown>,
  cwd = '',
): Record<string, unknown> {
  if (!alias) return input;
  const out = { ...input };
  for (const key of PATH_INPUTS) {
    const value = input[key];
    if (typeof value === 'string' && value !== '') out[key] = actualPath(alias, resolve(cwd, value));
  }
  return out;
}

/** A message (an error our own code wrote) with every mention of `alias.actual` shown as `visible`. */
export function visibleText(alias: PathAlias | undefined, text: string): string {
  if (!alias) return text;
  // Only the whole name: `<actual>2/…` is another directory.
  const escaped = alias.actual.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return text.replace(new RegExp(`${escaped}(?![^/\\s'"\`),;:])`, 'g'), () => alias.visible);
}
