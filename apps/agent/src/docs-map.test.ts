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
  /** The `ENGRAM_*` names code reads: in a source or script that is not a test, or a compose `${…}` interpolation. */
  readEnv: Set<string>;
  /** Every npm script name of the root and the workspaces. */
  scripts: Set<string>;
  /** A class, interface or type declared in the code → the text of the files declaring it. */
  declared: Map<string, string[]>;
}

function buildIndex(root: string): CodeIndex {
  const paths = new Set<string>();
  const suffixes = new Set<string>();
  const packages = new Set<string>();
  const words = new Set<string>();
  const readEnv = new Set<string>();
  const scripts = new Set<string>();
  const declared = new Map<string, string[]>();
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
        const manifest = JSON.parse(readFileSync(abs, 'utf8')) as {
          name?: string;
          scripts?: Record<string, string>;
        };
        if (manifest.name) packages.add(manifest.name);
        for (const script of Object.keys(manifest.scripts ?? {})) scripts.add(script);
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
      const text = readFileSync(abs, 'utf8');
      for (const m of text.matchAll(/[A-Za-z_$][\w$]*/g)) words.add(m[0]);
      for (const m of text.matchAll(/\b(?:class|interface|type)\s+([A-Z]\w*)/g)) {
        declared.set(m[1] as string, [...(declared.get(m[1] as string) ?? []), text]);
      }
      const isTest = /\.test(?:-helpers)?\.ts$/.test(abs) || rel.startsWith('packages/testkit/');
      const reads = /\.ya?ml$/.test(abs)
        ? text.matchAll(/\$\{(ENGRAM_[A-Z0-9_]+)/g)
        : isTest || /\.json$/.test(abs)
          ? []
          : text.matchAll(/\b(ENGRAM_[A-Z0-9_]+)/g);
      for (const m of reads) readEnv.add(m[1] as string);
    }
  }
  return { paths, suffixes, packages, words, readEnv, scripts, declared };
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
// `MemoryQueue.afterTurn`, `StateStore.acquireLeaseInTurn()`: a type (with a lower-case letter, so not `MEMORY.md`)
// and one of its members.
const MEMBER_NAME = /^([A-Z][a-z0-9]\w*)\.([a-z]\w*)(?:\(\))?$/;
const ENV_NAME = /^ENGRAM_[A-Z0-9_]+$/;

/** A BENCHMARKS.md table row is one short line; the explanation goes below the table. */
const MAX_BENCHMARK_ROW = 250;

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
    // `Type.member`: a member of a type the code declares must occur in a file declaring it.
    const member = raw.match(MEMBER_NAME);
    if (member) {
      const [, type = '', name = ''] = member;
      const files = index.declared.get(type);
      if (files ? !files.some((text) => new RegExp(`\\b${name}\\b`).test(text)) : !index.words.has(type))
        stale.push(raw);
      continue;
    }
    const name = raw.replace(/\(\)$/, '');
    // A setting the docs name must be one the code reads (a name only tests or docs use configures nothing).
    if (ENV_NAME.test(raw) ? !index.readEnv.has(name) : CODE_NAME.test(raw) && !index.words.has(name))
      stale.push(raw);
  }
  return stale;
}

/** `engram` CLI commands as `bin/engram.ts` declares them: each command's options and, for a group, its subcommands. */
interface CliCommand {
  options: Set<string>;
  subcommands: Map<string, Set<string>>;
}

const CLI_SOURCE = 'apps/agent/src/bin/engram.ts';

/**
 * Reads the command tree from commander's calls in the CLI source: `program.command('run')`, a group
 * `const memory = program.command('memory')` and its `memory.command('list')`, and a group's subcommands made in a
 * loop (`for (const [name, …] of [['status', …], …]) team.command(name)`). A command's options are the flags of
 * the `.option(…)` calls up to the next `.command(`.
 */
function cliOf(source: string): Map<string, CliCommand> {
  const groups = new Map<string, string>();
  for (const m of source.matchAll(/const (\w+) = program\s*\.command\('([\w-]+)'/g))
    groups.set(m[1] as string, m[2] as string);
  const calls = [...source.matchAll(/(\w+)\s*\.command\((?:'([\w-]+)[^']*'|(\w+))\)/g)];
  const commands = new Map<string, CliCommand>();
  calls.forEach((m, i) => {
    const segment = source.slice(m.index, calls[i + 1]?.index ?? source.length);
    const options = new Set<string>();
    for (const o of segment.matchAll(/'(?:-([A-Za-z]), )?(--[a-z][\w-]*)/g)) {
      options.add(o[2] as string);
      if (o[1]) options.add(`-${o[1]}`);
    }
    let names = m[2] ? [m[2]] : [];
    if (m[3]) {
      // The loop that names this group's subcommands: the tuples' first strings.
      const loop = source.lastIndexOf('for (const [', m.index);
      names = [...source.slice(loop, m.index).matchAll(/\[\s*'([\w-]+)'/g)].map((n) => n[1] as string);
    }
    const group = groups.get(m[1] as string);
    for (const name of names) {
      if (m[1] === 'program') commands.set(name, { options, subcommands: new Map() });
      else if (group) commands.get(group)?.subcommands.set(name, options);
    }
  });
  return commands;
}

const GLOBAL_OPTIONS = new Set(['--help', '-h', '--version', '-V']);

/** `engram …` spans naming a command, subcommand or option the CLI does not have. */
function staleCommands(markdown: string, cli: Map<string, CliCommand>): string[] {
  const stale: string[] = [];
  for (const raw of backticked(markdown)) {
    const words = raw.replace(/^npx /, '').replace(/\\\|/g, '|').split(/\s+/);
    if (words[0] !== 'engram' || words.length < 2 || words[1] === '…') continue;
    const [, name = '', sub] = words;
    let options: Set<string> | undefined;
    if (name.startsWith('-')) options = new Set();
    else {
      const command = cli.get(name);
      options = command?.options;
      if (command && command.subcommands.size > 0 && sub && /^[a-z][\w|-]*$/.test(sub)) {
        const subs = sub.split('|').map((s) => command.subcommands.get(s));
        options = subs.every(Boolean) ? new Set(subs.flatMap((o) => [...(o as Set<string>)])) : undefined;
      }
    }
    const flags = words.map((w) => w.replace(/^\[/, '').match(/^--?[A-Za-z][\w-]*/)?.[0]).filter(Boolean);
    if (!options || flags.some((f) => !options.has(f as string) && !GLOBAL_OPTIONS.has(f as string)))
      stale.push(raw);
  }
  return stale;
}

/** `npm run <script>` and `bench:<name>` spans naming a script no package.json has. */
function staleScripts(markdown: string, index: CodeIndex): string[] {
  const stale: string[] = [];
  for (const raw of backticked(markdown)) {
    const named = [...raw.matchAll(/\bnpm run ([\w:-]+)/g)].map((m) => m[1] as string);
    if (/^bench:[\w-]+$/.test(raw)) named.push(raw);
    const workspaces = [...raw.matchAll(/-w (@engram\/[\w-]+)/g)].map((m) => m[1] as string);
    if (named.some((n) => !index.scripts.has(n)) || workspaces.some((w) => !index.packages.has(w)))
      stale.push(raw);
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

  const cli = cliOf(readFileSync(join(ROOT, CLI_SOURCE), 'utf8'));

  /** Everything a doc's text states that the code does not have. */
  const staleIn = (markdown: string, options: { names?: boolean } = {}) => [
    ...staleMentions(markdown, index, options),
    ...staleCommands(markdown, cli),
    ...staleScripts(markdown, index),
  ];

  it('every path, package, code name, setting, CLI command and npm script a doc writes in backticks exists', () => {
    const problems: string[] = [];
    for (const doc of mapDocs(ROOT)) {
      const names = !PATHS_ONLY_DOCS.has(doc);
      for (const stale of staleIn(readFileSync(join(ROOT, doc), 'utf8'), { names })) {
        problems.push(`${doc}: \`${stale}\``);
      }
    }
    expect(problems).toEqual([]);
  });

  it('a stale name planted in a copy of a real doc is reported, and only it', () => {
    const doc = readFileSync(join(ROOT, 'ARCHITECTURE.md'), 'utf8');
    expect(staleIn(doc)).toEqual([]);
    const planted = doc.replace(
      '## Job map',
      'Renamed since: `runForkPipelineGone`, `MemoryQueue.afterTurnGone`, `ENGRAM_NEVER_READ`, `engram team sync`, `npm run bench:gone`.\n\n## Job map',
    );
    expect(planted).not.toBe(doc);
    expect(staleIn(planted)).toEqual([
      'runForkPipelineGone',
      'MemoryQueue.afterTurnGone',
      'ENGRAM_NEVER_READ',
      'engram team sync',
      'npm run bench:gone',
    ]);
  });

  it('reads the CLI from its source: commands, group subcommands (literal and looped) and options', () => {
    expect([...cli.keys()]).toEqual(
      expect.arrayContaining(['run', 'memory', 'team', 'tenants', 'serve', 'hook']),
    );
    expect([...(cli.get('team')?.subcommands.keys() ?? [])].sort()).toEqual(['pull', 'push', 'status']);
    expect(cli.get('memory')?.subcommands.get('history')?.has('--json')).toBe(true);
    expect(cli.get('run')?.options).toEqual(
      new Set(['-p', '--prompt', '--session', '--cwd', '--output-format', '--allowed-tools']),
    );
    expect(
      staleCommands(
        [
          'Real: `engram run -p "<p>" [--session <id>]`, `engram memory list\\|path [--json]`, `engram team status|pull`,',
          '`npx engram demo`, `engram --version`, `engram hook Stop`.',
          'Stale: `engram sync`, `engram team fetch`, `engram run --no-such-flag`, `engram memory list --force`.',
        ].join('\n'),
        cli,
      ),
    ).toEqual([
      'engram sync',
      'engram team fetch',
      'engram run --no-such-flag',
      'engram memory list --force',
    ]);
  });

  it('names every top-level CLI command in the README', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const named = new Set(backticked(readme).map((span) => span.match(/^(?:npx )?engram ([a-z-]+)/)?.[1]));
    expect([...cli.keys()].filter((command) => !named.has(command))).toEqual([]);
  });

  it('ARCHITECTURE.md is a map of at most 200 lines, and every BENCHMARKS.md table row is one short line', () => {
    expect(readFileSync(join(ROOT, 'ARCHITECTURE.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(200);
    const long = readFileSync(join(ROOT, 'BENCHMARKS.md'), 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('|') && line.length > MAX_BENCHMARK_ROW);
    expect(long.map((line) => `${line.slice(0, 60)}… (${line.length} characters)`)).toEqual([]);
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
