import { promises as fs } from 'node:fs';
import { relative, sep } from 'node:path';
import picomatch from 'picomatch';
import { z } from 'zod';
import { resolveToolPath } from './file-state.js';
import { looksBinary } from './read.js';
import { defineTool, ToolError } from './tool.js';
import { walkFiles } from './walk.js';

// Grep: a ripgrep-shaped search in pure Node (JavaScript regular expressions). Input names follow Claude
// Code's Grep tool so models use it without instructions.

/** Files larger than this are skipped (ripgrep would search them; a tool call should not stall on them). */
export const MAX_GREP_FILE_BYTES = 20 * 1024 * 1024;
/** Like Claude Code's `rg --max-columns 500`: very long lines (minified code) are cut. */
export const MAX_GREP_LINE_CHARS = 500;

const FILE_TYPES: Record<string, string[]> = {
  js: ['*.js', '*.mjs', '*.cjs', '*.jsx'],
  ts: ['*.ts', '*.tsx', '*.mts', '*.cts'],
  py: ['*.py', '*.pyi'],
  rust: ['*.rs'],
  go: ['*.go'],
  java: ['*.java'],
  kotlin: ['*.kt', '*.kts'],
  c: ['*.c', '*.h'],
  cpp: ['*.cpp', '*.cc', '*.cxx', '*.hpp', '*.hh', '*.h'],
  rb: ['*.rb'],
  php: ['*.php'],
  swift: ['*.swift'],
  sh: ['*.sh', '*.bash', '*.zsh'],
  md: ['*.md', '*.markdown', '*.mdx'],
  json: ['*.json', '*.jsonc'],
  yaml: ['*.yml', '*.yaml'],
  toml: ['*.toml'],
  html: ['*.html', '*.htm'],
  css: ['*.css', '*.scss', '*.sass', '*.less'],
  sql: ['*.sql'],
};

export const grepInputSchema = z.strictObject({
  pattern: z.string().min(1).describe('The regular expression pattern to search for in file contents'),
  path: z
    .string()
    .optional()
    .describe('File or directory to search in. Defaults to the current working directory.'),
  glob: z.string().optional().describe('Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}")'),
  output_mode: z
    .enum(['content', 'files_with_matches', 'count'])
    .optional()
    .describe(
      'Output mode: "content" shows matching lines, "files_with_matches" shows file paths (default), "count" shows match counts',
    ),
  '-B': z.number().int().min(0).optional().describe('Lines to show before each match (content mode only)'),
  '-A': z.number().int().min(0).optional().describe('Lines to show after each match (content mode only)'),
  '-C': z
    .number()
    .int()
    .min(0)
    .optional()
    .describe('Lines to show before and after each match (content mode only)'),
  '-n': z.boolean().optional().describe('Show line numbers in output (content mode only). Defaults to true.'),
  '-i': z.boolean().optional().describe('Case insensitive search'),
  type: z
    .string()
    .optional()
    .describe(`File type to search: ${Object.keys(FILE_TYPES).join(', ')}`),
  head_limit: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('Limit output to the first N lines / entries, for every output mode'),
  multiline: z.boolean().optional().describe('Let . match newlines and patterns span lines. Default false.'),
});
export type GrepInput = z.infer<typeof grepInputSchema>;

function toPosix(path: string): string {
  return sep === '/' ? path : path.split(sep).join('/');
}

/** The file filter from `glob` (whitespace-separated patterns; basename match without a slash) and `type`. */
export function fileFilter(glob: string | undefined, type: string | undefined): (relPath: string) => boolean {
  const checks: Array<(p: string) => boolean> = [];
  if (glob) {
    const patterns = glob.split(/\s+/).filter(Boolean);
    const matchers = patterns.map((p) => picomatch(p, { dot: true, basename: !p.includes('/') }));
    checks.push((p) => matchers.some((m) => m(p)));
  }
  if (type) {
    const globs = FILE_TYPES[type];
    if (!globs) {
      throw new ToolError(
        'unknown_type',
        `Unknown file type "${type}". Known: ${Object.keys(FILE_TYPES).join(', ')}.`,
      );
    }
    const m = picomatch(globs, { dot: true, basename: true });
    checks.push((p) => m(p));
  }
  return (p) => checks.every((c) => c(p));
}

function cutLine(line: string): string {
  return line.length > MAX_GREP_LINE_CHARS ? `${line.slice(0, MAX_GREP_LINE_CHARS)} [...]` : line;
}

export const grepTool = defineTool<GrepInput>({
  name: 'Grep',
  description: [
    'Searches file contents with a regular expression (JavaScript syntax, like ripgrep).',
    '- Filter files with glob (e.g. "*.ts", "**/*.{ts,tsx}") or type (e.g. "ts", "py").',
    '- output_mode: "files_with_matches" (default, newest first), "content" (matching lines, supports -A/-B/-C/-n), "count".',
    '- Use this instead of grep or rg in Bash.',
  ].join('\n'),
  inputSchema: grepInputSchema,
  maxResultChars: 20_000,
  isReadOnly: () => true,
  async call(input, ctx) {
    const root = resolveToolPath(ctx.cwd, input.path ?? '.');
    let rootIsFile: boolean;
    try {
      rootIsFile = (await fs.stat(root)).isFile();
    } catch {
      throw new ToolError('not_found', `Path does not exist: ${input.path ?? root}`);
    }
    let regex: RegExp;
    try {
      regex = new RegExp(input.pattern, `${input['-i'] ? 'i' : ''}${input.multiline ? 'sm' : ''}`);
    } catch (e) {
      throw new ToolError('invalid_pattern', `Invalid regular expression: ${(e as Error).message}`);
    }
    const filter = fileFilter(input.glob, input.type);
    const mode = input.output_mode ?? 'files_with_matches';
    const showNumbers = input['-n'] ?? true;
    const before = input['-B'] ?? input['-C'] ?? 0;
    const after = input['-A'] ?? input['-C'] ?? 0;
    const limit = input.head_limit ?? Number.POSITIVE_INFINITY;
    const display = (abs: string) => {
      const rel = relative(ctx.cwd, abs);
      return toPosix(rel.startsWith('..') || rel === '' ? abs : rel);
    };

    const files: string[] = [];
    if (rootIsFile) files.push(root);
    else {
      for await (const file of walkFiles(root, ctx.signal ? { signal: ctx.signal } : {})) {
        if (filter(toPosix(relative(root, file)))) files.push(file);
      }
    }

    const matched: Array<{ path: string; mtimeMs: number }> = [];
    const counts: string[] = [];
    const content: string[] = [];
    let totalMatches = 0;
    for (const file of files) {
      if (ctx.signal?.aborted) break;
      let text: string;
      let mtimeMs: number;
      try {
        const stat = await fs.stat(file);
        if (stat.size > MAX_GREP_FILE_BYTES) continue;
        mtimeMs = stat.mtimeMs;
        const buffer = await fs.readFile(file);
        if (looksBinary(buffer)) continue;
        text = buffer.toString('utf8');
      } catch {
        continue;
      }
      const lines = text.split(/\r?\n/);
      let matchingLines: number[];
      if (input.multiline) {
        const global = new RegExp(regex.source, `${regex.flags}g`);
        const set = new Set<number>();
        const lineStarts: number[] = [0];
        for (let i = 0; i < text.length; i++) if (text[i] === '\n') lineStarts.push(i + 1);
        const lineOf = (offset: number) => {
          let lo = 0;
          let hi = lineStarts.length - 1;
          while (lo < hi) {
            const mid = (lo + hi + 1) >> 1;
            if (lineStarts[mid]! <= offset) lo = mid;
            else hi = mid - 1;
          }
          return lo;
        };
        for (const m of text.matchAll(global)) {
          const first = lineOf(m.index);
          const last = lineOf(m.index + Math.max(0, m[0].length - 1));
          for (let l = first; l <= last; l++) set.add(l);
          if (m[0].length === 0) global.lastIndex++;
        }
        matchingLines = [...set].sort((a, b) => a - b);
      } else {
        matchingLines = [];
        for (let i = 0; i < lines.length; i++) if (regex.test(lines[i]!)) matchingLines.push(i);
      }
      if (matchingLines.length === 0) continue;
      totalMatches += matchingLines.length;
      matched.push({ path: file, mtimeMs });
      if (mode === 'count') counts.push(`${display(file)}:${matchingLines.length}`);
      if (mode === 'content') {
        const prefix = rootIsFile ? '' : `${display(file)}`;
        const isMatch = new Set(matchingLines);
        let lastPrinted = -2;
        for (const lineNo of matchingLines) {
          const from = Math.max(0, lineNo - before);
          const to = Math.min(lines.length - 1, lineNo + after);
          if (lastPrinted >= 0 && from > lastPrinted + 1 && (before > 0 || after > 0)) content.push('--');
          for (let l = Math.max(from, lastPrinted + 1); l <= to; l++) {
            const marker = isMatch.has(l) ? ':' : '-';
            const parts = [prefix, showNumbers ? String(l + 1) : ''].filter(Boolean);
            const head = parts.length > 0 ? `${parts.join(marker)}${marker}` : '';
            content.push(`${head}${cutLine(lines[l]!)}`);
            lastPrinted = l;
          }
        }
      }
    }

    if (mode === 'files_with_matches') {
      if (matched.length === 0) return { content: 'No files found' };
      matched.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.path < b.path ? -1 : 1));
      const shown = matched.slice(0, limit).map((m) => display(m.path));
      return {
        content: `Found ${matched.length} file${matched.length === 1 ? '' : 's'}${shown.length < matched.length ? ` (showing first ${shown.length})` : ''}\n${shown.join('\n')}`,
      };
    }
    if (mode === 'count') {
      if (counts.length === 0) return { content: 'No matches found' };
      const shown = counts.slice(0, limit);
      return {
        content: `${shown.join('\n')}\n\nFound ${totalMatches} total occurrence${totalMatches === 1 ? '' : 's'} across ${counts.length} file${counts.length === 1 ? '' : 's'}.`,
      };
    }
    if (content.length === 0) return { content: 'No matches found' };
    const shown = content.slice(0, limit);
    const more =
      content.length > shown.length ? `\n\n[Showing first ${shown.length} of ${content.length} lines]` : '';
    return { content: shown.join('\n') + more };
  },
});
