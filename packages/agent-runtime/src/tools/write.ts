import { isAbsolute, relative, resolve, sep } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { z } from 'zod';
import { JailedWriteError, writeFileJailed } from '../sandbox/jailed-write.js';
import {
  assertReadAndUnchanged,
  hashContent,
  readTextIfExists,
  recordWrite,
  resolveToolPath,
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

export async function writeToolFile(ctx: ToolContext, path: string, content: string): Promise<number> {
  const modes = ctx.fileModes ?? DEFAULT_FILE_MODES;
  // Unattended (ctx.sandbox) or served (ctx.writeRoots): the write itself is confined to a directory (a link
  // swapped in after the policy's check cannot redirect it).
  const root = ctx.sandbox
    ? ctx.sandbox.writableRoot
    : ctx.writeRoots
      ? writeRootOf(ctx.writeRoots, path)
      : undefined;
  if (root === undefined) {
    await writeFileAtomic(path, content, { mode: modes.file, dirMode: modes.dir });
    return recordWrite(ctx.readFileState, path, content);
  }
  try {
    const { mtimeMs } = await writeFileJailed(root, path, content, { mode: modes.file, dirMode: modes.dir });
    ctx.readFileState.set(path, { mtimeMs, contentHash: hashContent(content) });
    return mtimeMs;
  } catch (error) {
    if (error instanceof JailedWriteError) {
      throw new ToolError(error.code, `Refused to write ${path}: ${error.message}.`);
    }
    throw error;
  }
}

/** The root of `roots` that `path` names a file below (the deepest, when roots nest), or a refusal. */
function writeRootOf(roots: readonly string[], path: string): string {
  let best: string | undefined;
  for (const root of roots) {
    if (!isBelow(resolve(root), path)) continue;
    if (best === undefined || root.length > best.length) best = resolve(root);
  }
  if (best === undefined) {
    throw new ToolError(
      'OUTSIDE_ROOT',
      `Refused to write ${path}: it is outside the directories this session may write.`,
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
    const path = resolveToolPath(ctx.cwd, input.file_path);
    const existing = await readTextIfExists(path, ctx.readBoundary);
    if (existing !== undefined) await assertReadAndUnchanged(ctx.readFileState, path, existing);
    const mtimeMs = await writeToolFile(ctx, path, input.content);
    const kind = existing === undefined ? 'create' : 'update';
    return {
      content:
        kind === 'create'
          ? `File created successfully at: ${input.file_path}`
          : `The file ${input.file_path} has been updated successfully.`,
      record: { filePath: path, mtimeMs, kind },
    };
  },
});
