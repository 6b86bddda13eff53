import { extname } from 'node:path';
import { z } from 'zod';
import { estimateTokens } from '../model/tokens.js';
import { type BoundedRead, ReadBoundaryError, readFileBounded } from '../sandbox/read-boundary.js';
import { readBoundaryOf } from '../sandbox/unattended.js';
import { hashContent, shownText, toolPath } from './file-state.js';
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
/** A windowed read still reads the file from its start: bounded too (a FIFO or /dev/zero never ends). */
export const MAX_WINDOWED_READ_BYTES = 64 * 1024 * 1024;
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

function readError(e: ReadBoundaryError, filePath: string, cap: number, image: boolean): ToolError {
  switch (e.code) {
    case 'NOT_FOUND':
      return new ToolError('NOT_FOUND', `File does not exist: ${filePath}`);
    case 'IS_DIRECTORY':
      return new ToolError('IS_DIRECTORY', `${filePath} is a directory. Use Bash ls or Glob to list it.`);
    case 'TOO_LARGE':
      return image
        ? new ToolError('TOO_LARGE', `Image is larger than the maximum of ${cap} bytes.`)
        : new ToolError(
            'TOO_LARGE',
            `File content exceeds maximum allowed size (${Math.round(cap / 1024)}KB). Use offset and limit to read specific portions of the file, or use Grep to search for specific content.`,
          );
    case 'NOT_REGULAR':
      return new ToolError('NOT_REGULAR', `${filePath} is not a regular file; Read only reads files.`);
    default:
      return new ToolError('OUTSIDE_BOUNDARY', `Refused to read ${filePath}: ${e.message}.`);
  }
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
    // `path` is what is opened and judged; `shown` what the model is told (they differ under an alias).
    const { actual: path, shown } = toolPath(ctx, input.file_path);
    const ext = extname(path).toLowerCase();
    const mediaType = IMAGE_TYPES[ext];
    const windowed = input.offset !== undefined || input.limit !== undefined;
    const cap = mediaType ? MAX_IMAGE_BYTES : windowed ? MAX_WINDOWED_READ_BYTES : MAX_READ_FILE_BYTES;
    let read: BoundedRead;
    try {
      read = await readFileBounded(readBoundaryOf(ctx.boundary), path, cap);
    } catch (e) {
      if (!(e instanceof ReadBoundaryError)) throw e;
      const error = readError(e, input.file_path, cap, Boolean(mediaType));
      throw new ToolError(error.code, shownText(ctx, error.message));
    }
    const { stat, data: buffer } = read;
    if (mediaType) {
      ctx.readFileState.set(shown, { mtimeMs: stat.mtimeMs });
      return {
        content: [
          {
            type: 'image',
            source: { type: 'base64', media_type: mediaType, data: buffer.toString('base64') },
          },
        ],
        record: { filePath: shown, mtimeMs: stat.mtimeMs },
      };
    }
    if (BINARY_EXTENSIONS.has(ext) || looksBinary(buffer)) {
      throw new ToolError(
        'BINARY',
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
    const toolRecord = { filePath: shown, mtimeMs: stat.mtimeMs };
    if (text.length === 0) {
      ctx.readFileState.set(shown, record);
      return {
        content: '<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>',
        record: toolRecord,
      };
    }
    const lines = text.split(/\r?\n/);
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    const start = (input.offset ?? 1) - 1;
    if (start >= lines.length) {
      ctx.readFileState.set(shown, record);
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
        'TOO_LARGE',
        `File content (${tokens} tokens) exceeds maximum allowed tokens (${MAX_READ_OUTPUT_TOKENS}). Use offset and limit to read specific portions of the file, or use Grep to search for specific content.`,
      );
    }
    ctx.readFileState.set(shown, record);
    return { content: output, record: toolRecord };
  },
});
