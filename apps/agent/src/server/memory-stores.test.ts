import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { SessionMemoryStores } from '@anthropic-ai/sdk/tools/agent-toolset/memories';
import { TenantStore } from '@engram/tenants/tenant-store';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type RunningServer, startServer } from '../commands/serve.js';
import { loadAgentConfig } from '../config.js';

// Conformance of `engram serve`'s Memory Stores API, driven by the official SDK's `client.beta.memoryStores`
// against a real server on a real PostgreSQL (the team-memory database, its own schema for this run).

let base: string;
let server: RunningServer;
let keyA: string;
let keyB: string;

const sha = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'engram-memstores-'));
  const engramHome = join(base, 'home');
  const tenants = new TenantStore(engramHome);
  for (const w of ['wa', 'wb']) mkdirSync(join(base, w), { recursive: true });
  keyA = (await tenants.add('alpha', join(base, 'wa'))).key;
  keyB = (await tenants.add('beta', join(base, 'wb'))).key;
  const env = {
    PATH: process.env.PATH,
    HOME: join(base, 'operator-home'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: `ms${randomBytes(4).toString('hex')}`,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
    ENGRAM_TEAM_MEMORY_SCHEMA: `ms_${randomBytes(5).toString('hex')}`,
  };
  server = await startServer(loadAgentConfig(env), { port: 0, host: '127.0.0.1' }, env);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  rmSync(base, { recursive: true, force: true });
});

const sdk = (apiKey: string) => new Anthropic({ baseURL: server.url, apiKey, maxRetries: 0 });

describe('memory stores through the official SDK', () => {
  it('creates, retrieves, updates, lists, archives and deletes stores', async () => {
    const client = sdk(keyA);
    const store = await client.beta.memoryStores.create({
      name: 'Team notes',
      description: 'what the team knows',
      metadata: { owner: 'platform' },
    });
    expect(store.id).toMatch(/^memstore_/);
    expect(store).toMatchObject({ type: 'memory_store', name: 'Team notes', archived_at: null });
    expect(await client.beta.memoryStores.retrieve(store.id)).toEqual(store);
    const updated = await client.beta.memoryStores.update(store.id, {
      name: 'Team memory',
      metadata: { owner: null, team: 'infra' },
    });
    expect(updated).toMatchObject({ name: 'Team memory', description: 'what the team knows' });
    expect(updated.metadata).toEqual({ team: 'infra' });

    const extra = [];
    for (let i = 0; i < 3; i++) extra.push(await client.beta.memoryStores.create({ name: `s${i}` }));
    const seen: string[] = [];
    for await (const s of client.beta.memoryStores.list({ limit: 2 })) seen.push(s.id);
    expect(seen).toEqual([store.id, ...extra.map((s) => s.id)]);

    const archived = await client.beta.memoryStores.archive(extra[0]!.id);
    expect(archived.archived_at).not.toBeNull();
    const active: string[] = [];
    for await (const s of client.beta.memoryStores.list()) active.push(s.id);
    expect(active).not.toContain(extra[0]!.id);
    const all: string[] = [];
    for await (const s of client.beta.memoryStores.list({ include_archived: true })) all.push(s.id);
    expect(all).toContain(extra[0]!.id);
    // An archived store takes no new memories.
    await expect(
      client.beta.memoryStores.memories.create(extra[0]!.id, { path: '/a.md', content: 'x' }),
    ).rejects.toBeInstanceOf(Anthropic.BadRequestError);

    expect(await client.beta.memoryStores.delete(extra[1]!.id)).toEqual({
      type: 'memory_store_deleted',
      id: extra[1]!.id,
    });
    await expect(client.beta.memoryStores.retrieve(extra[1]!.id)).rejects.toBeInstanceOf(
      Anthropic.NotFoundError,
    );
  });

  it('serves memories with views, the content_sha256 precondition and path conflicts', async () => {
    const client = sdk(keyA);
    const { id: storeId } = await client.beta.memoryStores.create({ name: 'm' });
    const created = await client.beta.memoryStores.memories.create(storeId, {
      path: '/notes/todo.md',
      content: 'ship it',
    });
    expect(created).toMatchObject({
      type: 'memory',
      path: '/notes/todo.md',
      content: null, // create defaults to view=basic
      content_sha256: sha('ship it'),
      content_size_bytes: 7,
      memory_store_id: storeId,
    });
    expect(created.id).toMatch(/^mem_/);
    expect(created.memory_version_id).toMatch(/^memver_/);
    const full = await client.beta.memoryStores.memories.retrieve(created.id, { memory_store_id: storeId });
    expect(full.content).toBe('ship it');
    const basic = await client.beta.memoryStores.memories.retrieve(created.id, {
      memory_store_id: storeId,
      view: 'basic',
    });
    expect(basic.content).toBeNull();

    // A stale precondition is the SDK's ConflictError with the precondition error type; nothing changes.
    const stale = await client.beta.memoryStores.memories
      .update(created.id, {
        memory_store_id: storeId,
        content: 'new',
        precondition: { type: 'content_sha256', content_sha256: sha('something else') },
      })
      .catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(Anthropic.ConflictError);
    expect((stale as InstanceType<typeof Anthropic.ConflictError>).error).toMatchObject({
      type: 'error',
      error: { type: 'memory_precondition_failed_error' },
    });
    expect(
      (await client.beta.memoryStores.memories.retrieve(created.id, { memory_store_id: storeId })).content,
    ).toBe('ship it');

    const updated = await client.beta.memoryStores.memories.update(created.id, {
      memory_store_id: storeId,
      content: 'shipped',
      precondition: { type: 'content_sha256', content_sha256: created.content_sha256 },
      view: 'full',
    });
    expect(updated).toMatchObject({ content: 'shipped', id: created.id });
    expect(updated.memory_version_id).not.toBe(created.memory_version_id);
    // Asking for exactly what is there succeeds even with a stale hash, and adds no version.
    const same = await client.beta.memoryStores.memories.update(created.id, {
      memory_store_id: storeId,
      content: 'shipped',
      precondition: { type: 'content_sha256', content_sha256: sha('old') },
    });
    expect(same.memory_version_id).toBe(updated.memory_version_id);

    // Path conflicts: the same path, an ancestor, a descendant.
    for (const path of ['/notes/todo.md', '/notes', '/notes/todo.md/deeper']) {
      const err = await client.beta.memoryStores.memories
        .create(storeId, { path, content: 'x' })
        .catch((e: unknown) => e);
      expect(err, path).toBeInstanceOf(Anthropic.ConflictError);
      expect((err as InstanceType<typeof Anthropic.ConflictError>).error).toMatchObject({
        error: {
          type: 'memory_path_conflict_error',
          conflicting_path: '/notes/todo.md',
          conflicting_memory_id: created.id,
        },
      });
    }
    // A rename keeps the id.
    const renamed = await client.beta.memoryStores.memories.update(created.id, {
      memory_store_id: storeId,
      path: '/done/todo.md',
    });
    expect(renamed).toMatchObject({ id: created.id, path: '/done/todo.md' });

    // Delete with a stale expected hash refuses; with the right one it deletes.
    await expect(
      client.beta.memoryStores.memories.delete(created.id, {
        memory_store_id: storeId,
        expected_content_sha256: sha('nope'),
      }),
    ).rejects.toBeInstanceOf(Anthropic.ConflictError);
    expect(
      await client.beta.memoryStores.memories.delete(created.id, {
        memory_store_id: storeId,
        expected_content_sha256: sha('shipped'),
      }),
    ).toEqual({ type: 'memory_deleted', id: created.id });
    await expect(
      client.beta.memoryStores.memories.retrieve(created.id, { memory_store_id: storeId }),
    ).rejects.toBeInstanceOf(Anthropic.NotFoundError);
  });

  it('lists by prefix and depth with memory_prefix markers, paginating through the async iterator', async () => {
    const client = sdk(keyA);
    const { id: storeId } = await client.beta.memoryStores.create({ name: 'tree' });
    const paths = [
      '/a.md',
      '/b/1.md',
      '/b/2.md',
      '/b/c/3.md',
      '/d/4.md',
      '/notes-archive/x.md',
      '/notes/y.md',
    ];
    for (const path of paths)
      await client.beta.memoryStores.memories.create(storeId, { path, content: `c ${path}` });

    const everything: string[] = [];
    for await (const m of client.beta.memoryStores.memories.list(storeId, { limit: 2 }))
      everything.push(m.path);
    expect(everything).toEqual([...paths].sort());

    const top: string[] = [];
    for await (const m of client.beta.memoryStores.memories.list(storeId, { depth: 1, limit: 2 }))
      top.push(`${m.type}:${m.path}`);
    expect(top).toEqual([
      'memory:/a.md',
      'memory_prefix:/b/',
      'memory_prefix:/d/',
      'memory_prefix:/notes-archive/',
      'memory_prefix:/notes/',
    ]);

    const underB: string[] = [];
    for await (const m of client.beta.memoryStores.memories.list(storeId, { path_prefix: '/b/', depth: 1 }))
      underB.push(`${m.type}:${m.path}`);
    expect(underB).toEqual(['memory:/b/1.md', 'memory:/b/2.md', 'memory_prefix:/b/c/']);

    // The prefix matches whole segments.
    const notes: string[] = [];
    for await (const m of client.beta.memoryStores.memories.list(storeId, { path_prefix: '/notes/' }))
      notes.push(m.path);
    expect(notes).toEqual(['/notes/y.md']);

    const fullPage = await client.beta.memoryStores.memories.list(storeId, { view: 'full', limit: 20 });
    expect(fullPage.data.map((m) => (m.type === 'memory' ? m.content : undefined))).toContain('c /a.md');
    // view=full caps a page at 20 items, view=basic at 100: each refusal names the limit.
    await expect(
      client.beta.memoryStores.memories.list(storeId, { view: 'full', limit: 21 }),
    ).rejects.toThrow(/page-size limit of 20/);
    await expect(client.beta.memoryStores.memories.list(storeId, { limit: 101 })).rejects.toThrow(
      /page-size limit of 100/,
    );
  });

  it('records versions with their author and redacts an old one', async () => {
    const client = sdk(keyA);
    const { id: storeId } = await client.beta.memoryStores.create({ name: 'v' });
    const m = await client.beta.memoryStores.memories.create(storeId, { path: '/v.md', content: 'one' });
    await client.beta.memoryStores.memories.update(m.id, { memory_store_id: storeId, content: 'two' });
    await client.beta.memoryStores.memories.delete(m.id, { memory_store_id: storeId });

    const versions = [];
    for await (const v of client.beta.memoryStores.memoryVersions.list(storeId, {
      memory_id: m.id,
      limit: 1,
    }))
      versions.push(v);
    expect(versions.map((v) => v.operation)).toEqual(['deleted', 'modified', 'created']);
    for (const v of versions) {
      expect(v.id).toMatch(/^memver_/);
      expect(v.created_by).toEqual({ type: 'api_actor', api_key_id: 'apikey_alpha' });
    }
    expect(versions[0]).toMatchObject({ content_sha256: null, content: null });
    expect(versions[1]).toMatchObject({ content: null, content_sha256: sha('two') }); // list: view=basic

    const first = await client.beta.memoryStores.memoryVersions.retrieve(versions[2]!.id, {
      memory_store_id: storeId,
    });
    expect(first).toMatchObject({ content: 'one', path: '/v.md', operation: 'created' });
    const modified = [];
    for await (const v of client.beta.memoryStores.memoryVersions.list(storeId, { operation: 'modified' }))
      modified.push(v.id);
    expect(modified).toEqual([versions[1]!.id]);

    const redacted = await client.beta.memoryStores.memoryVersions.redact(first.id, {
      memory_store_id: storeId,
    });
    expect(redacted).toMatchObject({
      content: null,
      path: null,
      content_sha256: null,
      content_size_bytes: null,
    });
    expect(redacted.redacted_at).not.toBeNull();
    expect(redacted.redacted_by).toEqual({ type: 'api_actor', api_key_id: 'apikey_alpha' });
    expect(redacted.created_by).toEqual(first.created_by);

    // The version holding a live memory's content is refused (positive control: the old one above worked).
    const live = await client.beta.memoryStores.memories.create(storeId, { path: '/live.md', content: 'x' });
    await expect(
      client.beta.memoryStores.memoryVersions.redact(live.memory_version_id, { memory_store_id: storeId }),
    ).rejects.toBeInstanceOf(Anthropic.ConflictError);
  });

  it('refuses bad input with the documented 4xx and stores nothing', async () => {
    const client = sdk(keyA);
    const { id: storeId } = await client.beta.memoryStores.create({ name: 'bad' });
    const bad = [
      '/a/../b.md',
      '/a/./b.md',
      'relative.md',
      '/nul\u0000.md',
      '/a//b.md',
      `/${'x'.repeat(1025)}`,
      `/${Array.from({ length: 21 }, () => 's').join('/')}`,
      '/cafe\u0301.md', // not NFC
      '/line\u2028sep.md',
    ];
    for (const path of bad)
      await expect(
        client.beta.memoryStores.memories.create(storeId, { path, content: 'x' }),
        JSON.stringify(path),
      ).rejects.toBeInstanceOf(Anthropic.BadRequestError);
    await expect(
      client.beta.memoryStores.memories.create(storeId, { path: '/big.md', content: 'x'.repeat(102_401) }),
    ).rejects.toThrow(/102400 bytes per memory/);
    // Exactly at the limit is accepted (positive control).
    await client.beta.memoryStores.memories.create(storeId, {
      path: '/max.md',
      content: 'x'.repeat(102_400),
    });
    const page = await client.beta.memoryStores.memories.list(storeId);
    expect(page.data.map((m) => m.path)).toEqual(['/max.md']);
  });

  it('keeps tenants apart and refuses requests without a valid key', async () => {
    const a = sdk(keyA);
    const b = sdk(keyB);
    const store = await a.beta.memoryStores.create({ name: 'private' });
    const mem = await a.beta.memoryStores.memories.create(store.id, {
      path: '/secret-plan.md',
      content: 'p',
    });
    // Positive control: the owner reads it.
    expect((await a.beta.memoryStores.memories.retrieve(mem.id, { memory_store_id: store.id })).content).toBe(
      'p',
    );
    await expect(b.beta.memoryStores.retrieve(store.id)).rejects.toBeInstanceOf(Anthropic.NotFoundError);
    await expect(
      b.beta.memoryStores.memories.retrieve(mem.id, { memory_store_id: store.id }),
    ).rejects.toBeInstanceOf(Anthropic.NotFoundError);
    await expect(
      b.beta.memoryStores.memories.create(store.id, { path: '/x.md', content: 'x' }),
    ).rejects.toBeInstanceOf(Anthropic.NotFoundError);
    await expect(b.beta.memoryStores.delete(store.id)).rejects.toBeInstanceOf(Anthropic.NotFoundError);
    const bStores: string[] = [];
    for await (const s of b.beta.memoryStores.list()) bStores.push(s.id);
    expect(bStores).not.toContain(store.id);

    await expect(sdk('eng_wrong.key').beta.memoryStores.list()).rejects.toBeInstanceOf(
      Anthropic.AuthenticationError,
    );
    // Authorization: Bearer works as well as x-api-key.
    const bearer = new Anthropic({ baseURL: server.url, authToken: keyA, apiKey: null, maxRetries: 0 });
    expect((await bearer.beta.memoryStores.retrieve(store.id)).id).toBe(store.id);
  });
});

describe("Claude Code's requests", () => {
  const call = (path: string, init: RequestInit = {}) =>
    fetch(`${server.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${keyA}`, 'content-type': 'application/json', ...init.headers },
    });

  it('creates with not_exists, lists with its order params, and exports a line stream', async () => {
    const store = await sdk(keyA).beta.memoryStores.create({ name: 'cc' });
    const first = await call(`/v1/memory_stores/${store.id}/memories`, {
      method: 'POST',
      body: JSON.stringify({ path: '/team.md', content: 'hello', precondition: { type: 'not_exists' } }),
    });
    expect(first.status).toBe(200);
    const created = (await first.json()) as { id: string };
    const again = await call(`/v1/memory_stores/${store.id}/memories`, {
      method: 'POST',
      body: JSON.stringify({ path: '/team.md', content: 'hello', precondition: { type: 'not_exists' } }),
    });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({
      type: 'error',
      error: {
        type: 'memory_path_conflict_error',
        conflicting_path: '/team.md',
        conflicting_memory_id: created.id,
      },
    });
    const list = await call(
      `/v1/memory_stores/${store.id}/memories?limit=100&depth=1&order_by=path&order=asc`,
    );
    expect(
      ((await list.json()) as { data: { path: string }[] }).data.map((m: { path: string }) => m.path),
    ).toEqual(['/team.md']);

    const exported = await call(`/v1/memory_stores/${store.id}/memories/export?view=basic`);
    expect(exported.status).toBe(200);
    const lines = (await exported.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ type: 'store', view: 'basic', id: store.id });
    expect(lines[1]).toMatchObject({
      type: 'memory',
      path: '/team.md',
      content: null,
      content_sha256: sha('hello'),
    });
    expect(lines.at(-1)).toEqual({ type: 'complete', memory_count: 1 });
  });
});

describe("the SDK's SessionMemoryStores folder sync", () => {
  it('mirrors a store into a folder and back: edits on either side converge, a local delete follows', async () => {
    const client = sdk(keyA);
    const store = await client.beta.memoryStores.create({ name: 'mirror' });
    const put = (path: string, content: string) =>
      client.beta.memoryStores.memories.create(store.id, { path, content });
    await put('/a.md', 'A');
    const b = await put('/dir/b.md', 'B');
    await put('/gone.md', 'G');
    const mount = join(base, 'mounts', 'mirror');
    mkdirSync(join(base, 'mounts'), { recursive: true });
    const sync = new SessionMemoryStores(client, { workdir: base });
    // The session object as the SDK reads it: only its memory_store resources matter here.
    await sync.download({
      resources: [{ type: 'memory_store', memory_store_id: store.id, mount_path: mount }],
    } as unknown as Parameters<SessionMemoryStores['download']>[0]);
    expect(readFileSync(join(mount, 'a.md'), 'utf8')).toBe('A');
    expect(readFileSync(join(mount, 'dir', 'b.md'), 'utf8')).toBe('B');

    writeFileSync(join(mount, 'a.md'), 'A2');
    writeFileSync(join(mount, 'new.md'), 'N');
    unlinkSync(join(mount, 'gone.md'));
    await client.beta.memoryStores.memories.update(b.id, { memory_store_id: store.id, content: 'B2' });
    await sync.finish();

    const remote: Record<string, string | null | undefined> = {};
    for await (const m of client.beta.memoryStores.memories.list(store.id, { view: 'full', limit: 20 }))
      if (m.type === 'memory') remote[m.path] = m.content;
    expect(remote).toEqual({ '/a.md': 'A2', '/dir/b.md': 'B2', '/new.md': 'N' });
    expect(readFileSync(join(mount, 'dir', 'b.md'), 'utf8')).toBe('B2');
    await sync.dispose?.();
  });
});

describe('engram serve without ENGRAM_TEAM_MEMORY_DATABASE_URL', () => {
  it('starts an embedded PostgreSQL and serves the team memory and memory store routes', async () => {
    const home = join(base, 'home-embedded');
    const tenants = new TenantStore(home);
    mkdirSync(join(base, 'we'), { recursive: true });
    const { key } = await tenants.add('gamma', join(base, 'we'));
    const env = {
      PATH: process.env.PATH,
      HOME: join(base, 'operator-home'),
      ENGRAM_HOME: home,
      ENGRAM_NAMESPACE: `ms${randomBytes(4).toString('hex')}`,
      REDIS_URL: inject('redisUrl'),
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
      ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    };
    const local = await startServer(loadAgentConfig(env), { port: 0, host: '127.0.0.1' }, env);
    try {
      const team = await fetch(`${local.url}/api/claude_code/team_memory?repo=o/r`, {
        headers: { authorization: `Bearer ${key}` },
      });
      // The route is mounted: "no team memory yet" in the service's own words, not an unmounted route.
      expect(team.status).toBe(404);
      expect(await team.json()).toMatchObject({
        error: { details: { error_code: 'team_memory_not_found' } },
      });
      const client = new Anthropic({ baseURL: local.url, apiKey: key, maxRetries: 0 });
      const store = await client.beta.memoryStores.create({ name: 'local' });
      expect((await client.beta.memoryStores.retrieve(store.id)).name).toBe('local');
    } finally {
      await local.stop();
    }
  }, 120_000);
});
