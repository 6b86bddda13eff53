import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { actualPath, visiblePath, visibleText } from '../sandbox/boundary.js';
import { type ReadBoundary, ReadBoundaryError, readFileBounded } from '../sandbox/read-boundary.js';
import { aliasOf } from '../sandbox/unattended.js';
import { type ReadFileState, type ToolContext, ToolError } from './tool.js';

// The "read before you write" rule Write and Edit share, as in Claude Code: an existing file can only be
// changed after the model has read it in this context, and only if nobody changed it since.

export function resolveToolPath(cwd: string, filePath: string): string {
  return isAbsolute(filePath) ? resolve(filePath) : resolve(cwd, filePath);
}

/**
 * A path a file tool was given: where it opens it (`actual`) and how it shows it, in results, records and
 * the read state (`shown`). They differ only under the run's path alias (sandbox/boundary.ts), which is
 * applied before anything is opened or judged; the judgement is on what `actual` opens.
 */
export interface ToolPath {
  actual: string;
  shown: string;
}

export function toolPath(ctx: Pick<ToolContext, 'cwd' | 'boundary'>, filePath: string): ToolPath {
  const alias = aliasOf(ctx.boundary);
  const actual = actualPath(alias, resolveToolPath(ctx.cwd, filePath));
  return { actual, shown: visiblePath(alias, actual) };
}

/** `text` (a message our code wrote) with the run's alias applied: what the agent is shown. */
export function shownText(ctx: Pick<ToolContext, 'boundary'>, text: string): string {
  return visibleText(aliasOf(ctx.boundary), text);
}

export function hashContent(content: string | Buffer): string {
  return createHash('sha256').update(content).digest('hex');
}

export const NOT_READ_MESSAGE = 'File has not been read yet. Read it first before writing to it.';
export const MODIFIED_SINCE_READ_MESSAGE =
  'File has been modified since read, either by the user or by a linter. Read it again before attempting to write it.';

/** Throws unless `path` (which exists, with `currentContent`) was read and is unchanged since. */
export async function assertReadAndUnchanged(
  state: ReadFileState,
  path: ToolPath,
  currentContent: string,
): Promise<void> {
  const record = state.get(path.shown);
  if (!record || record.isPartialView) throw new ToolError('NOT_READ', NOT_READ_MESSAGE);
  const { mtimeMs } = await fs.stat(path.actual);
  if (mtimeMs > record.mtimeMs) {
    // mtime can move without a content change (touch, checkout); a full read's hash settles it.
    if (record.contentHash !== undefined && record.contentHash === hashContent(currentContent)) return;
    throw new ToolError('MODIFIED_SINCE_READ', MODIFIED_SINCE_READ_MESSAGE);
  }
}

/** After a tool wrote `path`, the model knows its contents: record that as a full read. */
export async function recordWrite(state: ReadFileState, path: ToolPath, content: string): Promise<number> {
  const { mtimeMs } = await fs.stat(path.actual);
  state.set(path.shown, { mtimeMs, contentHash: hashContent(content) });
  return mtimeMs;
}

/** Write/Edit's read of the current contents: bounded like Read (regular files only, non-blocking, capped). */
export const MAX_EDIT_FILE_BYTES = 64 * 1024 * 1024;

export async function readTextIfExists(
  path: ToolPath,
  boundary: ReadBoundary | undefined,
  maxBytes = MAX_EDIT_FILE_BYTES,
): Promise<string | undefined> {
  try {
    return (await readFileBounded(boundary, path.actual, maxBytes)).data.toString('utf8');
  } catch (e) {
    if (!(e instanceof ReadBoundaryError)) throw e;
    if (e.code === 'NOT_FOUND') return undefined;
    if (e.code === 'IS_DIRECTORY') {
      throw new ToolError('IS_DIRECTORY', `${path.shown} is a directory, not a file.`);
    }
    const why = e.message.split(path.actual).join(path.shown);
    throw new ToolError(e.code, `Refused to read ${path.shown} before writing it: ${why}.`);
  }
}
