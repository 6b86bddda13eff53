import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scanMemoryDir } from '@engram/memory-core/memdir/scan';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { hashContent } from '../contract.js';
import { startTeamMemoryTestServer, type TeamMemoryTestServer } from '../testing/server.test-helpers.js';
import { TeamMemoryHttpClient } from './http-client.js';
import { batchByBytes, pullTeamMemory, pushTeamMemory, type SyncTarget, teamSyncStatus } from './sync.js';
import { TeamSyncStateFile } from './sync-state.js';

// The client against the real service (PostgreSQL-backed), and against a hostile one for what a real service
// would never send.

// A GitHub PAT shape from the scanner's families, assembled so this file does not itself look like one.
const FAKE_PAT = ['ghp', 'R8f2kQ9xLm4Tz7Vb1Nc6Hd3Ws5Pa0Ye2Ju8K'].join('_');

let server: TeamMemoryTestServer;
let apiKey: string;
let root: string;

beforeAll(async () => {
  server = await startTeamMemoryTestServer({ postgresUrl: inject('postgresUrl') });
  apiKey = await server.issueKey('acme');
});
afterAll(async () => server?.close());
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'engram-team-sync-'));
  server.requests.length = 0;
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

let repoCounter = 0;
function freshRepo(): string {
  return `acme/repo-${process.pid}-${++repoCounter}`;
}

function agent(name: string, repo: string, opts: { url?: string; key?: string } = {}): SyncTarget {
  const dir = join(root, name);
  mkdirSync(join(dir, 'memory', 'team'), { recursive: true });
  return {
    teamDir: join(dir, 'memory', 'team'),
    repo,
    http: new TeamMemoryHttpClient({
      baseUrl: opts.url ?? server.url,
      apiKey: opts.key ?? apiKey,
      maxRetries: 0,
    }),
    state: new TeamSyncStateFile(join(dir, 'team-sync.json')),
  };
}

const write = (t: SyncTarget, key: string, content: string) => {
  mkdirSync(join(t.teamDir, key, '..'), { recursive: true });
  writeFileSync(join(t.teamDir, key), content);
};
const read = (t: SyncTarget, key: string) => readFileSync(join(t.teamDir, key), 'utf8');

describe('pull and push', () => {
  it('converges two clients: push, pull, edit, push, pull; a local delete comes back', async () => {
    const repo = freshRepo();
    const a = agent('a', repo);
    const b = agent('b', repo);
    write(a, 'x.md', '# deploy\nUse the blue pipeline.\n');
    write(a, 'notes/y.md', 'y\n');

    const first = await pushTeamMemory(a);
    expect(first).toMatchObject({ outcome: 'pushed', batches: 1, conflicts: 0 });
    expect(first.pushed.map((p) => p.key)).toEqual(['notes/y.md', 'x.md']);

    const pulled = await pullTeamMemory(b);
    expect(pulled.outcome).toBe('pulled');
    expect(pulled.written.map((w) => [w.key, w.change])).toEqual([
      ['notes/y.md', 'created'],
      ['x.md', 'created'],
    ]);
    expect(read(b, 'x.md')).toBe('# deploy\nUse the blue pipeline.\n');

    write(b, 'x.md', '# deploy\nUse the green pipeline.\n');
    server.requests.length = 0;
    const bPush = await pushTeamMemory(b);
    expect(bPush.outcome).toBe('pushed');
    // Only the changed entry goes up, with If-Match = the checksum B last saw.
    const puts = server.requests.filter((r) => r.method === 'PUT');
    expect(puts.map((r) => r.keys)).toEqual([['x.md']]);
    expect(puts[0]!.ifMatch).toBe(`"${pulled.checksum}"`);

    const aPull = await pullTeamMemory(a);
    expect(aPull.written.map((w) => [w.key, w.change])).toEqual([['x.md', 'updated']]);
    expect(read(a, 'x.md')).toBe('# deploy\nUse the green pipeline.\n');

    // Deletions do not propagate: the service keeps the entry and the next pull restores it, even though
    // the service has not changed since (the ETag alone would have said "not modified").
    rmSync(join(a.teamDir, 'notes', 'y.md'));
    expect((await pushTeamMemory(a)).outcome).toBe('up-to-date');
    expect((await server.store.hashes('acme', repo))!.entryChecksums['notes/y.md']).toBe(hashContent('y\n'));
    const restored = await pullTeamMemory(a);
    expect(restored.written.map((w) => [w.key, w.change])).toEqual([['notes/y.md', 'restored']]);
    expect(read(a, 'notes/y.md')).toBe('y\n');
  });

  it('asks with If-None-Match and leaves identical files untouched (mtime kept)', async () => {
    const repo = freshRepo();
    const a = agent('a', repo);
    const b = agent('b', repo);
    write(a, 'x.md', 'same\n');
    await pushTeamMemory(a);
    await pullTeamMemory(b);
    const old = new Date('2020-01-01T00:00:00Z');
    utimesSync(join(b.teamDir, 'x.md'), old, old);

    server.requests.length = 0;
    const again = await pullTeamMemory(b);
    expect(again.outcome).toBe('not-modified');
    expect(server.requests[0]!.ifNoneMatch).toMatch(/^"sha256:[0-9a-f]{64}"$/);
    expect(server.requests[0]!.status).toBe(304);

    const full = await pullTeamMemory(b, { skipEtagCache: true });
    expect(full).toMatchObject({ outcome: 'pulled', unchanged: 1, written: [] });
    expect(statSync(join(b.teamDir, 'x.md')).mtime.toISOString()).toBe(old.toISOString());
  });

  it('keeps a local edit of a key the service did not change, and the push sends it', async () => {
    const repo = freshRepo();
    const a = agent('a', repo);
    const b = agent('b', repo);
    write(a, 'x.md', 'x1\n');
    await pushTeamMemory(a);
    await pullTeamMemory(b);
    write(a, 'x.md', 'x2 (not pushed yet)\n');
    write(b, 'z.md', 'from b\n');
    await pushTeamMemory(b);

    const pulled = await pullTeamMemory(a);
    expect(pulled.keptLocal).toEqual(['x.md']);
    expect(pulled.written.map((w) => w.key)).toEqual(['z.md']);
    expect(read(a, 'x.md')).toBe('x2 (not pushed yet)\n');
    expect((await pushTeamMemory(a)).pushed.map((p) => p.key)).toEqual(['x.md']);
  });

  it('an unpushed local edit of a key the service also changed: the service wins, the edit is kept in a conflict copy and never pushed', async () => {
    const repo = freshRepo();
    const a = agent('a', repo);
    const b = agent('b', repo);
    write(a, 'notes/x.md', 'x1\n');
    write(a, 'y.md', 'y1\n');
    await pushTeamMemory(a);
    await pullTeamMemory(b);
    write(a, 'notes/x.md', 'x2 from a (not pushed yet)\n');
    write(a, 'y.md', 'y2 from a (not pushed yet)\n');
    write(b, 'notes/x.md', 'x2 from b\n');
    await pushTeamMemory(b);

    // Status names the conflict before any pull; y.md (the service did not change it) is no conflict.
    const before = await teamSyncStatus(a);
    expect(before.conflicts).toEqual(['notes/x.md']);
    expect(before.toPull).toEqual(['notes/x.md']);
    expect(before.conflictCopies).toEqual([]);

    const at = new Date('2026-12-01T22:50:41.123Z');
    const pulled = await pullTeamMemory({ ...a, now: () => at });
    const copy = '.conflicts/notes/x.conflict-20261201T225041123Z.md';
    expect(pulled.conflicts).toEqual([{ key: 'notes/x.md', reason: 'both-changed', copy }]);
    expect(pulled.written.map((w) => [w.key, w.change])).toEqual([['notes/x.md', 'updated']]);
    expect(pulled.keptLocal).toEqual(['y.md']);
    expect(read(a, 'notes/x.md')).toBe('x2 from b\n');
    expect(read(a, copy)).toBe('x2 from a (not pushed yet)\n');
    expect(read(a, 'y.md')).toBe('y2 from a (not pushed yet)\n');
    // Nor is it a memory: the memory scan of the project's memory directory does not list it.
    const scanned = await scanMemoryDir(join(a.teamDir, '..'));
    expect(scanned.headers.map((h) => h.filename).sort()).toEqual(['team/notes/x.md', 'team/y.md']);
    const after = await teamSyncStatus(a);
    expect(after).toMatchObject({ conflicts: [], toPull: [], conflictCopies: [copy], toPush: ['y.md'] });

    // The copy is not team memory: the push sends the kept edit only, the service never holds the copy.
    server.requests.length = 0;
    const pushed = await pushTeamMemory(a);
    expect(pushed.pushed.map((p) => p.key)).toEqual(['y.md']);
    expect(server.requests.flatMap((r) => r.keys ?? [])).toEqual(['y.md']);
    expect(Object.keys((await server.store.get('acme', repo))!.entries).sort()).toEqual([
      'notes/x.md',
      'y.md',
    ]);

    // A second conflict on the same key at the same instant gets its own copy; the first is not overwritten.
    write(a, 'notes/x.md', 'x3 from a\n');
    write(b, 'notes/x.md', 'x3 from b\n');
    await pushTeamMemory(b);
    const again = await pullTeamMemory({ ...a, now: () => at });
    expect(again.conflicts.map((c) => c.copy)).toEqual([
      '.conflicts/notes/x.conflict-20261201T225041123Z-2.md',
    ]);
    expect(read(a, copy)).toBe('x2 from a (not pushed yet)\n');
    expect(read(a, again.conflicts[0]!.copy)).toBe('x3 from a\n');
  });

  it('a local file that differs from the service with no sync record is kept in a conflict copy, not lost', async () => {
    const repo = freshRepo();
    const a = agent('a', repo);
    const b = agent('b', repo);
    write(a, 'x.md', 'from a\n');
    await pushTeamMemory(a);
    // B wrote the same key before ever syncing (or lost its sync state): nothing says which side is newer.
    write(b, 'x.md', 'from b, never synced\n');
    expect((await teamSyncStatus(b)).conflicts).toEqual(['x.md']);
    const pulled = await pullTeamMemory(b);
    expect(pulled.conflicts).toEqual([
      {
        key: 'x.md',
        reason: 'no-base',
        copy: expect.stringMatching(/^\.conflicts\/x\.conflict-\d{8}T\d{9}Z\.md$/),
      },
    ]);
    expect(read(b, 'x.md')).toBe('from a\n');
    expect(read(b, pulled.conflicts[0]!.copy)).toBe('from b, never synced\n');
  });

  it('when the conflict copy cannot be written, the local edit stays in place and the key is reported skipped', async () => {
    const repo = freshRepo();
    const a = agent('a', repo);
    const b = agent('b', repo);
    write(a, 'x.md', 'x1\n');
    await pushTeamMemory(a);
    await pullTeamMemory(b);
    write(a, 'x.md', 'x2 from a\n');
    write(b, 'x.md', 'x2 from b\n');
    await pushTeamMemory(b);
    // .conflicts is a symlink out of team/: the copy would land outside, so nothing is overwritten.
    const outside = join(root, 'elsewhere');
    mkdirSync(outside);
    symlinkSync(outside, join(a.teamDir, '.conflicts'));
    const pulled = await pullTeamMemory(a);
    expect(pulled.conflicts).toEqual([]);
    expect(pulled.written).toEqual([]);
    expect(pulled.skipped).toEqual([
      {
        key: 'x.md',
        reason: 'unwritable',
        detail: expect.stringContaining('conflict copy: the path resolves'),
      },
    ]);
    expect(read(a, 'x.md')).toBe('x2 from a\n');
    expect(readdirSync(outside)).toEqual([]);
  });

  it('two concurrent pushes with the same base: one 412, refreshed and retried, both changes kept', async () => {
    const repo = freshRepo();
    const a = agent('a', repo);
    const b = agent('b', repo);
    write(a, 'base.md', 'base\n');
    await pushTeamMemory(a);
    await pullTeamMemory(b);
    write(a, 'from-a.md', 'a\n');
    write(b, 'from-b.md', 'b\n');

    server.requests.length = 0;
    const [ra, rb] = await Promise.all([pushTeamMemory(a), pushTeamMemory(b)]);
    expect([ra.outcome, rb.outcome]).toEqual(['pushed', 'pushed']);
    expect(ra.conflicts + rb.conflicts).toBe(1);
    expect(server.requests.filter((r) => r.status === 412)).toHaveLength(1);
    // The loser refreshed with view=hashes before retrying.
    expect(server.requests.some((r) => r.query.view === 'hashes')).toBe(true);
    const entries = (await server.store.get('acme', repo))!.entries;
    expect(entries).toEqual({ 'base.md': 'base\n', 'from-a.md': 'a\n', 'from-b.md': 'b\n' });
  });

  it('splits a push into PUT bodies of at most 200,000 bytes; one larger entry goes alone', () => {
    const delta: Record<string, string> = {};
    for (let i = 0; i < 5; i++) delta[`f${i}.md`] = 'x'.repeat(60_000);
    delta['z-big.md'] = 'y'.repeat(240_000);
    const batches = batchByBytes(delta);
    expect(batches.map((b) => Object.keys(b))).toEqual([
      ['f0.md', 'f1.md', 'f2.md'],
      ['f3.md', 'f4.md'],
      ['z-big.md'],
    ]);
    for (const batch of batches.slice(0, 2)) {
      expect(Buffer.byteLength(JSON.stringify({ entries: batch }))).toBeLessThanOrEqual(200_000);
    }
  });

  it('sends batches that the service accepts, each body within the limit', async () => {
    const repo = freshRepo();
    const a = agent('a', repo);
    for (let i = 0; i < 5; i++) write(a, `f${i}.md`, `${i}`.repeat(60_000));
    const report = await pushTeamMemory(a);
    expect(report).toMatchObject({ outcome: 'pushed', batches: 2 });
    const puts = server.requests.filter((r) => r.method === 'PUT');
    expect(puts).toHaveLength(2);
    for (const put of puts) expect(put.bodyBytes).toBeLessThanOrEqual(200_000);
    // Each batch carried the checksum the previous one produced.
    expect(puts[1]!.ifMatch).not.toBe(puts[0]!.ifMatch);
    expect(Object.keys((await server.store.hashes('acme', repo))!.entryChecksums)).toHaveLength(5);
  });

  it('skips local files over 250,000 bytes, hidden files and symlinks', async () => {
    const repo = freshRepo();
    const a = agent('a', repo);
    write(a, 'ok.md', 'ok\n');
    write(a, 'huge.md', 'h'.repeat(250_001));
    write(a, '.engram-tmp-ok.md.123.abc', 'half-written');
    writeFileSync(join(root, 'outside.md'), 'outside');
    symlinkSync(join(root, 'outside.md'), join(a.teamDir, 'link.md'));
    const report = await pushTeamMemory(a);
    expect(report.pushed.map((p) => p.key)).toEqual(['ok.md']);
    expect(report.skipped).toEqual([{ key: 'huge.md', reason: 'too-large', bytes: 250_001 }]);
    expect(Object.keys((await server.store.hashes('acme', repo))!.entryChecksums)).toEqual(['ok.md']);
  });
});

describe('secrets', () => {
  it('a file with a secret never reaches the service; the report names the rule, never the value', async () => {
    const repo = freshRepo();
    const a = agent('a', repo);
    write(a, 'safe.md', 'The CI token lives in the vault under ci/github.\n');
    write(a, 'leaky.md', `token: ${FAKE_PAT}\n`);
    const report = await pushTeamMemory(a);
    expect(report.pushed.map((p) => p.key)).toEqual(['safe.md']);
    expect(report.skipped).toEqual([
      { key: 'leaky.md', reason: 'secret', ruleId: 'github-pat', label: expect.any(String) },
    ]);
    expect(JSON.stringify(report)).not.toContain(FAKE_PAT);
    expect(server.requests.flatMap((r) => r.keys ?? [])).not.toContain('leaky.md');
    const stored = (await server.store.get('acme', repo))!;
    expect(Object.keys(stored.entries)).toEqual(['safe.md']);
    expect(JSON.stringify(stored)).not.toContain(FAKE_PAT);
    // The file stays skipped on every later push, and status says why.
    const status = await teamSyncStatus(a);
    expect(status.skipped).toEqual(report.skipped);
    expect(status.toPush).toEqual([]);
  });
});

describe('push suppression', () => {
  it('after a permanent refusal, pushes stop until a file changes', async () => {
    const limited = await startTeamMemoryTestServer({
      postgresUrl: inject('postgresUrl'),
      limits: { maxEntries: 2 },
    });
    try {
      const key = await limited.issueKey('acme');
      const a = agent('a', 'acme/limited', { url: limited.url, key });
      write(a, '1.md', '1');
      write(a, '2.md', '2');
      write(a, '3.md', '3');
      const failed = await pushTeamMemory(a);
      expect(failed).toMatchObject({
        outcome: 'failed',
        error: { code: 'team_memory_too_many_entries', status: 413, permanent: true },
      });
      expect(failed.error!.message).toContain('at most 2 entries');

      limited.requests.length = 0;
      const suppressed = await pushTeamMemory(a);
      expect(suppressed.outcome).toBe('suppressed');
      expect(limited.requests).toHaveLength(0);

      // The learned cap truncates deterministically once the files change (here: one removed).
      rmSync(join(a.teamDir, '3.md'));
      const after = await pushTeamMemory(a);
      expect(after.outcome).toBe('pushed');
      expect(after.pushed.map((p) => p.key)).toEqual(['1.md', '2.md']);
    } finally {
      await limited.close();
    }
  });

  it('an unknown key is permanent (401) and suppresses; a forced push tries again', async () => {
    const a = agent('a', freshRepo(), { key: 'tmk_revoked-or-never-issued-key' });
    write(a, 'x.md', 'x');
    const failed = await pushTeamMemory(a);
    expect(failed).toMatchObject({ outcome: 'failed', error: { status: 401, permanent: true } });
    expect((await pushTeamMemory(a)).outcome).toBe('suppressed');
    server.requests.length = 0;
    expect((await pushTeamMemory(a, { force: true })).outcome).toBe('failed');
  });
});

describe('pull from a hostile service', () => {
  it('skips entries with invalid keys or over 250,000 bytes and writes only inside team/', async () => {
    const outside = join(root, 'outside');
    mkdirSync(outside);
    const entries: Record<string, string> = {
      'good.md': 'good\n',
      'a\u0000b.md': 'nul',
      '%2e%2e/%2e%2e/pwned.md': 'encoded',
      '..\\..\\pwned.md': 'backslash',
      '/tmp/pwned.md': 'absolute',
      '\uFF0E\uFF0E\uFF0Fpwned.md': 'fullwidth',
      '../pwned.md': 'dotdot',
      'escape/pwned.md': 'through a symlink',
      '.hidden/x.md': 'hidden',
      'big.md': 'b'.repeat(250_001),
    };
    const hostile = createServer((req, res) => {
      const body = JSON.stringify({
        organizationId: 'x',
        repo: 'acme/widgets',
        version: 1,
        lastModified: new Date().toISOString(),
        checksum: `sha256:${'a'.repeat(64)}`,
        content: { entries },
      });
      req.resume();
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(body);
    });
    await new Promise<void>((r) => hostile.listen(0, '127.0.0.1', r));
    try {
      const a = agent('a', 'acme/widgets', {
        url: `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`,
      });
      symlinkSync(outside, join(a.teamDir, 'escape'));
      const report = await pullTeamMemory(a);
      expect(report.written.map((w) => w.key)).toEqual(['good.md']);
      const skipped = Object.fromEntries(report.skipped.map((s) => [s.key, [s.reason, s.detail]]));
      expect(skipped).toEqual({
        'a\u0000b.md': ['invalid-key', 'NUL_BYTE'],
        '%2e%2e/%2e%2e/pwned.md': ['invalid-key', 'ENCODED_TRAVERSAL'],
        '..\\..\\pwned.md': ['invalid-key', 'BACKSLASH'],
        '/tmp/pwned.md': ['invalid-key', 'ABSOLUTE'],
        '\uFF0E\uFF0E\uFF0Fpwned.md': ['invalid-key', 'UNICODE_TRAVERSAL'],
        '../pwned.md': ['invalid-key', 'TRAVERSAL'],
        '.hidden/x.md': ['invalid-key', 'HIDDEN'],
        'escape/pwned.md': ['outside-team-dir', expect.stringContaining('outside the allowed directory')],
        'big.md': ['too-large', '250001 bytes > 250000'],
      });
      expect(existsSync(join(outside, 'pwned.md'))).toBe(false);
      expect(existsSync(join(root, 'pwned.md'))).toBe(false);
      expect(existsSync(join(root, 'a', 'memory', 'pwned.md'))).toBe(false);
      expect(existsSync('/tmp/pwned.md')).toBe(false);
    } finally {
      await new Promise<void>((r) => hostile.close(() => r()));
    }
  });
});
