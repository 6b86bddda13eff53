import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startTeamMemoryTestServer, type TeamMemoryTestServer } from '../testing/server.test-helpers.js';

// The service speaks the team memory contract (docs/team-memory.md) byte for byte: paths, query parameters,
// checksum format, ETag/If-None-Match → 304, If-Match → 412, view=hashes, 404 before data, 413 shapes.

const sha256 = (text: string) =>
  `sha256:${createHash('sha256').update(Buffer.from(text, 'utf8')).digest('hex')}`;
const PATH = '/api/claude_code/team_memory';

let server: TeamMemoryTestServer;
let keyA: string;
let keyB: string;

beforeAll(async () => {
  server = await startTeamMemoryTestServer({ postgresUrl: inject('postgresUrl') });
  keyA = await server.issueKey('tenant-a');
  keyB = await server.issueKey('tenant-b');
});
afterAll(async () => server?.close());

function call(
  method: string,
  query: string,
  opts: { key?: string | null; body?: unknown; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== null) headers.Authorization = `Bearer ${opts.key ?? keyA}`;
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
  return fetch(`${server.url}${PATH}?${query}`, {
    method,
    headers,
    ...(opts.body !== undefined
      ? { body: typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body) }
      : {}),
  });
}

describe('team memory contract', () => {
  const repo = 'acme/widgets';
  const q = `repo=${encodeURIComponent(repo)}`;
  let firstChecksum = '';

  it('answers 404 while a repository has no data, and 401 without a known key', async () => {
    const missing = await call('GET', q);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({
      error: {
        type: 'not_found_error',
        message: 'No team memory for acme/widgets yet.',
        details: { error_code: 'team_memory_not_found' },
      },
    });
    const anonymous = await call('GET', q, { key: null });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer');
    expect((await call('GET', q, { key: 'tmk_not-a-real-key-at-all' })).status).toBe(401);
  });

  it('PUT creates the store and answers its metadata with the checksum as a quoted ETag', async () => {
    const res = await call('PUT', q, {
      body: { entries: { 'MEMORY.md': '- [x](x.md)\n', 'x.md': 'café ✓\n' } },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual([
      'checksum',
      'lastModified',
      'organizationId',
      'repo',
      'version',
    ]);
    expect(body).toMatchObject({ organizationId: 'tenant-a', repo, version: 1 });
    expect(body.checksum).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(new Date(body.lastModified as string).toISOString()).toBe(body.lastModified);
    expect(res.headers.get('etag')).toBe(`"${body.checksum}"`);
    firstChecksum = body.checksum as string;
  });

  it('GET returns every entry with entryChecksums = sha256:<hex of the UTF-8 content>', async () => {
    const res = await call('GET', q);
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe(`"${firstChecksum}"`);
    const body = (await res.json()) as {
      content: { entries: Record<string, string>; entryChecksums: Record<string, string> };
    } & Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual([
      'checksum',
      'content',
      'lastModified',
      'organizationId',
      'repo',
      'version',
    ]);
    expect(body.checksum).toBe(firstChecksum);
    expect(body.content.entries).toEqual({ 'MEMORY.md': '- [x](x.md)\n', 'x.md': 'café ✓\n' });
    expect(body.content.entryChecksums).toEqual({
      'MEMORY.md': sha256('- [x](x.md)\n'),
      'x.md': sha256('café ✓\n'),
    });
  });

  it('If-None-Match with the current checksum answers 304 with no body; a stale one gets the data', async () => {
    const same = await call('GET', q, { headers: { 'If-None-Match': `"${firstChecksum}"` } });
    expect(same.status).toBe(304);
    expect(same.headers.get('etag')).toBe(`"${firstChecksum}"`);
    expect(await same.text()).toBe('');
    const stale = await call('GET', q, { headers: { 'If-None-Match': `"sha256:${'0'.repeat(64)}"` } });
    expect(stale.status).toBe(200);
  });

  it('view=hashes returns metadata and entryChecksums at the top level, no bodies', async () => {
    const res = await call('GET', `${q}&view=hashes`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual([
      'checksum',
      'entryChecksums',
      'lastModified',
      'organizationId',
      'repo',
      'version',
    ]);
    expect(body.entryChecksums).toEqual({ 'MEMORY.md': sha256('- [x](x.md)\n'), 'x.md': sha256('café ✓\n') });
    expect(JSON.stringify(body)).not.toContain('café');
  });

  it('PUT is an upsert: keys absent from the body are kept; If-Match must be the current checksum', async () => {
    const stale = await call('PUT', q, {
      body: { entries: { 'y.md': 'new\n' } },
      headers: { 'If-Match': `"sha256:${'1'.repeat(64)}"` },
    });
    expect(stale.status).toBe(412);
    expect(stale.headers.get('etag')).toBe(`"${firstChecksum}"`);
    expect(await stale.json()).toMatchObject({
      error: {
        type: 'precondition_failed',
        details: { error_code: 'team_memory_precondition_failed', current_checksum: firstChecksum },
      },
    });
    const ok = await call('PUT', q, {
      body: { entries: { 'y.md': 'new\n' } },
      headers: { 'If-Match': `"${firstChecksum}"` },
    });
    expect(ok.status).toBe(200);
    const meta = (await ok.json()) as { version: number; checksum: string };
    expect(meta.version).toBe(2);
    expect(meta.checksum).not.toBe(firstChecksum);
    const all = (await (await call('GET', q)).json()) as { content: { entries: Record<string, string> } };
    expect(Object.keys(all.content.entries).sort()).toEqual(['MEMORY.md', 'x.md', 'y.md']);
    // The old checksum no longer matches: the compare-and-set refuses a client that has not seen version 2.
    const late = await call('PUT', q, {
      body: { entries: { 'z.md': 'z' } },
      headers: { 'If-Match': `"${firstChecksum}"` },
    });
    expect(late.status).toBe(412);
  });

  it('a PUT that changes nothing keeps the version and the checksum', async () => {
    const before = (await (await call('GET', `${q}&view=hashes`)).json()) as {
      version: number;
      checksum: string;
    };
    const res = await call('PUT', q, { body: { entries: { 'y.md': 'new\n' } } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ version: before.version, checksum: before.checksum });
  });

  it('keeps every content an entry had, by version', async () => {
    await call('PUT', q, { body: { entries: { 'y.md': 'newer\n' } } });
    const history = await server.store.history('tenant-a', repo, 'y.md');
    expect(history.map((h) => h.content)).toEqual(['new\n', 'newer\n']);
    expect(history.map((h) => h.checksum)).toEqual([sha256('new\n'), sha256('newer\n')]);
  });

  it('scopes repositories by the authenticated tenant', async () => {
    expect((await call('GET', q, { key: keyB })).status).toBe(404);
    const put = await call('PUT', q, { key: keyB, body: { entries: { 'x.md': 'tenant b\n' } } });
    expect(put.status).toBe(200);
    const b = (await (await call('GET', q, { key: keyB })).json()) as { content: { entries: object } };
    expect(b.content.entries).toEqual({ 'x.md': 'tenant b\n' });
    const a = (await (await call('GET', q)).json()) as { content: { entries: Record<string, string> } };
    expect(a.content.entries['x.md']).toBe('café ✓\n');
  });

  it('rejects a missing or malformed repo parameter and an unknown view', async () => {
    for (const query of ['', 'repo=', 'repo=acme', 'repo=a/b/c', 'repo=../x', 'repo=a/b&repo=c/d']) {
      const res = await call('GET', query);
      expect(res.status, query).toBe(400);
      expect(
        ((await res.json()) as { error: { details: { error_code: string } } }).error.details.error_code,
      ).toBe('team_memory_invalid_repo');
    }
    const view = await call('GET', `${q}&view=full`);
    expect(view.status).toBe(400);
    expect(await view.json()).toMatchObject({
      error: { details: { error_code: 'team_memory_invalid_view' } },
    });
  });

  it.each([
    ['a NUL byte', 'a\u0000b.md', 'NUL_BYTE'],
    ['encoded traversal', '%2e%2e/%2e%2e/etc/passwd', 'ENCODED_TRAVERSAL'],
    ['a backslash traversal', '..\\..\\x.md', 'BACKSLASH'],
    ['a leading slash', '/etc/x.md', 'ABSOLUTE'],
    ['fullwidth NFKC look-alikes', '\uFF0E\uFF0E\uFF0Fx.md', 'UNICODE_TRAVERSAL'],
    ['plain traversal', 'notes/../../x.md', 'TRAVERSAL'],
    ['an empty segment', 'notes//x.md', 'NOT_CANONICAL'],
  ])('refuses a key with %s (400, nothing stored)', async (_label, key, reason) => {
    const res = await call('PUT', 'repo=acme/keys', { body: { entries: { 'ok.md': 'fine', [key]: 'x' } } });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { details: { error_code: 'team_memory_invalid_key', key, reason } },
    });
    expect((await call('GET', 'repo=acme/keys')).status).toBe(404);
  });

  it('refuses a body that is not {entries: {key: string}}', async () => {
    for (const body of ['not json', '{"entries": {"a.md": 1}}', '[]', '{"entries": "x"}']) {
      const res = await call('PUT', 'repo=acme/bodies', { body });
      expect(res.status, body).toBe(400);
      expect(await res.json()).toMatchObject({
        error: { details: { error_code: 'team_memory_invalid_body' } },
      });
    }
  });

  it('refuses an entry over 250,000 bytes with 413 naming the limit', async () => {
    const res = await call('PUT', 'repo=acme/big', { body: { entries: { 'big.md': 'é'.repeat(125_001) } } });
    expect(res.status).toBe(413);
    const body = (await res.json()) as { error: { message: string; details: Record<string, unknown> } };
    expect(body.error.details).toEqual({
      error_code: 'team_memory_entry_too_large',
      key: 'big.md',
      max_entry_bytes: 250_000,
      received_bytes: 250_002,
    });
    expect(body.error.message).toContain('250000 bytes per entry');
    expect((await call('GET', 'repo=acme/big')).status).toBe(404);
  });
});

describe('team memory limits', () => {
  let small: TeamMemoryTestServer;
  let key: string;
  beforeAll(async () => {
    small = await startTeamMemoryTestServer({
      postgresUrl: inject('postgresUrl'),
      limits: { maxRequestBytes: 4_096, maxEntries: 3 },
    });
    key = await small.issueKey('t');
  });
  afterAll(async () => small?.close());

  const put = (entries: Record<string, string>) =>
    fetch(`${small.url}${PATH}?repo=o/r`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ entries }),
    });

  it('refuses a request body over the limit with 413 naming it', async () => {
    const res = await put({ 'a.md': 'x'.repeat(5_000) });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({
      error: { details: { error_code: 'team_memory_request_too_large', max_request_bytes: 4_096 } },
    });
  });

  it('refuses a PUT that would exceed the entry count with the structured too-many-entries 413', async () => {
    expect((await put({ 'a.md': 'a', 'b.md': 'b' })).status).toBe(200);
    const res = await put({ 'c.md': 'c', 'd.md': 'd' });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({
      error: {
        type: 'request_too_large',
        details: { error_code: 'team_memory_too_many_entries', max_entries: 3, received_entries: 4 },
      },
    });
    // Atomic: nothing of the refused PUT was written.
    const hashes = (await small.store.hashes('t', 'o/r'))!;
    expect(Object.keys(hashes.entryChecksums)).toEqual(['a.md', 'b.md']);
    // Updating existing keys is not growth.
    expect((await put({ 'a.md': 'a2', 'c.md': 'c' })).status).toBe(200);
  });
});

describe('concurrent PUTs of one repository', () => {
  it('with the same If-Match, exactly one wins and every other gets 412 (no lost update)', async () => {
    const s = await startTeamMemoryTestServer({ postgresUrl: inject('postgresUrl') });
    try {
      const key = await s.issueKey('t');
      const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
      const url = `${s.url}${PATH}?repo=o/r`;
      const base = await fetch(url, {
        method: 'PUT',
        headers,
        body: JSON.stringify({ entries: { 'base.md': 'b' } }),
      });
      const etag = base.headers.get('etag')!;
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          fetch(url, {
            method: 'PUT',
            headers: { ...headers, 'If-Match': etag },
            body: JSON.stringify({ entries: { [`w${i}.md`]: `writer ${i}` } }),
          }).then((r) => r.status),
        ),
      );
      expect(results.filter((st) => st === 200)).toHaveLength(1);
      expect(results.filter((st) => st === 412)).toHaveLength(5);
      const hashes = (await s.store.hashes('t', 'o/r'))!;
      expect(hashes.version).toBe(2);
      expect(Object.keys(hashes.entryChecksums)).toHaveLength(2);
    } finally {
      await s.close();
    }
  });
});
