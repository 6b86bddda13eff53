import { promises as fs, constants as fsConstants, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { walk } from '@engram/fs-walk/walk';
import picomatch from 'picomatch';
import { parse as parseYaml } from 'yaml';

// CLAUDE.md instruction files, loaded in Claude Code's order (docs/claude-code-format.md, "CLAUDE.md"):
// managed → user (~/.claude/CLAUDE.md, ~/.claude/rules/**) → project (CLAUDE.md, .claude/CLAUDE.md,
// .claude/rules/** recursively, from the project root down to the working directory) → local
// (CLAUDE.local.md). Later files are closer to the work and therefore stronger. A rule file whose frontmatter
// has `paths` globs is conditional: it applies only once the agent touches a matching file. `@path` mentions
// import other files, each loaded right after the file that names it.

export type ClaudeMdKind = 'managed' | 'user' | 'project' | 'local';

export interface ClaudeMdFile {
  path: string;
  kind: ClaudeMdKind;
  content: string;
  /** Globs (relative to the directory holding `.claude/`) that make this rule conditional. */
  paths?: string[];
  /** Directory the globs are relative to. */
  baseDir?: string;
  /** Set on a file loaded through an `@path` import: the file that imported it. */
  importedFrom?: string;
}

/** Files above this size are cut, with a note: one runaway file must not eat the context window. */
export const MAX_CLAUDE_MD_CHARS = 40_000;

export interface LoadClaudeMdOptions {
  cwd: string;
  /** Canonical project root (git root); project files are collected from here down to cwd. */
  projectRoot: string;
  homeDir: string;
  /** Organisation-managed instructions (default /etc/claude-code/CLAUDE.md on Linux). */
  managedPath?: string;
  /**
   * A served turn's tenant workspace root. Set, nothing outside it is read: project files are collected from
   * the project root or this boundary (whichever is deeper) down to cwd, and every file — user files, project
   * and local files, rules and `@` imports of any depth — must resolve (symlinks followed) inside the boundary
   * or be Markdown under `homeDir/.claude` (the tenant's own home area). The managed file is the operator's
   * deliberate policy for everyone and stays. Unset (the CLI): Claude Code's behaviour.
   */
  boundary?: string;
}

/**
 * The text of `path` if it is a file. With `confine`, the file is judged by what was actually opened: the
 * path of the open descriptor (Linux: /proc/self/fd), so a symlink swapped between a check and the read
 * cannot slip another file in.
 */
async function readIfFile(path: string, confine?: (real: string) => boolean): Promise<string | undefined> {
  // Most candidates do not exist: a synchronous stat says so without an exception or a thread-pool hop (a
  // rejected open per candidate was a measurable share of a served turn). Anything that is not a regular file
  // (a FIFO, a directory, a dangling link) is refused here as the open path below refuses it.
  try {
    const probe = statSync(path, { throwIfNoEntry: false });
    if (!probe?.isFile()) return undefined;
  } catch {
    return undefined;
  }
  let handle: import('node:fs/promises').FileHandle | undefined;
  try {
    // Non-blocking, so a FIFO planted as CLAUDE.md cannot hang the open (it is then refused: not a file).
    handle = await fs.open(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
    if (confine) {
      const real = await fs
        .readlink(`/proc/self/fd/${handle.fd}`)
        .catch(() => fs.realpath(path).catch(() => undefined));
      if (real === undefined || !confine(real)) return undefined;
    }
    const stat = await handle.stat();
    if (!stat.isFile()) return undefined;
    const text = await handle.readFile('utf8');
    if (text.includes('\u0000')) return undefined;
    return text.length > MAX_CLAUDE_MD_CHARS
      ? `${text.slice(0, MAX_CLAUDE_MD_CHARS)}\n\n[… ${text.length - MAX_CLAUDE_MD_CHARS} more characters not loaded …]`
      : text;
  } catch {
    return undefined;
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/** Directories from `root` down to `cwd` (inclusive); just `cwd` when it is not inside `root`. */
function dirsFromRootTo(root: string, cwd: string): string[] {
  const rel = relative(root, cwd);
  if (rel.startsWith('..') || resolve(root, rel) !== resolve(cwd)) return [cwd];
  const dirs = [root];
  let current = root;
  for (const part of rel.split(sep).filter(Boolean)) {
    current = join(current, part);
    dirs.push(current);
  }
  return dirs;
}

/**
 * Splits `paths` patterns at commas outside braces and quotes: `src/*.{ts,tsx}, test/**` →
 * [`src/*.{ts,tsx}`, `test/**`] (docs/claude-code-format.md, "CLAUDE.md").
 */
export function splitPathPatterns(value: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quote: string | undefined;
  let current = '';
  for (const ch of value) {
    if (quote) {
      if (ch === quote) quote = undefined;
      else current += ch;
      continue;
    }
    if ((ch === '"' || ch === "'") && current.trim() === '') {
      quote = ch;
      current = '';
      continue;
    }
    if (ch === '{') depth++;
    else if (ch === '}' && depth > 0) depth--;
    if (ch === ',' && depth === 0) {
      out.push(current);
      current = '';
      continue;
    }
    current += ch;
  }
  out.push(current);
  return out.map((p) => p.trim()).filter(Boolean);
}

function patternsFrom(value: unknown): string[] | undefined {
  if (typeof value === 'string') return splitPathPatterns(value);
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) {
    return value.flatMap((v) => splitPathPatterns(v));
  }
  return undefined;
}

/**
 * The raw `paths:` value when YAML cannot read the block (`paths: *.md` is an alias to YAML, a flow list of
 * brace globs is a mapping): the inline value (quotes and `[ ]` stripped) or the `- item` lines below it.
 */
function rawPathsValue(block: string): string[] | undefined {
  const lines = block.split(/\r?\n/);
  const idx = lines.findIndex((l) => /^paths\s*:/.test(l));
  if (idx < 0) return undefined;
  let inline = (lines[idx] as string).replace(/^paths\s*:\s*/, '').trim();
  if (inline !== '') {
    if (inline.startsWith('[') && inline.endsWith(']')) inline = inline.slice(1, -1);
    return splitPathPatterns(inline);
  }
  const items: string[] = [];
  for (const line of lines.slice(idx + 1)) {
    const item = /^\s*-\s+(.+?)\s*$/.exec(line);
    if (!item) break;
    items.push(...splitPathPatterns(item[1] as string));
  }
  return items;
}

/**
 * Splits a leading `---` frontmatter block off a rule file and reads its `paths` globs in every form Claude
 * Code accepts: a YAML list, a quoted string, a bare value (`src/*.{ts,tsx}`), a flow list; commas
 * inside braces never split a pattern.
 */
export function parseRuleFrontmatter(text: string): { body: string; paths?: string[] } {
  const match = /^---\r?\n([\s\S]*?)\r?\n?---[ \t]*(?:\r?\n|$)/.exec(text);
  if (!match) return { body: text };
  const block = match[1] ?? '';
  const body = text.slice(match[0].length);
  if (!/^paths\s*:/m.test(block)) return { body };
  let paths: string[] | undefined;
  try {
    const data: unknown = parseYaml(block, { uniqueKeys: false, logLevel: 'silent' });
    if (typeof data === 'object' && data !== null && !Array.isArray(data)) {
      paths = patternsFrom((data as Record<string, unknown>).paths);
    }
  } catch {
    paths = undefined;
  }
  paths ??= rawPathsValue(block);
  return paths && paths.length > 0 ? { body, paths } : { body };
}

/** Imports nest at most this deep (Claude Code's limit), counting the file that holds the first `@`. */
export const MAX_IMPORT_DEPTH = 5;

/**
 * `@path` mentions outside code: `@` at the start of the text or after whitespace, then a path (relative,
 * `./`, `../`, `~/` or absolute) up to the next whitespace; trailing punctuation is not part of it.
 */
export function findImports(content: string): string[] {
  const out: string[] = [];
  let inFence: string | undefined;
  for (const line of content.split('\n')) {
    const fence = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (inFence) {
      if (fence?.[1]?.startsWith(inFence)) inFence = undefined;
      continue;
    }
    if (fence) {
      inFence = fence[1];
      continue;
    }
    const text = line.replace(/(`+)[^`]*?\1/g, (m) => ' '.repeat(m.length));
    for (const m of text.matchAll(/(?:^|\s)@((?:~\/|\.{1,2}\/|\/)?[A-Za-z0-9_.~\-/]+[A-Za-z0-9_\-/])/g)) {
      const path = m[1] as string;
      if (path.startsWith('/') && path.length < 2) continue;
      if (!out.includes(path)) out.push(path);
    }
  }
  return out;
}

function isInside(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

interface ImportScope {
  homeDir: string;
  projectRoot: string;
  seen: Set<string>;
  /** Whether a resolved (real) path may be read at all; set for served turns (LoadClaudeMdOptions.boundary). */
  confine?: (real: string) => boolean;
}

/**
 * The files `file` imports, recursively (depth-first, each right after the file that imports it), as
 * entries of the importer's kind. A file is loaded once per session context (a cycle ends there), at most
 * MAX_IMPORT_DEPTH levels deep. Imports from user and managed files may name any file; imports from project
 * and local files (which come with the repository) must resolve — symlinks followed — inside the project
 * root or be Markdown under `~/.claude/`, so a cloned repository cannot pull private files into the context.
 */
async function importsOf(file: ClaudeMdFile, depth: number, scope: ImportScope): Promise<ClaudeMdFile[]> {
  if (depth >= MAX_IMPORT_DEPTH) return [];
  const out: ClaudeMdFile[] = [];
  for (const ref of findImports(file.content)) {
    const target = ref.startsWith('~/')
      ? join(scope.homeDir, ref.slice(2))
      : resolve(dirname(file.path), ref);
    let real: string;
    try {
      real = await fs.realpath(target);
    } catch {
      continue; // not a file: `@someone` in prose, or a file that does not exist
    }
    if (scope.seen.has(real)) continue;
    if (scope.confine && file.kind !== 'managed' && !scope.confine(real)) continue;
    if (file.kind === 'project' || file.kind === 'local') {
      const userClaudeDir = join(scope.homeDir, '.claude');
      const allowed =
        isInside(real, scope.projectRoot) || (isInside(real, userClaudeDir) && real.endsWith('.md'));
      if (!allowed) continue;
    }
    const content = await readIfFile(real, file.kind === 'managed' ? undefined : scope.confine);
    if (content === undefined) continue;
    scope.seen.add(real);
    const imported: ClaudeMdFile = { path: target, kind: file.kind, content, importedFrom: file.path };
    if (content.trim()) out.push(imported);
    out.push(...(await importsOf(imported, depth + 1, scope)));
  }
  return out;
}

/** `.md` files under `dir`, recursively, sorted by relative path; symlinked directories are not followed. */
async function markdownFilesUnder(dir: string): Promise<string[]> {
  const listing = await walk(dir, {
    symlinks: 'list',
    maxDepth: 16,
    include: (name) => name.endsWith('.md'),
  });
  return listing.files.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0)).map((file) => file.path);
}

const realOr = (path: string) => fs.realpath(path).catch(() => resolve(path));

export async function loadClaudeMdFiles(opts: LoadClaudeMdOptions): Promise<ClaudeMdFile[]> {
  const files: ClaudeMdFile[] = [];
  let projectRoot = opts.projectRoot;
  let confine: ((real: string) => boolean) | undefined;
  if (opts.boundary !== undefined) {
    const boundary = await realOr(opts.boundary);
    const userClaudeDir = await realOr(join(opts.homeDir, '.claude'));
    confine = (real) => isInside(real, boundary) || (isInside(real, userClaudeDir) && real.endsWith('.md'));
    // A git root above the workspace (or a cwd outside it) never widens the walk past the boundary.
    const [root, cwd] = await Promise.all([realOr(opts.projectRoot), realOr(opts.cwd)]);
    if (!isInside(root, boundary)) projectRoot = isInside(cwd, boundary) ? boundary : cwd;
  }
  const scope: ImportScope = {
    homeDir: opts.homeDir,
    projectRoot,
    seen: new Set(),
    ...(confine ? { confine } : {}),
  };
  const push = async (file: ClaudeMdFile) => {
    const real = await fs.realpath(file.path).catch(() => file.path);
    if (scope.seen.has(real)) return;
    scope.seen.add(real);
    if (file.content.trim()) files.push(file);
    files.push(...(await importsOf(file, 0, scope)));
  };
  const add = async (path: string, kind: ClaudeMdKind) => {
    const content = await readIfFile(path, kind === 'managed' ? undefined : confine);
    if (content !== undefined) await push({ path, kind, content });
  };
  const addRules = async (rulesDir: string, kind: ClaudeMdKind, baseDir: string) => {
    for (const path of await markdownFilesUnder(rulesDir)) {
      const raw = await readIfFile(path, kind === 'managed' ? undefined : confine);
      if (raw === undefined) continue;
      const { body, paths } = parseRuleFrontmatter(raw);
      if (!body.trim()) continue;
      await push({ path, kind, content: body, ...(paths ? { paths, baseDir } : {}) });
    }
  };
  await add(opts.managedPath ?? '/etc/claude-code/CLAUDE.md', 'managed');
  await add(join(opts.homeDir, '.claude', 'CLAUDE.md'), 'user');
  await addRules(join(opts.homeDir, '.claude', 'rules'), 'user', projectRoot);
  const dirs = dirsFromRootTo(projectRoot, opts.cwd);
  for (const dir of dirs) {
    await add(join(dir, 'CLAUDE.md'), 'project');
    await add(join(dir, '.claude', 'CLAUDE.md'), 'project');
    await addRules(join(dir, '.claude', 'rules'), 'project', dir);
  }
  for (const dir of dirs) await add(join(dir, 'CLAUDE.local.md'), 'local');
  return files;
}

/** Whether a conditional rule applies to a file the agent touched. */
export function ruleMatchesPath(rule: ClaudeMdFile, touchedPath: string): boolean {
  if (!rule.paths || !rule.baseDir) return false;
  const rel = relative(rule.baseDir, resolve(touchedPath));
  if (rel.startsWith('..') || rel === '') return false;
  const posixRel = rel.split(sep).join('/');
  return picomatch(rule.paths, { dot: true })(posixRel);
}

const KIND_LABELS: Record<ClaudeMdKind, string> = {
  managed: '(organisation-managed instructions)',
  user: "(user's private global instructions for all projects)",
  project: '(project instructions, checked into the codebase)',
  local: "(user's private project instructions, not checked in)",
};

/** Renders unconditional instruction files as the `Contents of <path> …` blocks of the user context. */
export function renderClaudeMdFiles(files: readonly ClaudeMdFile[]): string {
  return files
    .filter((f) => !f.paths)
    .map((f) => `Contents of ${f.path} ${KIND_LABELS[f.kind]}:\n\n${f.content.trim()}`)
    .join('\n\n');
}

/** Renders one conditional rule when it starts to apply. */
export function renderConditionalRule(rule: ClaudeMdFile, triggeredBy: string): string {
  return `Contents of ${rule.path} ${KIND_LABELS[rule.kind]} — applies to files matching ${rule.paths?.join(', ')} (triggered by ${rule.baseDir ? relative(rule.baseDir, triggeredBy) : triggeredBy}):\n\n${rule.content.trim()}`;
}
