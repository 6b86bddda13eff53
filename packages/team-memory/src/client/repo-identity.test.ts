import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRemoteUrl, repoIdentityOf } from './repo-identity.js';

describe('parseRemoteUrl', () => {
  it.each([
    'git@github.com:Acme/Widgets.git',
    'git@github.com:acme/widgets',
    'github.com:acme/widgets.git',
    'ssh://git@github.com/acme/widgets.git',
    'ssh://git@github.com:22/acme/widgets',
    'git+ssh://git@github.com/acme/widgets.git',
    'https://github.com/acme/widgets',
    'https://github.com/acme/widgets.git/',
    'https://user:secret-token@github.com/acme/widgets.git',
    'http://github.com/acme/widgets.git',
    'git://github.com/acme/widgets.git',
  ])('%s → acme/widgets', (url) => {
    expect(parseRemoteUrl(url)).toEqual({ ok: true, repo: 'acme/widgets', host: 'github.com' });
  });

  it.each([
    ['/srv/git/widgets.git', 'local path'],
    ['../widgets', 'local path'],
    ['file:///srv/git/widgets.git', 'file://'],
    ['C:\\repos\\widgets', 'local path'],
    ['https://gitlab.com/group/sub/widgets.git', '3 parts'],
    ['https://github.com/acme', '1 parts'],
    ['', 'no URL'],
  ])('%s has no team identity (%s)', (url, why) => {
    const result = parseRemoteUrl(url);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toContain(why);
  });

  it('never keeps credentials from the URL', () => {
    expect(JSON.stringify(parseRemoteUrl('https://me:hunter2@github.com/a/b'))).not.toContain('hunter2');
  });
});

describe('repoIdentityOf', () => {
  it('reads the origin remote of a real git repository, and says when there is none', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'engram-repo-'));
    try {
      execFileSync('git', ['init', '-q', dir]);
      expect(await repoIdentityOf(dir)).toEqual({
        ok: false,
        reason: 'the project has no git origin remote',
      });
      execFileSync('git', ['-C', dir, 'remote', 'add', 'origin', 'git@github.com:acme/widgets.git']);
      expect(await repoIdentityOf(dir)).toEqual({ ok: true, repo: 'acme/widgets', host: 'github.com' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
