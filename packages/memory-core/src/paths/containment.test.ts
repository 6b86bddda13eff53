import { mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import {
  type ContainmentFs,
  isInside,
  isStrictlyWithin,
  resolveInside,
  resolveTeamKeyPath,
  validateTeamKey,
} from './containment.js';

let base: string;
let mem: string;
let cleanup: () => void;

beforeAll(() => {
  ({ dir: base, cleanup } = makeTempDir('engram-contain-'));
  mem = join(base, 'mem');
  mkdirSync(join(mem, 'sub'), { recursive: true });
  mkdirSync(join(base, 'outside'), { recursive: true });
  mkdirSync(join(base, 'mem-evil'), { recursive: true });
  mkdirSync(join(base, 'MEM'), { recursive: true });
  writeFileSync(join(mem, 'file.md'), 'x');
  writeFileSync(join(mem, 'sub', 'inner.md'), 'x');
  writeFileSync(join(base, 'outside', 'secret.txt'), 'secret');
  symlinkSync('..', join(mem, 'sub', 'up'));
  symlinkSync('../..', join(mem, 'sub', 'up2'));
  symlinkSync('sub', join(mem, 'link-in'));
  symlinkSync('../outside', join(mem, 'link-out'));
  symlinkSync('../outside/secret.txt', join(mem, 'link-out-file.md'));
  symlinkSync('file.md', join(mem, 'alias.md'));
  symlinkSync('../nowhere', join(mem, 'dangling'));
  symlinkSync('sub/missing.md', join(mem, 'dangling-in.md'));
  symlinkSync('loop-b', join(mem, 'loop-a'));
  symlinkSync('loop-a', join(mem, 'loop-b'));
  symlinkSync('self-loop', join(mem, 'self-loop'));
  symlinkSync('chain2', join(mem, 'chain1'));
  symlinkSync('../outside', join(mem, 'chain2'));
  symlinkSync('/etc', join(mem, 'abs-out'));
  symlinkSync('mem', join(base, 'memlink'));
});

afterAll(() => cleanup());

type Case = { name: string; target: () => string; root?: () => string; allow: boolean; reason?: RegExp };

const M =
  (...parts: string[]) =>
  () =>
    join(mem, ...parts);
const raw = (value: () => string) => value;

const CASES: Case[] = [
  // inside
  { name: 'new file at the top', target: M('new.md'), allow: true },
  { name: 'existing file', target: M('file.md'), allow: true },
  { name: 'file in a subdirectory', target: M('sub', 'inner.md'), allow: true },
  { name: 'file under directories that do not exist yet', target: M('new', 'dir', 'deep.md'), allow: true },
  { name: '`.` segment', target: () => `${mem}/./a.md`, allow: true },
  { name: '`..` that stays inside', target: () => `${mem}/sub/../b.md`, allow: true },
  { name: 'repeated separators', target: () => `${mem}//sub///c.md`, allow: true },
  { name: 'symlinked directory pointing inside', target: M('link-in', 'd.md'), allow: true },
  { name: 'symlinked file pointing inside', target: M('alias.md'), allow: true },
  { name: 'symlink to the root itself, then a file', target: M('sub', 'up', 'e.md'), allow: true },
  // Only the root's own path and its real path are accepted spellings; another alias is refused outright.
  {
    name: 'target spelled through another alias of the root',
    target: () => join(base, 'memlink', 'f.md'),
    allow: false,
  },
  { name: 'root given through a symlink', target: M('g.md'), root: () => join(base, 'memlink'), allow: true },
  { name: 'percent-encoded dots are a literal name on disk', target: M('%2e%2e', 'h.md'), allow: true },
  { name: 'fullwidth dots and slash are a literal name on disk', target: M('．．／i.md'), allow: true },
  { name: 'backslashes are a literal name on POSIX', target: () => `${mem}/..\\..\\j.md`, allow: true },
  { name: 'NFD name (normalized to NFC)', target: M('cafe\u0301.md'), allow: true },
  { name: 'trailing separator on a subdirectory', target: () => `${mem}/sub/`, allow: true },
  // the root itself
  { name: 'the root itself', target: M(), allow: false, reason: /itself/ },
  { name: 'the root with a trailing separator', target: () => `${mem}/`, allow: false, reason: /itself/ },
  // traversal
  { name: '`..` into a sibling', target: () => `${mem}/../outside/x.md`, allow: false, reason: /outside/ },
  { name: 'deeper `..` escape', target: () => `${mem}/sub/../../outside/x.md`, allow: false },
  { name: '`..` to /etc/passwd', target: () => `${mem}/../../../../../../etc/passwd`, allow: false },
  { name: 'prefix look-alike directory', target: () => join(base, 'mem-evil', 'x.md'), allow: false },
  { name: 'prefix look-alike without separator', target: () => `${mem}-evil`, allow: false },
  {
    name: 'different-case sibling (case-sensitive fs)',
    target: () => join(base, 'MEM', 'x.md'),
    allow: false,
  },
  { name: 'a plain outside path', target: () => join(base, 'outside', 'x.md'), allow: false },
  { name: 'filesystem root', target: raw(() => '/'), allow: false },
  // symlinks out
  {
    name: 'symlinked directory pointing outside',
    target: M('link-out', 'x.md'),
    allow: false,
    reason: /symlink/,
  },
  { name: 'the outward symlink itself', target: M('link-out'), allow: false },
  { name: 'symlinked file pointing outside', target: M('link-out-file.md'), allow: false },
  { name: 'symlink climbing two levels', target: M('sub', 'up2', 'outside', 'x.md'), allow: false },
  { name: 'chain of symlinks ending outside', target: M('chain1', 'x.md'), allow: false },
  { name: 'absolute symlink to /etc', target: M('abs-out', 'passwd'), allow: false },
  // dangling and loops
  { name: 'dangling symlink', target: M('dangling'), allow: false, reason: /dangling/ },
  { name: 'path under a dangling symlink', target: M('dangling', 'x.md'), allow: false, reason: /dangling/ },
  {
    name: 'dangling symlink whose target would be inside',
    target: M('dangling-in.md'),
    allow: false,
    reason: /dangling/,
  },
  { name: 'symlink loop', target: M('loop-a'), allow: false, reason: /loop/ },
  { name: 'path under a symlink loop', target: M('loop-a', 'x.md'), allow: false, reason: /loop/ },
  { name: 'self-referencing symlink', target: M('self-loop'), allow: false, reason: /loop/ },
  {
    name: 'path through a regular file',
    target: M('file.md', 'x.md'),
    allow: false,
    reason: /not a directory/,
  },
  { name: 'name longer than the filesystem allows', target: M('n'.repeat(300), 'x.md'), allow: false },
  // relative, home, NUL, UNC, Windows
  { name: 'relative file', target: raw(() => 'x.md'), allow: false, reason: /relative/ },
  { name: 'relative traversal', target: raw(() => '../outside/x.md'), allow: false, reason: /relative/ },
  { name: 'relative path that would land inside from the base', target: raw(() => 'mem/x.md'), allow: false },
  { name: '`~/` path', target: raw(() => '~/x.md'), allow: false, reason: /~/ },
  { name: 'bare `~`', target: raw(() => '~'), allow: false },
  { name: 'NUL in the name', target: () => `${mem}/a\0.md`, allow: false, reason: /NUL/ },
  {
    name: 'NUL hiding a traversal',
    target: () => `${mem}/\0/../../outside/x.md`,
    allow: false,
    reason: /NUL/,
  },
  { name: 'UNC with forward slashes', target: raw(() => '//server/share/x.md'), allow: false },
  { name: 'UNC with backslashes', target: raw(() => '\\\\server\\share\\x.md'), allow: false },
  { name: 'Windows drive path', target: raw(() => 'C:\\Windows\\x.md'), allow: false },
  { name: 'empty path', target: raw(() => ''), allow: false, reason: /empty/ },
  { name: 'relative root', target: M('x.md'), root: () => 'mem', allow: false },
];

describe('resolveInside: path attack cases', () => {
  it('covers at least 40 attack paths, most of which must be refused', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(50);
    expect(CASES.filter((c) => !c.allow).length).toBeGreaterThanOrEqual(35);
  });

  it.each(CASES)('$name → allow=$allow', async (c) => {
    const root = c.root ? c.root() : mem;
    const result = await resolveInside(c.target(), root);
    expect(result.ok, result.ok ? result.path : result.reason).toBe(c.allow);
    if (!result.ok) {
      if (c.reason) expect(result.reason).toMatch(c.reason);
      // Reasons never carry paths.
      expect(result.reason).not.toContain(base);
      return;
    }
    // 0 escapes: the resolved path is strictly inside the real root, and a file created there really is.
    const realMem = realpathSync(mem);
    expect(isStrictlyWithin(result.path, realMem)).toBe(true);
    if (!c.target().endsWith('/')) {
      mkdirSync(dirname(result.path), { recursive: true });
      writeFileSync(result.path, 'probe');
      expect(realpathSync(result.path).startsWith(realMem + sep)).toBe(true);
    }
  });

  it('isInside mirrors resolveInside', async () => {
    expect(await isInside(join(mem, 'ok.md'), mem)).toBe(true);
    expect(await isInside(join(mem, 'link-out', 'x'), mem)).toBe(false);
  });
});

describe('resolveInside fails closed on unexpected filesystem errors', () => {
  const failing = (code: string | undefined, where: 'realpath' | 'lstat'): ContainmentFs => ({
    realpath: async (p) => {
      if (where === 'realpath') throw Object.assign(new Error('boom'), code ? { code } : {});
      const error = Object.assign(new Error('missing'), { code: 'ENOENT' });
      if (p.endsWith('target.md')) throw error;
      return p;
    },
    lstat: async () => {
      if (where === 'lstat') throw Object.assign(new Error('io'), code ? { code } : {});
      throw Object.assign(new Error('missing'), { code: 'ENOENT' });
    },
  });

  it.each([
    ['EACCES', 'realpath'],
    ['EIO', 'realpath'],
    [undefined, 'realpath'],
    ['EACCES', 'lstat'],
    ['EIO', 'lstat'],
  ] as const)('%s from %s → denied', async (code, where) => {
    const result = await resolveInside('/virtual/mem/target.md', '/virtual/mem', {
      fs: failing(code, where),
    });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(/cannot be checked/);
  });

  it('denies a path that exists but does not resolve (a race)', async () => {
    const io: ContainmentFs = {
      realpath: async (p) => {
        if (p.endsWith('target.md')) throw Object.assign(new Error('x'), { code: 'ENOENT' });
        return p;
      },
      lstat: async () => ({ isSymbolicLink: () => false }),
    };
    const result = await resolveInside('/virtual/mem/target.md', '/virtual/mem', { fs: io });
    expect(result).toEqual({ ok: false, reason: 'the path changed while it was being checked' });
  });
});

describe('isStrictlyWithin', () => {
  it('requires a separator boundary', () => {
    expect(isStrictlyWithin('/mem/a', '/mem')).toBe(true);
    expect(isStrictlyWithin('/mem-evil/a', '/mem')).toBe(false);
    expect(isStrictlyWithin('/mem', '/mem')).toBe(false);
    expect(isStrictlyWithin('/mem/', '/mem/')).toBe(false);
    expect(isStrictlyWithin('/a', '/')).toBe(true);
  });
});

describe('validateTeamKey', () => {
  it.each([
    ['', 'EMPTY'],
    ['a\0b.md', 'NUL_BYTE'],
    ['%2e%2e/secret.md', 'ENCODED_TRAVERSAL'],
    ['..%2fsecret.md', 'ENCODED_TRAVERSAL'],
    ['notes%2f..%2f..%2fx.md', 'ENCODED_TRAVERSAL'],
    ['%252e%252e%252fx.md', 'ENCODED_TRAVERSAL'],
    ['%2Fetc%2Fpasswd', 'ENCODED_TRAVERSAL'],
    ['%5c..%5cx.md', 'ENCODED_TRAVERSAL'],
    ['bad%zzescape.md', 'MALFORMED_ENCODING'],
    ['．．／secret.md', 'UNICODE_TRAVERSAL'],
    ['notes／..／x.md', 'UNICODE_TRAVERSAL'],
    ['\u2025/x.md', 'UNICODE_TRAVERSAL'],
    ['a\\b.md', 'BACKSLASH'],
    ['..\\x.md', 'BACKSLASH'],
    ['/etc/passwd', 'ABSOLUTE'],
    ['C:/x.md', 'ABSOLUTE'],
    ['../x.md', 'TRAVERSAL'],
    ['notes/../../x.md', 'TRAVERSAL'],
    ['..', 'TRAVERSAL'],
    ['x'.repeat(2000), 'TOO_LONG'],
  ])('rejects %j (%s)', (key, code) => {
    const result = validateTeamKey(key);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.code).toBe(code);
  });

  it.each(['notes.md', 'deploy/runbook.md', 'a b.md', 'caf\u00e9.md', 'v1.2-notes.md', 'sub%20dir.md'])(
    'accepts %j',
    (key) => {
      expect(validateTeamKey(key).ok).toBe(true);
    },
  );

  it('resolves a valid key inside the team directory and refuses an invalid one', async () => {
    const team = join(mem, 'team');
    mkdirSync(team, { recursive: true });
    const ok = await resolveTeamKeyPath(team, 'deploy/runbook.md');
    expect(ok).toEqual({ ok: true, path: join(realpathSync(team), 'deploy', 'runbook.md') });
    expect((await resolveTeamKeyPath(team, '%2e%2e/%2e%2e/x.md')).ok).toBe(false);
    symlinkSync('../../outside', join(team, 'escape'));
    expect((await resolveTeamKeyPath(team, 'escape/x.md')).ok).toBe(false);
  });
});
