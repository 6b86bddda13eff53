import { isAbsolute, relative, sep } from 'node:path';
import {
  type HeldEntry,
  judgePath,
  type OpenedEntry,
  openJudged,
  type ReadBoundary,
  ReadBoundaryError,
} from '../sandbox/read-boundary.js';
import { ToolError } from './tool.js';

// Grep's and Glob's half of the read boundary (sandbox/read-boundary.ts): the search root is judged on the
// inode it opens (a root that is a symlink out of the boundary is refused) and held open, so the search runs
// from that descriptor, never from the name again; below it Glob's walk opens each directory relative to its
// parent with O_NOFOLLOW (fs-walk `descriptors`) and Grep's ripgrep runs in a mount namespace holding only
// the root (search-jail.ts). Every path a search lists is judged again, on what it opens at that moment,
// before it reaches the model. A job without a boundary still only searches regular files and directories.

const ANY_PATH: ReadBoundary = { kind: 'roots', roots: ['/'] };

function searchRootError(e: unknown, shown: string, directoryOnly: boolean): unknown {
  if (!(e instanceof ReadBoundaryError)) return e;
  if (e.code === 'NOT_FOUND') {
    return new ToolError('NOT_FOUND', `${directoryOnly ? 'Directory' : 'Path'} does not exist: ${shown}`);
  }
  if (e.code === 'NOT_REGULAR') {
    return new ToolError(
      'NOT_REGULAR',
      `${shown} is not a regular file or a directory; refused to search it.`,
    );
  }
  return new ToolError('OUTSIDE_BOUNDARY', `Refused to search ${shown}: ${e.message}.`);
}

/** The judged search root: `directoryOnly` refuses a file (Glob); `shown` is the path as the model gave it. */
export async function judgeSearchRoot(
  boundary: ReadBoundary | undefined,
  path: string,
  shown: string,
  directoryOnly: boolean,
): Promise<OpenedEntry> {
  const held = await holdSearchRoot(boundary, path, shown, directoryOnly);
  await held.handle.close();
  return held;
}

/**
 * The judged search root, held open: the search then runs from `anchor` (its descriptor), so a root swapped
 * for a link after the judgment is never searched. The caller closes `handle`.
 */
export async function holdSearchRoot(
  boundary: ReadBoundary | undefined,
  path: string,
  shown: string,
  directoryOnly: boolean,
): Promise<HeldEntry> {
  let held: HeldEntry;
  try {
    held = await openJudged(boundary ?? ANY_PATH, path);
  } catch (e) {
    throw searchRootError(e, shown, directoryOnly);
  }
  if (directoryOnly && !held.stat.isDirectory()) {
    await held.handle.close();
    throw new ToolError('NOT_DIRECTORY', `Path is not a directory: ${shown}`);
  }
  return held;
}

function isUnder(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/**
 * The judged entry of a path a search listed, or undefined when what it opens now is outside the boundary,
 * outside the judged search root (`rootReal`), gone, or neither a regular file nor a directory.
 */
export async function judgeListed(
  boundary: ReadBoundary | undefined,
  rootReal: string,
  path: string,
): Promise<OpenedEntry | undefined> {
  try {
    const entry = await judgePath(boundary ?? ANY_PATH, path);
    return entry.stat.isFile() && isUnder(entry.realPath, rootReal) ? entry : undefined;
  } catch (e) {
    if (e instanceof ReadBoundaryError) return undefined;
    throw e;
  }
}
