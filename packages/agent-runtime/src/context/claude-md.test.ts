import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  findImports,
  loadClaudeMdFiles,
  MAX_IMPORT_DEPTH,
  parseRuleFrontmatter,
  renderClaudeMdFiles,
  ruleMatchesPath,
  splitPathPatterns,
} from './claude-md.js';

function layout() {
  const root = mkdtempSync(join(tmpdir(), 'engram-claudemd-'));
  const home = join(root, 'home');
  const repo = join(root, 'repo');
  const sub = join(repo, 'pkg', 'api');
  mkdirSync(join(home, '.claude'), { recursive: true });
  mkdirSync(join(repo, '.claude', 'rules'), { recursive: true });
  mkdirSync(join(sub, '.claude'), { recursive: true });
  writeFileSync(join(root, 'managed.md'), 'managed rule');
  writeFileSync(join(home, '.claude', 'CLAUDE.md'), 'user rule');
  writeFileSync(join(repo, 'CLAUDE.md'), 'repo rule');
  writeFileSync(join(repo, '.claude', 'CLAUDE.md'), 'repo dot-claude rule');
  writeFileSync(join(repo, '.claude', 'rules', 'b-style.md'), 'style rule');
  writeFileSync(
    join(repo, '.claude', 'rules', 'a-sql.md'),
    '---\npaths:\n  - "db/**/*.sql"\n  - migrations/*.sql\n---\nUse snake_case in SQL.\n',
  );
  writeFileSync(join(sub, 'CLAUDE.md'), 'api rule');
  writeFileSync(join(repo, 'CLAUDE.local.md'), 'local repo rule');
  writeFileSync(join(sub, 'CLAUDE.local.md'), 'local api rule');
  return { root, home, repo, sub };
}

describe('CLAUDE.md loading', () => {
  it('orders managed → user → project (root to cwd, rules sorted) → local', async () => {
    const { root, home, repo, sub } = layout();
    const files = await loadClaudeMdFiles({
      cwd: sub,
      projectRoot: repo,
      homeDir: home,
      managedPath: join(root, 'managed.md'),
    });
    expect(files.map((f) => [f.kind, f.content.trim()])).toEqual([
      ['managed', 'managed rule'],
      ['user', 'user rule'],
      ['project', 'repo rule'],
      ['project', 'repo dot-claude rule'],
      ['project', 'Use snake_case in SQL.'],
      ['project', 'style rule'],
      ['project', 'api rule'],
      ['local', 'local repo rule'],
      ['local', 'local api rule'],
    ]);
    const rendered = renderClaudeMdFiles(files);
    expect(rendered.indexOf('managed rule')).toBeLessThan(rendered.indexOf('user rule'));
    expect(rendered.indexOf('api rule')).toBeLessThan(rendered.indexOf('local repo rule'));
    // The conditional rule is not part of the session-start context.
    expect(rendered).not.toContain('snake_case');
  });

  it('matches a paths-scoped rule only against files under its globs', async () => {
    const { home, repo } = layout();
    const files = await loadClaudeMdFiles({
      cwd: repo,
      projectRoot: repo,
      homeDir: home,
      managedPath: '/nonexistent',
    });
    const rule = files.find((f) => f.paths)!;
    expect(rule.paths).toEqual(['db/**/*.sql', 'migrations/*.sql']);
    expect(ruleMatchesPath(rule, join(repo, 'db', 'schema', 'users.sql'))).toBe(true);
    expect(ruleMatchesPath(rule, join(repo, 'migrations', '001.sql'))).toBe(true);
    expect(ruleMatchesPath(rule, join(repo, 'src', 'users.ts'))).toBe(false);
    expect(ruleMatchesPath(rule, '/elsewhere/db/x.sql')).toBe(false);
  });

  it('reads inline and list forms of `paths` and ignores files without frontmatter', () => {
    expect(parseRuleFrontmatter('---\npaths: ["a/**", "b/*.ts"]\n---\nbody').paths).toEqual([
      'a/**',
      'b/*.ts',
    ]);
    expect(parseRuleFrontmatter('---\npaths: src/**/*.ts\n---\nbody').paths).toEqual(['src/**/*.ts']);
    expect(parseRuleFrontmatter('no frontmatter')).toEqual({ body: 'no frontmatter' });
    expect(parseRuleFrontmatter('---\ntitle: x\n---\nbody')).toEqual({ body: 'body' });
  });

  it('loads only the working directory when it lies outside the project root', async () => {
    const { home, sub, root } = layout();
    const files = await loadClaudeMdFiles({
      cwd: sub,
      projectRoot: join(root, 'other'),
      homeDir: home,
      managedPath: '/nonexistent',
    });
    expect(files.map((f) => f.content.trim())).toEqual(['user rule', 'api rule', 'local api rule']);
  });

  it('searches .claude/rules recursively and loads user-level ~/.claude/rules, in sorted path order', async () => {
    const { home, repo } = layout();
    mkdirSync(join(repo, '.claude', 'rules', 'frontend', 'react'), { recursive: true });
    mkdirSync(join(repo, '.claude', 'rules', '.hidden'), { recursive: true });
    writeFileSync(join(repo, '.claude', 'rules', 'frontend', 'css.md'), 'css rule');
    writeFileSync(join(repo, '.claude', 'rules', 'frontend', 'react', 'hooks.md'), 'hooks rule');
    writeFileSync(join(repo, '.claude', 'rules', '.hidden', 'x.md'), 'hidden rule');
    mkdirSync(join(home, '.claude', 'rules', 'personal'), { recursive: true });
    writeFileSync(join(home, '.claude', 'rules', 'tone.md'), 'user tone rule');
    writeFileSync(join(home, '.claude', 'rules', 'personal', 'git.md'), 'user git rule');
    const files = await loadClaudeMdFiles({
      cwd: repo,
      projectRoot: repo,
      homeDir: home,
      managedPath: '/nonexistent',
    });
    expect(files.map((f) => [f.kind, f.content.trim()])).toEqual([
      ['user', 'user rule'],
      ['user', 'user git rule'],
      ['user', 'user tone rule'],
      ['project', 'repo rule'],
      ['project', 'repo dot-claude rule'],
      ['project', 'Use snake_case in SQL.'],
      ['project', 'style rule'],
      ['project', 'css rule'],
      ['project', 'hooks rule'],
      ['local', 'local repo rule'],
    ]);
  });

  it('reads brace globs in every YAML form of `paths`: list, quoted single line, bare, flow list', () => {
    const forms = [
      '---\npaths:\n  - src/**/*.{ts,tsx}\n  - "test/**/*.{spec,test}.ts"\n---\nbody',
      '---\npaths: "src/**/*.{ts,tsx}, test/**/*.{spec,test}.ts"\n---\nbody',
      '---\npaths: src/**/*.{ts,tsx}, test/**/*.{spec,test}.ts\n---\nbody',
      '---\npaths: [src/**/*.{ts,tsx}, "test/**/*.{spec,test}.ts"]\n---\nbody',
      "---\ndescription: React rules\npaths: 'src/**/*.{ts,tsx},test/**/*.{spec,test}.ts'\n---\nbody",
    ];
    for (const text of forms) {
      const parsed = parseRuleFrontmatter(text);
      expect(parsed).toEqual({ body: 'body', paths: ['src/**/*.{ts,tsx}', 'test/**/*.{spec,test}.ts'] });
      const rule = {
        path: '/r/rule.md',
        kind: 'project' as const,
        content: 'x',
        paths: parsed.paths!,
        baseDir: '/r',
      };
      expect(ruleMatchesPath(rule, '/r/src/ui/App.tsx')).toBe(true);
      expect(ruleMatchesPath(rule, '/r/src/index.ts')).toBe(true);
      expect(ruleMatchesPath(rule, '/r/test/a.spec.ts')).toBe(true);
      expect(ruleMatchesPath(rule, '/r/src/styles.css')).toBe(false);
    }
    // `*.md` is an alias to YAML; read as the glob it is.
    expect(parseRuleFrontmatter('---\npaths: *.md\n---\nbody').paths).toEqual(['*.md']);
    expect(splitPathPatterns('a/{b,c}/{d,{e,f}}, g')).toEqual(['a/{b,c}/{d,{e,f}}', 'g']);
  });

  it('expands @imports (relative and ~/) right after the importing file, cycle-safe and depth-limited', async () => {
    const { home, repo } = layout();
    writeFileSync(join(repo, 'CLAUDE.md'), '@AGENTS.md\n');
    writeFileSync(
      join(repo, 'AGENTS.md'),
      'Agents: see @docs/style.md and @~/.claude/my-prefs.md.\n```\n@not-imported.md\n```\nAlso `@code.md` and me@example.com\n',
    );
    mkdirSync(join(repo, 'docs'), { recursive: true });
    writeFileSync(join(repo, 'docs', 'style.md'), 'style guide; back to @../AGENTS.md\n');
    writeFileSync(join(repo, 'not-imported.md'), 'NOT IMPORTED');
    writeFileSync(join(repo, 'code.md'), 'NOT IMPORTED EITHER');
    writeFileSync(join(home, '.claude', 'my-prefs.md'), 'my prefs');
    const files = await loadClaudeMdFiles({
      cwd: repo,
      projectRoot: repo,
      homeDir: home,
      managedPath: '/nonexistent',
    });
    const contents = files.map((f) => f.content.trim());
    expect(contents.slice(1, 5)).toEqual([
      '@AGENTS.md',
      expect.stringContaining('Agents: see'),
      'style guide; back to @../AGENTS.md',
      'my prefs',
    ]);
    expect(files[2]!.importedFrom).toBe(join(repo, 'CLAUDE.md'));
    expect(files[4]).toMatchObject({ kind: 'project', importedFrom: join(repo, 'AGENTS.md') });
    expect(contents.join('\n')).not.toContain('NOT IMPORTED');
    expect(renderClaudeMdFiles(files)).toContain(`Contents of ${join(repo, 'AGENTS.md')}`);

    // A chain deeper than the limit stops there.
    const chain = mkdtempSync(join(tmpdir(), 'engram-claudemd-depth-'));
    for (let i = 0; i <= MAX_IMPORT_DEPTH + 2; i++)
      writeFileSync(join(chain, `f${i}.md`), `level ${i} @f${i + 1}.md`);
    writeFileSync(join(chain, 'CLAUDE.md'), '@f0.md');
    const deep = await loadClaudeMdFiles({
      cwd: chain,
      projectRoot: chain,
      homeDir: home,
      managedPath: '/nonexistent',
    });
    const levels = deep.filter((f) => f.importedFrom).map((f) => f.content.split(' @')[0]);
    expect(levels).toEqual(Array.from({ length: MAX_IMPORT_DEPTH }, (_, i) => `level ${i}`));
  });

  it('a repository file cannot import files outside the project (only Markdown under ~/.claude)', async () => {
    const { home, repo, root } = layout();
    writeFileSync(join(root, 'secret.txt'), 'SECRET OUTSIDE');
    writeFileSync(join(home, '.claude', '.credentials.json'), 'SECRET CREDENTIALS');
    writeFileSync(
      join(repo, 'CLAUDE.md'),
      `@${join(root, 'secret.txt')}\n@~/.claude/.credentials.json\n@../secret.txt`,
    );
    writeFileSync(join(home, '.claude', 'CLAUDE.md'), `user: @${join(root, 'secret.txt')}`);
    const files = await loadClaudeMdFiles({
      cwd: repo,
      projectRoot: repo,
      homeDir: home,
      managedPath: '/nonexistent',
    });
    const fromRepo = files.filter((f) => f.importedFrom === join(repo, 'CLAUDE.md'));
    expect(fromRepo).toEqual([]);
    // The user's own file may import anything.
    expect(files.find((f) => f.importedFrom === join(home, '.claude', 'CLAUDE.md'))?.content).toBe(
      'SECRET OUTSIDE',
    );
  });

  describe('a served turn (bounded at the tenant workspace)', () => {
    // The host as `engram serve` sees it: a git repository above everything (the operator's), the tenants'
    // workspaces inside it, each tenant's own home area, and the operator's home.
    function hosted() {
      const root = mkdtempSync(join(tmpdir(), 'engram-claudemd-served-'));
      const ws = join(root, 'workspaces', 'acme');
      const rival = join(root, 'workspaces', 'bravo');
      const cwd = join(ws, 'app');
      const home = join(root, 'tenants', 'acme', 'home');
      const operatorHome = join(root, 'operator-home');
      for (const d of [
        cwd,
        join(rival, '.claude'),
        join(home, '.claude', 'rules'),
        join(operatorHome, '.claude'),
        join(cwd, '.claude', 'rules'),
      ])
        mkdirSync(d, { recursive: true });
      writeFileSync(join(root, 'CLAUDE.md'), 'OPERATOR REPO RULE');
      writeFileSync(join(root, 'workspaces', 'CLAUDE.md'), 'ABOVE WORKSPACE RULE');
      writeFileSync(join(operatorHome, '.claude', 'CLAUDE.md'), 'OPERATOR USER RULE');
      writeFileSync(join(rival, 'secret.md'), 'RIVAL SECRET');
      writeFileSync(join(rival, '.claude', 'CLAUDE.md'), 'RIVAL RULE');
      writeFileSync(join(home, 'notes.md'), 'HOME OUTSIDE CLAUDE DIR');
      writeFileSync(
        join(home, '.claude', 'CLAUDE.md'),
        'tenant user rule @~/.claude/extra.md @/etc/hostname',
      );
      writeFileSync(join(home, '.claude', 'extra.md'), 'tenant user extra');
      writeFileSync(join(home, '.claude', 'rules', 'own.md'), 'tenant user rules file');
      writeFileSync(join(ws, 'CLAUDE.md'), 'workspace rule @./shared.md');
      writeFileSync(join(ws, 'shared.md'), 'workspace shared');
      writeFileSync(
        join(cwd, 'CLAUDE.md'),
        [
          'app rule',
          '@../../bravo/secret.md',
          `@${join(rival, 'secret.md')}`,
          '@~/notes.md',
          '@~/.claude/extra.md',
          '@./link.md',
          '@../../../CLAUDE.md',
        ].join('\n'),
      );
      // Symlinks the tenant could plant in its own workspace, pointing at the rival's files.
      symlinkSync(join(rival, 'secret.md'), join(cwd, 'link.md'));
      symlinkSync(join(rival, 'secret.md'), join(cwd, 'CLAUDE.local.md'));
      symlinkSync(join(rival, '.claude', 'CLAUDE.md'), join(cwd, '.claude', 'CLAUDE.md'));
      symlinkSync(join(rival, 'secret.md'), join(cwd, '.claude', 'rules', 'evil.md'));
      writeFileSync(join(cwd, '.claude', 'rules', 'good.md'), 'app rules file');
      // A FIFO named like a rule must not hang the load.
      execFileSync('mkfifo', [join(ws, 'CLAUDE.local.md')]);
      return { root, ws, cwd, home, operatorHome };
    }

    it('reads nothing above the workspace or in another tenant’s, whatever the imports and symlinks say', async () => {
      const { root, ws, cwd, home } = hosted();
      const files = await loadClaudeMdFiles({
        cwd,
        projectRoot: root, // the git root is the operator's repository, above the workspace
        homeDir: home,
        managedPath: '/nonexistent',
        boundary: ws,
      });
      const text = files.map((f) => f.content).join('\n');
      for (const leaked of [
        'OPERATOR REPO RULE',
        'ABOVE WORKSPACE RULE',
        'OPERATOR USER RULE',
        'RIVAL SECRET',
        'RIVAL RULE',
        'HOME OUTSIDE CLAUDE DIR',
      ]) {
        expect(text).not.toContain(leaked);
      }
      // /etc/hostname from the tenant's own user file is outside both areas too.
      expect(files.some((f) => f.path === '/etc/hostname')).toBe(false);
      expect(files.map((f) => f.content.split(' @')[0]?.split('\n')[0])).toEqual([
        'tenant user rule',
        'tenant user extra',
        'tenant user rules file',
        'workspace rule',
        'workspace shared',
        'app rule',
        'app rules file',
      ]);
    });

    it('without a boundary (the CLI) keeps Claude Code’s behaviour: the project walk starts at the git root', async () => {
      const { root, cwd, operatorHome } = hosted();
      const files = await loadClaudeMdFiles({
        cwd,
        projectRoot: root,
        homeDir: operatorHome,
        managedPath: '/nonexistent',
      });
      const text = files.map((f) => f.content).join('\n');
      expect(text).toContain('OPERATOR REPO RULE');
      expect(text).toContain('OPERATOR USER RULE');
    });
  });

  it('finds @mentions outside code, keeps e-mail addresses and trailing punctuation out', () => {
    expect(
      findImports('@a.md, see @./b/c.md. And @~/x.md\nmail me@host.com `@code.md`\n```\n@fenced.md\n```'),
    ).toEqual(['a.md', './b/c.md', '~/x.md']);
  });
});
