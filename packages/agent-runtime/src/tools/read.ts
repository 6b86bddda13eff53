import { promises as fs } from 'node:fs';
import { extname } from 'node:path';
import { z } from 'zod';
import { estimateTokens } from '../model/tokens.js';
import { hashContent, resolveToolPath } from './file-state.js';
import { defineTool, ToolError } from './tool.js';

// Read: numbered lines (cat -n), a line window, images as image blocks, binaries refused. It bounds its own
// output (line count, line length, a token cap) instead of being persisted to tool-results/.

export const DEFAULT_READ_LINES = 2_000;
export const MAX_LINE_CHARS = 2_000;
/** Whole-file reads above this size must use offset/limit (Claude Code: 256 KB). */
export const MAX_READ_FILE_BYTES = 256 * 1024;
/** Output above this many (estimated) tokens is refused with advice to narrow the window. */
export const MAX_READ_OUTPUT_TOKENS = 25_000;
const MAX_IMAGE_BYTES = 3_750_000;
const BINARY_SNIFF_BYTES = 8_192;

const IMAGE_TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
};

const BINARY_EXTENSIONS = new Set(
  '.zip .gz .tgz .bz2 .xz .7z .rar .tar .jar .war .class .exe .dll .so .dylib .o .a .lib .bin .dat .db .sqlite .pdf .doc .docx .xls .xlsx .ppt .pptx .mp3 .mp4 .mov .avi .mkv .wav .flac .ogg .ico .bmp .tiff .psd .woff .woff2 .ttf .otf .eot .pyc .wasm .node'.split(
    ' ',
  ),
);

export const readInputSchema = z.strictObject({
  file_path: z.string().min(1).describe('The absolute path to the file to read'),
  offset: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('The line number to start reading from. Only provide if the file is too large to read at once'),
  limit: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('The number of lines to read. Only provide if the file is too large to read at once.'),
});
export type ReadInput = z.infer<typeof readInputSchema>;

export function looksBinary(buffer: Buffer): boolean {
  const n = Math.min(buffer.length, BINARY_SNIFF_BYTES);
  for (let i = 0; i < n; i++) if (buffer[i] === 0) return true;
  return false;
}

/** `cat -n` formatting: right-aligned line numbers, a tab, the line (cut at MAX_LINE_CHARS). */
export function formatNumberedLines(lines: readonly string[], firstLineNumber: number): string {
  return lines
    .map((line, i) => {
      const cut =
        line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}... [line truncated]` : line;
      return `${String(firstLineNumber + i).padStart(6, ' ')}\t${cut}`;
    })
    .join('\n');
}

export const readTool = defineTool<ReadInput>({
  name: 'Read',
  description: [
    'Reads a file from the local filesystem.',
    '- file_path must be an absolute path.',
    `- By default reads up to ${DEFAULT_READ_LINES} lines from the start; use offset and limit for long files.`,
    `- Lines longer than ${MAX_LINE_CHARS} characters are truncated. Output is in cat -n format (line numbers start at 1).`,
    '- Images (PNG, JPEG, GIF, WebP) are returned as images. Other binary files cannot be read.',
    '- To list a directory, use Bash ls or Glob.',
  ].join('\n'),
  inputSchema: readInputSchema,
  maxResultChars: Number.POSITIVE_INFINITY,
  isReadOnly: () => true,
  async call(input, ctx) {
    const path = resolveToolPath(ctx.cwd, input.file_path);
    let stat: Awaited<ReturnType<typeof fs.stat>>;
    try {
      stat = await fs.stat(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new ToolError('not_found', `File does not exist: ${input.file_path}`);
      }
      throw e;
    }
    if (stat.isDirectory()) {
      throw new ToolError(
        'is_directory',
        `${input.file_path} is a directory. Use Bash ls or Glob to list it.`,
      );
    }
    const ext = extname(path).toLowerCase();
    const mediaType = IMAGE_TYPES[ext];
    if (mediaType) {
      if (stat.size > MAX_IMAGE_BYTES) {
        throw new ToolError('too_large', `Image is ${stat.size} bytes; the maximum is ${MAX_IMAGE_BYTES}.`);
      }
      const data = await fs.readFile(path);
      ctx.readFileState.set(path, { mtimeMs: stat.mtimeMs });
      return {
        content: [
          { type: 'image', source: { type: 'base64', media_type: mediaType, data: data.toString('base64') } },
        ],
        record: { filePath: path, mtimeMs: stat.mtimeMs },
      };
    }
    const windowed = input.offset !== undefined || input.limit !== undefined;
    if (!windowed && stat.size > MAX_READ_FILE_BYTES) {
      throw new ToolError(
        'too_large',
        `File content (${Math.round(stat.size / 1024)}KB) exceeds maximum allowed size (${MAX_READ_FILE_BYTES / 1024}KB). Use offset and limit to read specific portions of the file, or use Grep to search for specific content.`,
      );
    }
    const buffer = await fs.readFile(path);
    if (BINARY_EXTENSIONS.has(ext) || looksBinary(buffer)) {
      throw new ToolError(
        'binary',
        `${input.file_path} is a binary file; Read only handles text and images.`,
      );
    }
    const text = buffer.toString('utf8');
    const record = {
      mtimeMs: stat.mtimeMs,
      ...(windowed ? {} : { contentHash: hashContent(text) }),
      ...(input.offset !== undefined ? { offset: input.offset } : {}),
      ...(input.limit !== undefined ? { limit: input.limit } : {}),
    };
    const toolRecord = { filePath: path, mtimeMs: stat.mtimeMs };
    if (text.length === 0) {
      ctx.readFileState.set(path, record);
      return {
        content: '<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>',
        record: toolRecord,
      };
    }
    const lines = text.split(/\r?\n/);
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    const start = (input.offset ?? 1) - 1;
    if (start >= lines.length) {
      ctx.readFileState.set(path, record);
      return {
        content: `<system-reminder>Warning: the file exists but is shorter than the provided offset (${input.offset}). The file has ${lines.length} lines.</system-reminder>`,
        record: toolRecord,
      };
    }
    const slice = lines.slice(start, start + (input.limit ?? DEFAULT_READ_LINES));
    const output = formatNumberedLines(slice, start + 1);
    const tokens = estimateTokens(output);
    if (tokens > MAX_READ_OUTPUT_TOKENS) {
      throw new ToolError(
        'too_large',
        `File content (${tokens} tokens) exceeds maximum allowed tokens (${MAX_READ_OUTPUT_TOKENS}). Use offset and limit to read specific portions of the file, or use Grep to search for specific content.`,
      );
    }
    ctx.readFileState.set(path, record);
    return { content: output, record: toolRecord };
  },
});
