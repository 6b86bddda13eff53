import { isAbsolute, relative, sep } from 'node:path';
import {
  judgePath,
  type OpenedEntry,
  type ReadBoundary,
  ReadBoundaryError,
} from '../sandbox/read-boundary.js';
import { ToolError } from './tool.js';

// Grep's and Glob's half of the read boundary (sandbox/read-boundary.ts): the search root is judged on the
// inode it opens (a root that is a symlink out of the boundary is refused), and every path a search lists
// is judged again, on what its name opens at that moment, before it reaches the model. A job without a
// boundary still only searches regular files and directories.

const ANY_PATH: ReadBoundary = { kind: 'roots', roots: ['/'] };

/** The judged search root: `directoryOnly` refuses a file (Glob); `shown` is the path as the model gave it. */
export async function judgeSearchRoot(
  boundary: ReadBoundary | undefined,
  path: string,
  shown: string,
  directoryOnly: boolean,
): Promise<OpenedEntry> {
  let entry: OpenedEntry;
  try {
    entry = await judgePath(boundary ?? ANY_PATH, path);
  } catch (e) {
    if (!(e instanceof ReadBoundaryError)) throw e;
    if (e.code === 'not_found') {
      throw new ToolError('not_found', `${directoryOnly ? 'Directory' : 'Path'} does not exist: ${shown}`);
    }
    if (e.code === 'not_regular') {
      throw new ToolError(
        'not_regular',
        `${shown} is not a regular file or a directory; refused to search it.`,
      );
    }
    throw new ToolError('outside_boundary', `Refused to search ${shown}: ${e.message}.`);
  }
  if (directoryOnly && !entry.stat.isDirectory()) {
    throw new ToolError('not_directory', `Path is not a directory: ${shown}`);
  }
  return entry;
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
