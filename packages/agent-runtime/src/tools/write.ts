import { isAbsolute, relative, resolve, sep } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { z } from 'zod';
import { JailedWriteError, writeFileJailed } from '../sandbox/jailed-write.js';
import { readBoundaryOf } from '../sandbox/unattended.js';
import {
  assertReadAndUnchanged,
  hashContent,
  readTextIfExists,
  recordWrite,
  shownText,
  type ToolPath,
  toolPath,
} from './file-state.js';
import { defineTool, type ToolContext, ToolError } from './tool.js';

// Write: creates a file or replaces one the model has read (and that has not changed since). Atomic, so a
// crash never leaves half a file.

export const DEFAULT_FILE_MODES = { file: 0o644, dir: 0o755 } as const;

export const writeInputSchema = z.strictObject({
  file_path: z
    .string()
    .min(1)
    .describe('The absolute path to the file to write (must be absolute, not relative)'),
  content: z.string().describe('The content to write to the file'),
});
export type WriteInput = z.infer<typeof writeInputSchema>;

export async function writeToolFile(ctx: ToolContext, path: ToolPath, content: string): Promise<number> {
  const modes = ctx.fileModes ?? DEFAULT_FILE_MODES;
  // Unattended: the write itself is confined to a directory of the boundary's (a link swapped in after the
  // policy's check cannot redirect it). Attended: a person approved it.
  if (ctx.boundary.kind === 'attended') {
    await writeFileAtomic(path.actual, content, { mode: modes.file, dirMode: modes.dir });
    return recordWrite(ctx.readFileState, path, content);
  }
  const root = writeRootOf(ctx.boundary.writeRoots, path);
  try {
    const { mtimeMs } = await writeFileJailed(root, path.actual, content, {
      mode: modes.file,
      dirMode: modes.dir,
    });
    ctx.readFileState.set(path.shown, { mtimeMs, contentHash: hashContent(content) });
    return mtimeMs;
  } catch (error) {
    if (error instanceof JailedWriteError) {
      throw new ToolError(error.code, shownText(ctx, `Refused to write ${path.shown}: ${error.message}.`));
    }
    throw error;
  }
}

/** The root of `roots` that `path` names a file below (the deepest, when roots nest), or a refusal. */
function writeRootOf(roots: readonly string[], path: ToolPath): string {
  let best: string | undefined;
  for (const root of roots) {
    if (!isBelow(resolve(root), path.actual)) continue;
    if (best === undefined || root.length > best.length) best = resolve(root);
  }
  if (best === undefined) {
    throw new ToolError(
      'OUTSIDE_ROOT',
      `Refused to write ${path.shown}: it is outside the directories this session may write.`,
    );
  }
  return best;
}

function isBelow(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
}

export const writeTool = defineTool<WriteInput>({
  name: 'Write',
  description: [
    'Writes a file to the local filesystem, replacing it if it exists.',
    '- If the file exists, you must Read it first in this conversation; the write fails otherwise.',
    '- Prefer Edit for changes to existing files; Write is for new files or complete rewrites.',
    '- file_path must be an absolute path.',
  ].join('\n'),
  inputSchema: writeInputSchema,
  maxResultChars: 100_000,
  isReadOnly: () => false,
  async call(input, ctx) {
    const path = toolPath(ctx, input.file_path);
    const existing = await readTextIfExists(path, readBoundaryOf(ctx.boundary));
    if (existing !== undefined) await assertReadAndUnchanged(ctx.readFileState, path, existing);
    const mtimeMs = await writeToolFile(ctx, path, input.content);
    const kind = existing === undefined ? 'create' : 'update';
    return {
      content:
        kind === 'create'
          ? `File created successfully at: ${input.file_path}`
          : `The file ${input.file_path} has been updated successfully.`,
      record: { filePath: path.shown, mtimeMs, kind },
    };
  },
});
