import { promises as fs } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import picomatch from 'picomatch';

// CLAUDE.md instruction files, loaded in Claude Code's order: managed → user (~/.claude/CLAUDE.md) → project
// (CLAUDE.md, .claude/CLAUDE.md, .claude/rules/*.md, from the project root down to the working directory) →
// local (CLAUDE.local.md). Later files are closer to the work and therefore stronger. A rule file whose
// frontmatter has `paths` globs is conditional: it applies only once the agent touches a matching file.

export type ClaudeMdKind = 'managed' | 'user' | 'project' | 'local';

export interface ClaudeMdFile {
  path: string;
  kind: ClaudeMdKind;
  content: string;
  /** Globs (relative to the directory holding `.claude/`) that make this rule conditional. */
  paths?: string[];
  /** Directory the globs are relative to. */
  baseDir?: string;
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
}

async function readIfFile(path: string): Promise<string | undefined> {
  try {
    const stat = await fs.stat(path);
    if (!stat.isFile()) return undefined;
    const text = await fs.readFile(path, 'utf8');
    if (text.includes('\u0000')) return undefined;
    return text.length > MAX_CLAUDE_MD_CHARS
      ? `${text.slice(0, MAX_CLAUDE_MD_CHARS)}\n\n[… ${text.length - MAX_CLAUDE_MD_CHARS} more characters not loaded …]`
      : text;
  } catch {
    return undefined;
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

/** Splits a leading `---` frontmatter block off a rule file and reads its `paths` list (string or list). */
export function parseRuleFrontmatter(text: string): { body: string; paths?: string[] } {
  const match = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?/.exec(text);
  if (!match) return { body: text };
  const block = match[1] ?? '';
  const body = text.slice(match[0].length);
  const lines = block.split(/\r?\n/);
  const idx = lines.findIndex((l) => /^paths\s*:/.test(l));
  if (idx < 0) return { body };
  const inline = lines[idx]!.replace(/^paths\s*:\s*/, '').trim();
  const unquote = (s: string) => s.trim().replace(/^['"]|['"]$/g, '');
  let paths: string[] = [];
  if (inline.startsWith('[')) {
    paths = inline
      .replace(/^\[|\]$/g, '')
      .split(',')
      .map(unquote)
      .filter(Boolean);
  } else if (inline) {
    paths = inline.split(',').map(unquote).filter(Boolean);
  } else {
    for (const line of lines.slice(idx + 1)) {
      const item = /^\s*-\s*(.+)$/.exec(line);
      if (!item) break;
      paths.push(unquote(item[1]!));
    }
  }
  return paths.length ? { body, paths } : { body };
}

export async function loadClaudeMdFiles(opts: LoadClaudeMdOptions): Promise<ClaudeMdFile[]> {
  const files: ClaudeMdFile[] = [];
  const add = async (path: string, kind: ClaudeMdKind) => {
    const content = await readIfFile(path);
    if (content?.trim()) files.push({ path, kind, content });
  };
  await add(opts.managedPath ?? '/etc/claude-code/CLAUDE.md', 'managed');
  await add(join(opts.homeDir, '.claude', 'CLAUDE.md'), 'user');
  const dirs = dirsFromRootTo(opts.projectRoot, opts.cwd);
  for (const dir of dirs) {
    await add(join(dir, 'CLAUDE.md'), 'project');
    await add(join(dir, '.claude', 'CLAUDE.md'), 'project');
    const rulesDir = join(dir, '.claude', 'rules');
    let names: string[] = [];
    try {
      names = (await fs.readdir(rulesDir)).filter((n) => n.endsWith('.md')).sort();
    } catch {
      // no rules here
    }
    for (const name of names) {
      const raw = await readIfFile(join(rulesDir, name));
      if (raw === undefined) continue;
      const { body, paths } = parseRuleFrontmatter(raw);
      if (!body.trim()) continue;
      files.push({
        path: join(rulesDir, name),
        kind: 'project',
        content: body,
        ...(paths ? { paths, baseDir: dir } : {}),
      });
    }
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
