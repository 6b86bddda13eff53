import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The workspace's dependency rules (ARCHITECTURE.md, "Packages and the direction of dependencies"), checked on the files themselves: apps are
// compositions of packages and import no other app; packages import no app; memory-core stays free of the
// queue, Redis and the model SDK; the foreground's domain code (agent-session) carries no CLI, HTTP or
// terminal I/O; and a workspace's shipped code imports only what its package.json declares as a runtime
// dependency, so `npm ci --omit=dev` installs everything it needs and nothing from the tests.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

interface Workspace {
  dir: string;
  name: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  /** Provided by the host that uses the package (e.g. the Agent SDK an adapter is for); counts as declared. */
  peerDependencies: Record<string, string>;
}

function workspaces(): Workspace[] {
  const found: Workspace[] = [];
  for (const group of ['apps', 'packages']) {
    for (const entry of readdirSync(join(ROOT, group), { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const dir = join(ROOT, group, entry.name);
      let pkg: {
        name: string;
        dependencies?: Record<string, string>;
        devDependencies?: Record<string, string>;
        peerDependencies?: Record<string, string>;
      };
      try {
        pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
      } catch {
        continue; // not a workspace (no package.json)
      }
      found.push({
        dir,
        name: pkg.name,
        dependencies: pkg.dependencies ?? {},
        devDependencies: pkg.devDependencies ?? {},
        peerDependencies: pkg.peerDependencies ?? {},
      });
    }
  }
  return found;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name === '__fixtures__') continue;
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.(ts|tsx|mts|js|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(path);
    }
  };
  walk(join(dir, 'src'));
  return out;
}

const isTestFile = (path: string) => /\.test(-helpers)?\.ts$/.test(path);

/** Every module specifier a file imports or re-exports, statically or with `import()`. */
export function importSpecifiers(text: string): string[] {
  const specs: string[] = [];
  const patterns = [
    /(?:^|[\s;])(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /(?:^|[\s;])import\s*['"]([^'"]+)['"]/g,
    /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
    /\brequire\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const pattern of patterns) for (const m of text.matchAll(pattern)) specs.push(m[1]!);
  return specs;
}

/** `@scope/name/sub/path` → `@scope/name`; `name/sub` → `name`; node built-ins and relative paths → undefined. */
function packageOf(spec: string): string | undefined {
  if (spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('node:')) return undefined;
  const parts = spec.split('/');
  return spec.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
}

const BUILTINS = new Set(builtinModules.map((m) => m.replace(/^node:/, '')));

interface ImportSite {
  workspace: string;
  file: string;
  spec: string;
}

function imports(ws: Workspace, which: 'all' | 'shipped'): ImportSite[] {
  const sites: ImportSite[] = [];
  for (const file of sourceFiles(ws.dir)) {
    if (which === 'shipped' && isTestFile(file)) continue;
    for (const spec of importSpecifiers(readFileSync(file, 'utf8'))) {
      sites.push({ workspace: ws.name, file: relative(ROOT, file), spec });
    }
  }
  return sites;
}

const ALL = workspaces();
const APPS = ALL.filter((w) => relative(ROOT, w.dir).startsWith('apps'));
const APP_NAMES = new Set(APPS.map((w) => w.name));
const byName = (name: string) => {
  const ws = ALL.find((w) => w.name === name);
  if (!ws) throw new Error(`workspace ${name} not found under apps/ or packages/`);
  return ws;
};

describe('dependency boundaries', () => {
  it('finds the workspaces and their imports (the scan is not empty)', () => {
    expect(ALL.map((w) => w.name)).toEqual(
      expect.arrayContaining([
        '@engram/agent',
        '@engram/workers',
        '@engram/worker-service',
        '@engram/memory-core',
      ]),
    );
    expect(imports(byName('@engram/agent'), 'shipped').length).toBeGreaterThan(50);
  });

  it('the import scanner sees static, re-export, side-effect and dynamic imports', () => {
    const text = [
      "import { a } from '@engram/x/a';",
      "import type { B } from '@engram/y/b';",
      "export { c } from './c.js';",
      "import 'side-effect';",
      "const d = await import('@engram/z/d');",
      'import {\n  e,\n  f,\n} from "multi-line";',
    ].join('\n');
    expect(importSpecifiers(text).sort()).toEqual(
      ['./c.js', '@engram/x/a', '@engram/y/b', '@engram/z/d', 'multi-line', 'side-effect'].sort(),
    );
  });

  it('no app imports another app, and no package imports an app (tests included)', () => {
    const offending: string[] = [];
    for (const ws of ALL) {
      for (const site of imports(ws, 'all')) {
        const pkg = packageOf(site.spec);
        const reachesIntoApps = /(^|\/)apps\/[^/]+\/(src|dist)\//.test(site.spec);
        if ((pkg && APP_NAMES.has(pkg) && pkg !== ws.name) || reachesIntoApps)
          offending.push(`${site.file}: ${site.spec}`);
      }
    }
    expect(offending).toEqual([]);
  });

  it('apps/agent lists no other app in its package.json, in dependencies or devDependencies', () => {
    const agent = byName('@engram/agent');
    const listed = [...Object.keys(agent.dependencies), ...Object.keys(agent.devDependencies)];
    expect(listed.filter((name) => APP_NAMES.has(name))).toEqual([]);
  });

  it('memory-core imports no queue, Redis, BullMQ or model SDK', () => {
    const forbidden =
      /^(bullmq|ioredis|pg|@anthropic-ai\/|@engram\/(queue|agent-runtime|memory-work|worker-service))/;
    const offending = imports(byName('@engram/memory-core'), 'all')
      .filter((s) => forbidden.test(s.spec))
      .map((s) => `${s.file}: ${s.spec}`);
    expect(offending).toEqual([]);
  });

  it('agent-session, the foreground domain, imports no CLI, HTTP or metrics framework and writes to no terminal', () => {
    const ws = byName('@engram/agent-session');
    const frameworks = /^(commander|hono|@hono\/|prom-client|@engram\/(worker-service|scripted-model))/;
    const offending = imports(ws, 'shipped')
      .filter((s) => frameworks.test(s.spec))
      .map((s) => `${s.file}: ${s.spec}`);
    // Printing is the app's: the package returns what happened and the words for it, never writes them.
    for (const file of sourceFiles(ws.dir).filter((f) => !isTestFile(f))) {
      const text = readFileSync(file, 'utf8');
      if (/\bprocess\.(stdout|stderr)\b|\bconsole\.\w+\(/.test(text))
        offending.push(`${relative(ROOT, file)}: writes output`);
    }
    expect(sourceFiles(ws.dir).filter((f) => !isTestFile(f)).length).toBeGreaterThan(5);
    expect(offending).toEqual([]);
  });

  it("apps re-export nothing from a package (importers use the package's own module)", () => {
    const offending: string[] = [];
    for (const ws of APPS) {
      for (const file of sourceFiles(ws.dir).filter((f) => !isTestFile(f))) {
        const text = readFileSync(file, 'utf8');
        for (const m of text.matchAll(/(?:^|[\s;])export\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g))
          if (packageOf(m[1]!)) offending.push(`${relative(ROOT, file)}: ${m[1]}`);
      }
    }
    expect(offending).toEqual([]);
  });

  it("each workspace's shipped code imports only its declared runtime dependencies (never testkit)", () => {
    // testkit is the tests' own infrastructure: it ships nowhere (no workspace lists it as a runtime dependency).
    expect(ALL.filter((w) => '@engram/testkit' in w.dependencies).map((w) => w.name)).toEqual([]);
    const offending: string[] = [];
    for (const ws of ALL) {
      if (ws.name === '@engram/testkit') continue;
      for (const site of imports(ws, 'shipped')) {
        const pkg = packageOf(site.spec);
        if (!pkg || BUILTINS.has(pkg) || pkg === ws.name) continue;
        if (!(pkg in ws.dependencies) && !(pkg in ws.peerDependencies))
          offending.push(`${site.file}: ${site.spec} (${ws.name} does not list ${pkg})`);
      }
    }
    expect(offending).toEqual([]);
  });

  it("apps/agent's production dependency tree (npm ls --omit=dev) has no app, testkit or testcontainers", () => {
    const tree = execFileSync('npm', ['ls', '--omit=dev', '--all', '--json', '-w', '@engram/agent'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    const names = new Set<string>();
    const visit = (deps: Record<string, { dependencies?: Record<string, unknown> }> | undefined) => {
      for (const [name, node] of Object.entries(deps ?? {})) {
        names.add(name);
        visit(node.dependencies as never);
      }
    };
    visit(JSON.parse(tree).dependencies);
    expect(names.has('@engram/agent')).toBe(true);
    expect(names.has('@engram/worker-service')).toBe(true);
    expect(
      [...names].filter((n) => n === '@engram/workers' || n === '@engram/testkit' || n === 'testcontainers'),
    ).toEqual([]);
  });
});
