import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  loadClaudeMdFiles,
  parseRuleFrontmatter,
  renderClaudeMdFiles,
  ruleMatchesPath,
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
});
