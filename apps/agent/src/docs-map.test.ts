import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The docs are a map of the code, kept true by this test: every file path, workspace package and code name
// that README.md, ARCHITECTURE.md or a doc of ours writes in backticks must exist. Docs that describe other
// programs (Claude Code's internals, the seed design, peers) are exempt: their names are those programs'.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
// This file names planted stale names on purpose: it is not part of the code index.
const SELF = fileURLToPath(import.meta.url);

/** Docs about other programs, whose backticked names are not Engram's. */
const EXEMPT_DOCS = new Set([
  'docs/claude-code-memory.md', // Claude Code's memory system, from its source
  'docs/claude-code-current.md', // what the current Claude Code release writes and sends
  'docs/design.md', // the seed design (the departures are in docs/memory-work.md)
  'docs/peer-research.md', // other projects' code
]);

/** Docs whose code names may be other programs' (Claude Code's transcript fields, BullMQ internals): paths only. */
const PATHS_ONLY_DOCS = new Set(['BENCHMARKS.md', 'docs/claude-code-format.md']);

const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.git', '.turbo', 'coverage']);

function walk(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIPPED_DIRS.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else out.push(path);
  }
  return out;
}

interface CodeIndex {
  /** Repository-relative paths of every file and directory (forward slashes). */
  paths: Set<string>;
  /** Every file's path relative to its workspace's `src/` (and the workspace-relative path). */
  suffixes: Set<string>;
  /** Workspace package names. */
  packages: Set<string>;
  /** Every identifier that occurs in a source, script or config file. */
  words: Set<string>;
}

function buildIndex(root: string): CodeIndex {
  const paths = new Set<string>();
  const suffixes = new Set<string>();
  const packages = new Set<string>();
  const words = new Set<string>();
  for (const abs of walk(root)) {
    const rel = relative(root, abs).split('\\').join('/');
    const parts = rel.split('/');
    for (let i = 1; i <= parts.length; i++) paths.add(parts.slice(0, i).join('/'));
    // `memdir/index-file.ts` (from a package's src), `src/server/` (from a workspace): suffixes of a path.
    for (let i = 1; i < parts.length; i++) {
      for (let j = i + 1; j <= parts.length; j++) suffixes.add(parts.slice(i, j).join('/'));
    }
    if (parts.at(-1) === 'package.json') {
      try {
        const name = (JSON.parse(readFileSync(abs, 'utf8')) as { name?: string }).name;
        if (name) packages.add(name);
      } catch {
        // not a package manifest we can read
      }
    }
    if (abs === SELF || rel.includes('__fixtures__/')) continue;
    if (
      /\.(?:[cm]?[jt]s|json|ya?ml|sh|mjs)$/.test(abs) ||
      parts.at(-1) === 'Dockerfile' ||
      rel === '.ci/run'
    ) {
      if (statSync(abs).size > 2_000_000) continue;
      for (const m of readFileSync(abs, 'utf8').matchAll(/[A-Za-z_$][\w$]*/g)) words.add(m[0]);
    }
  }
  return { paths, suffixes, packages, words };
}

/** Backticked spans of Markdown, outside fenced code blocks. */
function backticked(markdown: string): string[] {
  const spans: string[] = [];
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    for (const m of line.matchAll(/`([^`\n]+)`/g)) spans.push((m[1] as string).trim());
  }
  return spans;
}

// A camelCase or PascalCase code name, optionally called (`runForkPipeline`, `EngramError`, `prepareUnattended()`).
const CODE_NAME = /^([a-z][a-z0-9]*[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?:\(\))?$/;
const ENV_NAME = /^ENGRAM_[A-Z0-9_]+$/;

const TOP_DIRS = /^(?:packages|apps|bench|docs|scripts|\.ci)\//;
const CODE_FILE = /\.(?:ts|js|mjs|sh)$/;

/**
 * The repository path a span names, or undefined when it is not one: `packages/x/src/a.ts` as is, a workspace
 * path without its folder (`memory-core/memdir/links.ts`), a path inside some workspace's `src/`
 * (`memdir/index-file.ts`). Runtime data paths (`memory/team/`, `ENGRAM_HOME/…`, `.claude/…`) and build output
 * are not repository paths.
 */
function repositoryPath(raw: string, index: CodeIndex): string | undefined {
  const path = raw.replace(/\/$/, '').replace(/:\d+(?:-\d+)?$/, '');
  if (!path.includes('/') || /(?:^|\/)(?:dist|node_modules)(?:\/|$)/.test(path)) return undefined;
  if (TOP_DIRS.test(path) || path === '.ci/run') return path;
  const [first, ...rest] = path.split('/');
  for (const group of ['packages', 'apps']) {
    if (index.paths.has(`${group}/${first}/package.json`)) {
      return rest[0] === 'src' ? `${group}/${path}` : `${group}/${first}/src/${rest.join('/')}`;
    }
  }
  return CODE_FILE.test(path) ? path : undefined;
}

/** What a doc mentions that does not exist. */
function staleMentions(markdown: string, index: CodeIndex, options: { names?: boolean } = {}): string[] {
  const stale: string[] = [];
  for (const raw of backticked(markdown)) {
    if (/^@engram\/[a-z-]+(?:\/[\w./-]+)?$/.test(raw)) {
      const name = raw.split('/').slice(0, 2).join('/');
      if (!index.packages.has(name)) stale.push(raw);
      continue;
    }
    // Placeholders, globs, home-relative, absolute and URL-like spans are not repository paths.
    if (/[<>*~{}…$|\s]|^\/|^\.\.?\/|:\/\//.test(raw)) continue;
    const path = repositoryPath(raw, index);
    if (path !== undefined) {
      if (!index.paths.has(path) && !index.suffixes.has(path)) stale.push(raw);
      continue;
    }
    if (options.names === false || raw.includes('/')) continue;
    const name = raw.replace(/\(\)$/, '');
    if ((CODE_NAME.test(raw) || ENV_NAME.test(raw)) && !index.words.has(name)) stale.push(raw);
  }
  return stale;
}

function mapDocs(root: string): string[] {
  const docs = ['README.md', 'ARCHITECTURE.md', 'BENCHMARKS.md'];
  for (const entry of readdirSync(join(root, 'docs'), { withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith('.md')) docs.push(`docs/${entry.name}`);
  }
  return docs.filter((d) => !EXEMPT_DOCS.has(d));
}

describe('the docs are a map that stays true', () => {
  const index = buildIndex(ROOT);

  it('every path, package and code name a doc writes in backticks exists', () => {
    const problems: string[] = [];
    for (const doc of mapDocs(ROOT)) {
      const names = !PATHS_ONLY_DOCS.has(doc);
      for (const stale of staleMentions(readFileSync(join(ROOT, doc), 'utf8'), index, { names })) {
        problems.push(`${doc}: \`${stale}\``);
      }
    }
    expect(problems).toEqual([]);
  });

  it('catches a planted stale path, package and name (and accepts real ones)', () => {
    const planted = [
      'See `packages/memory-core/src/memdir/index-file.ts`, `memdir/index-file.ts` and `apps/agent/src/server/`.',
      'Stale: `packages/memory-core/src/memdir/gone.ts`, `@engram/no-such-package`, `sandboxRootForGone`.',
      'Real: `@engram/memory-core`, `applyIndexUpsert`, `EngramError`, `ENGRAM_HOME`; stale: `ENGRAM_NO_SUCH_SETTING`.',
      '```',
      '`insideAFence` is not checked',
      '```',
      'Not paths: `~/.claude/settings.json`, `<session>/memory-outbox.json`, `/etc/claude-code/CLAUDE.md`.',
    ].join('\n');
    expect(staleMentions(planted, index)).toEqual([
      'packages/memory-core/src/memdir/gone.ts',
      '@engram/no-such-package',
      'sandboxRootForGone',
      'ENGRAM_NO_SUCH_SETTING',
    ]);
  });

  it('exempts only docs that describe other programs, and each exempt doc exists', () => {
    for (const doc of EXEMPT_DOCS) expect(index.paths.has(doc), doc).toBe(true);
    expect(mapDocs(ROOT)).toEqual(
      expect.arrayContaining(['README.md', 'ARCHITECTURE.md', 'docs/hosted-api.md']),
    );
  });
});
