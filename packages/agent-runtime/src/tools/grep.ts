import { join, relative, sep } from 'node:path';
import picomatch from 'picomatch';
import { z } from 'zod';
import { actualPath, type PathAlias, visiblePath, visibleText } from '../sandbox/boundary.js';
import type { HeldEntry, ReadBoundary } from '../sandbox/read-boundary.js';
import { type SandboxStatus, sandboxStatus } from '../sandbox/sandbox.js';
import { JAILED_ROOT, type SearchJail, searchJailInvocation } from '../sandbox/search-jail.js';
import { aliasOf, readBoundaryOf } from '../sandbox/unattended.js';
import { resolveToolPath } from './file-state.js';
import { locateRipgrep, runRipgrep } from './ripgrep.js';
import { holdSearchRoot, judgeListed } from './search-boundary.js';
import { defineTool, ToolError } from './tool.js';

// Grep: ripgrep (ripgrep.ts finds the binary and runs it without a shell, time- and size-bounded). Input
// names and output format follow Claude Code's Grep tool so models use it without instructions. ripgrep
// honours .gitignore / .ignore / .rgignore, skips binary files, and its regex engine runs in linear time,
// so a model-supplied pattern cannot stall the worker; the wall-clock bound covers huge trees.

/** Files larger than this are skipped (a tool call should not stall on them). */
export const MAX_GREP_FILE_BYTES = 20 * 1024 * 1024;
/** Wall-clock bound of one search; past it rg is killed and what it found so far is returned. */
export const GREP_TIMEOUT_MS = 30_000;
/** rg output kept; past it rg is stopped and the result says it is incomplete. */
export const MAX_GREP_OUTPUT_BYTES = 16 * 1024 * 1024;
/** Directories never searched, as the old walker did (ripgrep also skips hidden VCS dirs by .gitignore). */
const EXCLUDED_DIRECTORIES = ['.git', '.hg', '.svn', '.jj', 'node_modules'];
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
        'UNKNOWN_TYPE',
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

/** The distinct file paths of rg's `path NUL …` records (consecutive records of a file share one path). */
function* recordPaths(out: string): Generator<string> {
  let last: string | undefined;
  for (let start = 0; start < out.length; ) {
    let end = out.indexOf('\n', start);
    if (end < 0) end = out.length;
    const nul = out.indexOf('\0', start);
    if (nul >= 0 && nul < end && (last === undefined || !out.startsWith(`${last}\0`, start))) {
      last = out.slice(start, nul);
      yield last;
    }
    start = end + 1;
  }
}

export interface GrepRunOptions {
  timeoutMs?: number;
  maxOutputBytes?: number;
  env?: NodeJS.ProcessEnv;
  /**
   * Whether rg runs in the search jail (sandbox/search-jail.ts). Default: for a call with a read boundary,
   * whenever the OS sandbox is available on this host; never without a boundary.
   */
  jail?: boolean;
  /** The sandbox probe's answer to use (default: `sandboxStatus()`, once per process). */
  sandbox?: SandboxStatus;
}

/** What one Grep call may search (`ToolContext` narrowed: the read boundary and path alias of its run). */
export interface GrepContext {
  cwd: string;
  signal?: AbortSignal;
  readBoundary?: ReadBoundary;
  alias?: PathAlias;
}

/** Runs one Grep call through ripgrep. Exported with its bounds so tests can exercise them. */
export async function runGrep(
  input: GrepInput,
  ctx: GrepContext,
  options: GrepRunOptions = {},
): Promise<{ content: string }> {
  // `root` as the model names it (results are shown under it); what is opened is its `actual` path.
  const named = resolveToolPath(ctx.cwd, input.path ?? '.');
  const actual = actualPath(ctx.alias, named);
  const root = visiblePath(ctx.alias, actual);
  // The root is judged on the inode it opens (a file root like Read judges it) and held open: rg searches
  // that descriptor, so a root swapped for a link after the judgment is never searched.
  let held: HeldEntry;
  try {
    held = await holdSearchRoot(ctx.readBoundary, actual, input.path ?? root, false);
  } catch (e) {
    throw e instanceof ToolError ? new ToolError(e.code, visibleText(ctx.alias, e.message)) : e;
  }
  try {
    return await grepHeld(input, ctx, options, root, held);
  } finally {
    await held.handle.close();
  }
}

async function grepHeld(
  input: GrepInput,
  ctx: GrepContext,
  options: GrepRunOptions,
  root: string,
  held: HeldEntry,
): Promise<{ content: string }> {
  const rootIsFile = held.stat.isFile();
  const filter = fileFilter(input.glob, input.type); // also rejects an unknown type
  const rg = await locateRipgrep(options.env ?? process.env);
  // With a boundary, rg runs where only the held root exists (a directory swapped for a link mid-walk
  // resolves to nothing there); without the OS sandbox it still searches the held descriptor.
  let jail: SearchJail | undefined;
  if (options.jail ?? ctx.readBoundary !== undefined) {
    const status = options.sandbox ?? (await sandboxStatus());
    if (status.available && status.bwrapPath) jail = searchJailInvocation(status.bwrapPath, rg);
  }
  const byDescriptor = held.anchor !== held.realPath;
  // What rg is told to search, and so the prefix of every path it prints.
  const searched = jail ? JAILED_ROOT : byDescriptor ? '/proc/self/fd/3' : held.realPath;
  const relOf = (found: string) => (found === searched ? '' : found.slice(searched.length + 1));
  const asNamed = (found: string) => {
    const rel = relOf(found);
    return rel === '' ? root : join(root, ...rel.split('/'));
  };
  const mode = input.output_mode ?? 'files_with_matches';
  const showNumbers = input['-n'] ?? true;
  const before = input['-B'] ?? input['-C'] ?? 0;
  const after = input['-A'] ?? input['-C'] ?? 0;
  const limit = input.head_limit ?? Number.POSITIVE_INFINITY;
  // rg's paths start with `searched`; shown (and filtered) as under the root the model named.
  const display = (found: string) => {
    const abs = asNamed(found);
    const rel = relative(ctx.cwd, abs);
    return toPosix(rel.startsWith('..') || rel === '' ? abs : rel);
  };

  // `--no-follow` (rg's default, stated): a link inside the tree is never followed.
  const args = ['--hidden', '--no-follow', '--no-messages', `--max-filesize=${MAX_GREP_FILE_BYTES}`];
  for (const d of EXCLUDED_DIRECTORIES) args.push(`--glob=!${d}`);
  if (input['-i']) args.push('--ignore-case');
  if (input.multiline) args.push('--multiline', '--multiline-dotall');
  // glob and type narrow rg's walk; `filter` below applies them with the tool's own (AND) semantics.
  if (input.glob) for (const g of input.glob.split(/\s+/).filter(Boolean)) args.push(`--glob=${g}`);
  if (input.type) {
    args.push('--type-clear=engram');
    for (const g of FILE_TYPES[input.type]!) args.push(`--type-add=engram:${g}`);
    args.push('--type=engram');
  }
  if (mode === 'files_with_matches') args.push('--files-with-matches', '--null');
  else {
    // `path NUL line-number (':' match | '-' context) text`, files in path order.
    args.push('--null', '--with-filename', '--line-number', '--no-heading', '--color=never', '--sort=path');
    if (mode === 'content') args.push(`--before-context=${before}`, `--after-context=${after}`);
  }
  args.push(`--regexp=${input.pattern}`, '--', searched);

  const run = await runRipgrep(rg, args, {
    cwd: ctx.cwd,
    timeoutMs: options.timeoutMs ?? GREP_TIMEOUT_MS,
    maxOutputBytes: options.maxOutputBytes ?? MAX_GREP_OUTPUT_BYTES,
    ...(ctx.signal ? { signal: ctx.signal } : {}),
    ...(jail || byDescriptor ? { rootFd: held.handle.fd } : {}),
    ...(jail ? { jail } : {}),
  });
  if (run.code === 2 && run.stdout === '') {
    const message = run.stderr.trim();
    if (/regex parse error|error parsing regex|regex.*(too big|size limit)/i.test(message)) {
      throw new ToolError('INVALID_PATTERN', `Invalid regular expression: ${message}`);
    }
    throw new ToolError('GREP_FAILED', `ripgrep failed: ${message || 'exit status 2'}`);
  }
  const notes: string[] = [];
  if (run.timedOut) {
    const ms = options.timeoutMs ?? GREP_TIMEOUT_MS;
    const after = ms >= 1000 ? `${Math.round(ms / 1000)}s` : `${ms} ms`;
    notes.push(`[Search stopped after ${after}: results are incomplete; narrow path, glob or type]`);
  }
  if (run.truncated)
    notes.push('[Search output exceeded its cap: results are incomplete; narrow the search]');
  const withNotes = (content: string) => ({
    content: notes.length > 0 ? `${content}\n\n${notes.join('\n')}` : content,
  });
  const named = (found: string) => rootIsFile || filter(relOf(found));
  // Every file rg reports is judged on what it opens now below the held root (inside the boundary and the
  // judged root): a directory renamed into a link while rg walked is left out, not reported.
  const judged = new Map<string, number>();
  const below = (found: string) => (relOf(found) === '' ? held.anchor : `${held.anchor}/${relOf(found)}`);
  const judgeAll = async (paths: Iterable<string>) => {
    const unique = [...new Set(paths)].filter(named);
    const entries = await Promise.all(
      unique.map((p) => judgeListed(ctx.readBoundary, held.realPath, below(p))),
    );
    unique.forEach((p, i) => {
      const entry = entries[i];
      if (entry) judged.set(p, entry.stat.mtimeMs);
    });
  };
  const keep = (found: string) => judged.has(found);

  if (mode === 'files_with_matches') {
    const listed = run.stdout.split('\0').filter((p) => p.length > 0);
    await judgeAll(listed);
    const paths = listed.filter(keep);
    const matched = paths.map((path) => ({ path, mtimeMs: judged.get(path) ?? 0 }));
    if (matched.length === 0) return withNotes('No files found');
    matched.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.path < b.path ? -1 : 1));
    const shown = matched.slice(0, limit).map((m) => display(m.path));
    return withNotes(
      `Found ${matched.length} file${matched.length === 1 ? '' : 's'}${shown.length < matched.length ? ` (showing first ${shown.length})` : ''}\n${shown.join('\n')}`,
    );
  }

  // content and count: rg's standard output, one file after another (sorted by path), each file's lines in
  // order; formatted in one pass.
  // Output lines are appended to one string up to `limit`, and counted beyond it.
  let content = '';
  let contentLines = 0;
  const emit = (line: string) => {
    if (contentLines < limit) content += contentLines === 0 ? line : `\n${line}`;
    contentLines++;
  };
  const counts: string[] = [];
  let total = 0;
  let currentPath: string | undefined;
  let kept = false;
  let prefix = '';
  let last = -2;
  let fileMatches = 0;
  const endFile = () => {
    if (kept && fileMatches > 0) counts.push(`${display(currentPath!)}:${fileMatches}`);
    total += kept ? fileMatches : 0;
  };
  const out = run.stdout;
  await judgeAll(recordPaths(out));
  for (let start = 0; start < out.length; ) {
    let end = out.indexOf('\n', start);
    if (end < 0) end = out.length;
    const lineStart = start;
    start = end + 1;
    const nul = out.indexOf('\0', lineStart);
    if (nul < 0 || nul > end) continue; // `--` between context groups
    let i = nul + 1;
    while (i < end && out.charCodeAt(i) >= 48 && out.charCodeAt(i) <= 57) i++;
    const marker = out[i];
    if (i === nul + 1 || (marker !== ':' && marker !== '-')) continue;
    if (
      currentPath === undefined ||
      nul - lineStart !== currentPath.length ||
      !out.startsWith(currentPath, lineStart)
    ) {
      endFile();
      currentPath = out.slice(lineStart, nul);
      kept = keep(currentPath);
      prefix = rootIsFile ? '' : display(currentPath);
      last = -2;
      fileMatches = 0;
    }
    if (!kept) continue;
    if (marker === ':') fileMatches++;
    if (mode !== 'content') continue;
    const n = Number(out.slice(nul + 1, i));
    if (last >= 0 && n > last + 1 && (before > 0 || after > 0)) emit('--');
    last = n;
    if (contentLines >= limit) {
      contentLines++;
      continue;
    }
    let text = out.slice(i + 1, end);
    if (text.endsWith('\r')) text = text.slice(0, -1);
    const head = prefix
      ? showNumbers
        ? `${prefix}${marker}${n}${marker}`
        : `${prefix}${marker}`
      : showNumbers
        ? `${n}${marker}`
        : '';
    emit(`${head}${cutLine(text)}`);
  }
  endFile();

  if (mode === 'count') {
    if (counts.length === 0) return withNotes('No matches found');
    const shown = counts.slice(0, limit);
    return withNotes(
      `${shown.join('\n')}\n\nFound ${total} total occurrence${total === 1 ? '' : 's'} across ${counts.length} file${counts.length === 1 ? '' : 's'}.`,
    );
  }
  if (contentLines === 0) return withNotes('No matches found');
  const shown = Math.min(contentLines, limit);
  const more = contentLines > shown ? `\n\n[Showing first ${shown} of ${contentLines} lines]` : '';
  return withNotes(content + more);
}

export const grepTool = defineTool<GrepInput>({
  name: 'Grep',
  description: [
    'Searches file contents with a regular expression (ripgrep syntax), honouring .gitignore.',
    '- Filter files with glob (e.g. "*.ts", "**/*.{ts,tsx}") or type (e.g. "ts", "py").',
    '- output_mode: "files_with_matches" (default, newest first), "content" (matching lines, supports -A/-B/-C/-n), "count".',
    '- Use this instead of grep or rg in Bash.',
  ].join('\n'),
  inputSchema: grepInputSchema,
  maxResultChars: 20_000,
  isReadOnly: () => true,
  call: (input, ctx) => {
    const readBoundary = readBoundaryOf(ctx.boundary);
    const alias = aliasOf(ctx.boundary);
    return runGrep(input, {
      cwd: ctx.cwd,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
      ...(readBoundary ? { readBoundary } : {}),
      ...(alias ? { alias } : {}),
    });
  },
});
