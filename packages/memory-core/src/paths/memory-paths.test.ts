import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initRepo, makeTempDir } from '../testing/temp-dir.test-helpers.js';
import {
  engramPathsFor,
  isMemoryPathSync,
  MemoryPathError,
  resolveEngramPaths,
  validateMemoryDirOverride,
  validateSessionId,
} from './memory-paths.js';
import { sanitizePath } from './sanitize.js';

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    if (error instanceof MemoryPathError) return error.code;
    throw error;
  }
  return undefined;
}

describe('validateMemoryDirOverride', () => {
  it('treats unset and empty as "no override"', () => {
    expect(validateMemoryDirOverride(undefined)).toBeUndefined();
    expect(validateMemoryDirOverride('')).toBeUndefined();
  });

  it.each([
    ['relative/path', 'RELATIVE'],
    ['./mem', 'RELATIVE'],
    ['mem', 'RELATIVE'],
    ['~/mem', 'TILDE'],
    ['~', 'TILDE'],
    ['/', 'TOO_SHORT'],
    ['/a', 'TOO_SHORT'],
    ['//', 'UNC'],
    ['/a/..', 'TOO_SHORT'],
    ['C:', 'DRIVE_ROOT'],
    ['c:\\', 'DRIVE_ROOT'],
    ['\\\\server\\share\\mem', 'UNC'],
    ['//server/share/mem', 'UNC'],
    ['/tmp/mem\0/x', 'NUL_BYTE'],
  ])('rejects %j with %s', (value, code) => {
    expect(codeOf(() => validateMemoryDirOverride(value))).toBe(code);
  });

  it('explains what to do in the error message', () => {
    expect(() => validateMemoryDirOverride('notes')).toThrow(/ENGRAM_MEMORY_DIR must be an absolute path/);
    expect(() => validateMemoryDirOverride('~/notes')).toThrow(/not expanded/);
  });

  it('normalizes an accepted path: `..` resolved, trailing separators stripped, NFC', () => {
    expect(validateMemoryDirOverride('/tmp/a/../mem/')).toBe('/tmp/mem');
    expect(validateMemoryDirOverride('/tmp/mem///')).toBe('/tmp/mem');
    expect(validateMemoryDirOverride('/tmp/cafe\u0301')).toBe('/tmp/caf\u00e9');
    expect(validateMemoryDirOverride('/abc')).toBe('/abc');
  });
});

describe('validateSessionId', () => {
  it.each(['', '../x', '..', '.', '.hidden', 'a/b', 'a\\b', 'a\0b', 'a..b', 'x'.repeat(129), 'has space'])(
    'rejects %j',
    (id) => {
      expect(codeOf(() => validateSessionId(id))).toBe('INVALID_SESSION_ID');
    },
  );

  it('accepts UUIDs and simple ids', () => {
    expect(validateSessionId('0b3c9f8e-2d4a-4c6b-9a1e-7f5d3c2b1a09')).toBe(
      '0b3c9f8e-2d4a-4c6b-9a1e-7f5d3c2b1a09',
    );
    expect(validateSessionId('test_session-1')).toBe('test_session-1');
  });

  it('refuses dots, which job payloads refuse too (one rule for the CLI, paths and payloads)', () => {
    expect(() => validateSessionId('a.b')).toThrow(/Session id must be/);
  });
});

describe('resolveEngramPaths', () => {
  let dir: string;
  let cleanup: () => void;
  let repo: string;
  beforeAll(() => {
    ({ dir, cleanup } = makeTempDir('engram-paths-'));
    repo = join(dir, 'repo');
    mkdirSync(join(repo, 'packages', 'api'), { recursive: true });
    initRepo(repo);
  });
  afterAll(() => cleanup());

  it('keys memory by the git root and transcripts by the launch directory (docs/design.md §3)', async () => {
    const home = join(dir, 'home', '.engram');
    const cwd = join(repo, 'packages', 'api');
    const paths = await resolveEngramPaths({ engramHome: home, cwd });
    const projectDir = join(home, 'projects', sanitizePath(repo));
    const transcriptDir = join(home, 'projects', sanitizePath(cwd));
    expect(paths.projectRoot).toBe(repo);
    expect(paths.projectDir).toBe(projectDir);
    expect(paths.memoryDir).toBe(join(projectDir, 'memory'));
    expect(paths.memoryIndexPath).toBe(join(projectDir, 'memory', 'MEMORY.md'));
    expect(paths.teamDir).toBe(join(projectDir, 'memory', 'team'));
    expect(paths.teamIndexPath).toBe(join(projectDir, 'memory', 'team', 'MEMORY.md'));
    expect(paths.transcriptDir).toBe(transcriptDir);
    expect(paths.transcriptPath('s1')).toBe(join(transcriptDir, 's1.jsonl'));
    expect(paths.sessionDir('s1')).toBe(join(transcriptDir, 's1'));
    expect(paths.toolResultsDir('s1')).toBe(join(transcriptDir, 's1', 'tool-results'));
    expect(paths.sessionMemoryPath('s1')).toBe(join(transcriptDir, 's1', 'session-memory', 'summary.md'));
    expect(paths.memoryDir.endsWith('/')).toBe(false);
  });

  it('sanitizes a decomposed (NFD) path as given, one dash per code unit, like Claude Code', async () => {
    const nfd = join(dir, 'Projets', 'cafe\u0301');
    mkdirSync(nfd, { recursive: true });
    const home = join(dir, 'home-nfd');
    const paths = await resolveEngramPaths({ engramHome: home, cwd: nfd });
    expect(paths.cwd).toBe(nfd);
    expect(paths.transcriptDir).toBe(join(home, 'projects', sanitizePath(nfd)));
    // e + U+0301 is two characters: the `e` stays and the accent becomes `-`; the composed é is one `-`.
    expect(paths.transcriptDir.endsWith('-Projets-cafe-')).toBe(true);
    expect(sanitizePath(nfd.normalize('NFC')).endsWith('-Projets-caf-')).toBe(true);
  });

  it('adopts a directory an earlier Engram created under the NFC name: renamed when alone, merged otherwise', async () => {
    const nfd = join(dir, 'Re\u0301sume\u0301');
    mkdirSync(nfd, { recursive: true });
    const home = join(dir, 'home-legacy');
    const legacy = join(home, 'projects', sanitizePath(nfd.normalize('NFC')));
    mkdirSync(join(legacy, 'memory'), { recursive: true });
    writeFileSync(join(legacy, 'memory', 'MEMORY.md'), '- [a](a.md) — a\n');
    writeFileSync(join(legacy, 'memory', 'a.md'), 'old a\n');
    writeFileSync(join(legacy, 's1.jsonl'), '{}\n');
    const first = await resolveEngramPaths({ engramHome: home, cwd: nfd });
    expect(readFileSync(join(first.memoryDir, 'a.md'), 'utf8')).toBe('old a\n');
    expect(existsSync(join(first.transcriptDir, 's1.jsonl'))).toBe(true);
    expect(existsSync(legacy)).toBe(false);

    // Both exist: what is missing moves over, what both hold stays in the old directory — nothing is lost.
    mkdirSync(join(legacy, 'memory'), { recursive: true });
    writeFileSync(join(legacy, 'memory', 'a.md'), 'conflicting a\n');
    writeFileSync(join(legacy, 'memory', 'b.md'), 'only in legacy\n');
    const second = await resolveEngramPaths({ engramHome: home, cwd: nfd });
    expect(readFileSync(join(second.memoryDir, 'a.md'), 'utf8')).toBe('old a\n');
    expect(readFileSync(join(second.memoryDir, 'b.md'), 'utf8')).toBe('only in legacy\n');
    expect(readFileSync(join(legacy, 'memory', 'a.md'), 'utf8')).toBe('conflicting a\n');
    expect(existsSync(join(legacy, 'memory', 'b.md'))).toBe(false);
  });

  it('uses a validated ENGRAM_MEMORY_DIR override for memory, leaving transcripts in place', async () => {
    const home = join(dir, 'home2');
    const paths = await resolveEngramPaths({ engramHome: home, cwd: repo, memoryDirOverride: '/srv/notes/' });
    expect(paths.memoryDir).toBe('/srv/notes');
    expect(paths.teamDir).toBe('/srv/notes/team');
    expect(paths.transcriptDir).toBe(join(home, 'projects', sanitizePath(repo)));
    await expect(
      resolveEngramPaths({ engramHome: home, cwd: repo, memoryDirOverride: 'notes' }),
    ).rejects.toMatchObject({
      code: 'RELATIVE',
    });
  });

  it('rejects session ids that could leave the transcript directory', async () => {
    const paths = await resolveEngramPaths({ engramHome: join(dir, 'h3'), cwd: repo });
    expect(() => paths.transcriptPath('../../etc/passwd')).toThrow(MemoryPathError);
    expect(() => paths.sessionMemoryPath('a/b')).toThrow(/Session id/);
  });

  it('requires absolute engramHome and cwd', async () => {
    await expect(resolveEngramPaths({ engramHome: 'rel', cwd: repo })).rejects.toMatchObject({
      code: 'RELATIVE',
    });
    await expect(resolveEngramPaths({ engramHome: dir, cwd: 'rel' })).rejects.toMatchObject({
      code: 'RELATIVE',
    });
    expect(() => engramPathsFor({ engramHome: dir, cwd: dir, projectRoot: '' })).toThrow(MemoryPathError);
  });

  it('engramPathsFor computes the same layout synchronously from a known project root', async () => {
    const home = join(dir, 'h4');
    const cwd = join(repo, 'packages');
    const viaGit = await resolveEngramPaths({ engramHome: home, cwd });
    const direct = engramPathsFor({ engramHome: `${home}/`, cwd, projectRoot: repo });
    expect(direct.memoryDir).toBe(viaGit.memoryDir);
    expect(direct.transcriptDir).toBe(viaGit.transcriptDir);
    expect(direct.engramHome).toBe(home);
  });
});

describe('isMemoryPathSync', () => {
  const mem = '/home/u/.engram/projects/x/memory';
  it.each([
    [`${mem}/a.md`, true],
    [`${mem}/team/b.md`, true],
    [`${mem}/sub/../c.md`, true],
    [`${mem}/`, false],
    [mem, false],
    [`${mem}-evil/a.md`, false],
    [`${mem}/../outside.md`, false],
    ['a.md', false],
    ['~/a.md', false],
    [`${mem}/a\0.md`, false],
    ['', false],
  ])('%j → %s', (path, expected) => {
    expect(isMemoryPathSync(path, mem)).toBe(expected);
    expect(isMemoryPathSync(path, `${mem}/`)).toBe(expected);
  });
});

describe('engramPathsFromDirNames', () => {
  it('rebuilds the same layout a worker needs from a payload’s sanitized names', async () => {
    const { engramPathsFor, engramPathsFromDirNames } = await import('./memory-paths.js');
    const agent = engramPathsFor({
      engramHome: '/srv/engram',
      cwd: '/home/me/repo/sub',
      projectRoot: '/home/me/repo',
    });
    const worker = engramPathsFromDirNames({
      engramHome: '/srv/engram',
      projectDirName: '-home-me-repo',
      transcriptDirName: '-home-me-repo-sub',
    });
    expect(worker.memoryDir).toBe(agent.memoryDir);
    expect(worker.memoryIndexPath).toBe(agent.memoryIndexPath);
    expect(worker.transcriptPath('s1')).toBe(agent.transcriptPath('s1'));
    expect(worker.sessionMemoryPath('s1')).toBe(agent.sessionMemoryPath('s1'));
    expect(worker.toolResultsDir('s1')).toBe(agent.toolResultsDir('s1'));
  });

  it.each(['..', '../x', '/etc', 'a/b', 'a.b', '', 'a\u0000'])(
    'refuses %j as a directory name',
    async (name) => {
      const { engramPathsFromDirNames } = await import('./memory-paths.js');
      expect(() =>
        engramPathsFromDirNames({
          engramHome: '/srv/engram',
          projectDirName: name,
          transcriptDirName: '-ok',
        }),
      ).toThrow(/sanitized directory name/);
      expect(() =>
        engramPathsFromDirNames({
          engramHome: '/srv/engram',
          projectDirName: '-ok',
          transcriptDirName: name,
        }),
      ).toThrow(/sanitized directory name/);
    },
  );
});
