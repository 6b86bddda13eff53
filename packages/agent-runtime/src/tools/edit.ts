import { z } from 'zod';
import { readBoundaryOf } from '../sandbox/unattended.js';
import { assertReadAndUnchanged, readTextIfExists, toolPath } from './file-state.js';
import { defineTool, ToolError } from './tool.js';
import { writeToolFile } from './write.js';

// Edit: exact string replacement in a file the model has read. The match must be unique unless
// replace_all is set, so an edit never lands somewhere the model did not mean.

export const editInputSchema = z.strictObject({
  file_path: z.string().min(1).describe('The absolute path to the file to modify'),
  old_string: z.string().describe('The text to replace'),
  new_string: z.string().describe('The text to replace it with (must be different from old_string)'),
  replace_all: z.boolean().default(false).describe('Replace all occurrences of old_string (default false)'),
});
export type EditInput = z.output<typeof editInputSchema>;

export function countOccurrences(haystack: string, needle: string): number {
  if (needle.length === 0) return 0;
  let count = 0;
  let at = haystack.indexOf(needle);
  while (at !== -1) {
    count++;
    at = haystack.indexOf(needle, at + needle.length);
  }
  return count;
}

/** Pure replacement (no `$&`-style patterns, unlike String.prototype.replace with a string). */
export function applyEdit(
  content: string,
  oldString: string,
  newString: string,
  replaceAll: boolean,
): string {
  if (replaceAll) return content.split(oldString).join(newString);
  const at = content.indexOf(oldString);
  return content.slice(0, at) + newString + content.slice(at + oldString.length);
}

export const editTool = defineTool<EditInput>({
  name: 'Edit',
  description: [
    'Performs exact string replacements in files.',
    '- You must Read the file in this conversation before editing it.',
    '- old_string must match the file exactly (including indentation) and be unique in the file; include more',
    '  surrounding context to make it unique, or set replace_all to change every occurrence.',
    '- An empty old_string creates a new file with new_string as its content.',
  ].join('\n'),
  inputSchema: editInputSchema as z.ZodType<EditInput>,
  maxResultChars: 100_000,
  isReadOnly: () => false,
  async call(input, ctx) {
    if (input.old_string === input.new_string) {
      throw new ToolError('NO_CHANGE', 'No changes to make: old_string and new_string are exactly the same.');
    }
    const path = toolPath(ctx, input.file_path);
    const existing = await readTextIfExists(path, readBoundaryOf(ctx.boundary));
    if (existing === undefined) {
      if (input.old_string !== '')
        throw new ToolError('NOT_FOUND', `File does not exist: ${input.file_path}`);
      const mtimeMs = await writeToolFile(ctx, path, input.new_string);
      return {
        content: `File created successfully at: ${input.file_path}`,
        record: { filePath: path.shown, mtimeMs, kind: 'create' },
      };
    }
    if (input.old_string === '') {
      if (existing.trim().length > 0) {
        throw new ToolError('EXISTS', 'Cannot create new file - file already exists.');
      }
      await assertReadAndUnchanged(ctx.readFileState, path, existing);
      const mtimeMs = await writeToolFile(ctx, path, input.new_string);
      return {
        content: `The file ${input.file_path} has been updated successfully.`,
        record: { filePath: path.shown, mtimeMs, kind: 'update' },
      };
    }
    await assertReadAndUnchanged(ctx.readFileState, path, existing);
    const matches = countOccurrences(existing, input.old_string);
    if (matches === 0) {
      throw new ToolError('NO_MATCH', `String to replace not found in file.\nString: ${input.old_string}`);
    }
    if (matches > 1 && !input.replace_all) {
      throw new ToolError(
        'NOT_UNIQUE',
        `Found ${matches} matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.\nString: ${input.old_string}`,
      );
    }
    const updated = applyEdit(existing, input.old_string, input.new_string, input.replace_all);
    const mtimeMs = await writeToolFile(ctx, path, updated);
    return {
      content: `The file ${input.file_path} has been updated successfully.${input.replace_all ? ` (${matches} occurrences replaced)` : ''}`,
      record: {
        filePath: path.shown,
        mtimeMs,
        kind: 'update',
        replacements: input.replace_all ? matches : 1,
      },
    };
  },
});
