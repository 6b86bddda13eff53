import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Anthropic from '@anthropic-ai/sdk';
import { MARKER_PATH } from '@anthropic-ai/sdk/tools/agent-toolset/memories';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import {
  DELETE_CORROBORATION_MS,
  deleteCap,
  memoryHistory,
  memoryStoreClient,
  StoreSyncStateFile,
  type StoreSyncTarget,
  syncTeamStore,
} from '@engram/team-memory/client/store-sync';
import { TenantStore } from '@engram/tenants/tenant-store';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type RunningServer, startServer } from '../commands/serve.js';
import { memoryHistoryCommand, teamStatus } from '../commands/team.js';
import { loadAgentConfig } from '../config.js';

// Team sync through a memory store: Engram as a client of `engram serve`'s Memory Stores API through the SDK,
// on a real PostgreSQL. Two team directories ("homes" A and B) converge through one store.

let base: string;
let server: RunningServer;
let keyA: string;
let keyB: string;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'engram-storesync-'));
  const engramHome = join(base, 'home');
  const tenants = new TenantStore(engramHome);
  for (const w of ['wa', 'wb']) mkdirSync(join(base, w), { recursive: true });
  keyA = (await tenants.add('alpha', join(base, 'wa'))).key;
  keyB = (await tenants.add('beta', join(base, 'wb'))).key;
  const env = {
    PATH: process.env.PATH,
    HOME: join(base, 'operator-home'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: `ss${randomBytes(4).toString('hex')}`,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
    ENGRAM_TEAM_MEMORY_SCHEMA: `ss_${randomBytes(5).toString('hex')}`,
  };
  server = await startServer(loadAgentConfig(env), { port: 0, host: '127.0.0.1' }, env);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  rmSync(base, { recursive: true, force: true });
});

const sdk = (apiKey: string) => new Anthropic({ baseURL: server.url, apiKey, maxRetries: 0 });

function home(name: string, storeId: string, apiKey = keyA) {
  const teamDir = join(base, name, 'memory', 'team');
  mkdirSync(teamDir, { recursive: true });
  return {
    teamDir,
    target: {
      teamDir,
      storeId,
      client: memoryStoreClient({ baseUrl: server.url, apiKey, maxRetries: 0 }),
      state: new StoreSyncStateFile(join(base, name, 'team-store-sync.json')),
    } as StoreSyncTarget,
    write(key: string, content: string) {
      mkdirSync(dirname(join(teamDir, key)), { recursive: true });
      writeFileSync(join(teamDir, key), content);
    },
    read: (key: string) => readFileSync(join(teamDir, key), 'utf8'),
    has: (key: string) => existsSync(join(teamDir, key)),
  };
}

async function storePaths(storeId: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for await (const m of sdk(keyA).beta.memoryStores.memories.list(storeId, { view: 'basic', limit: 100 }))
    if (m.type === 'memory') {
      const full = await sdk(keyA).beta.memoryStores.memories.retrieve(m.id, { memory_store_id: storeId });
      out[m.path] = full.content ?? '';
    }
  return out;
}

describe('team sync through a memory store', () => {
  it('two homes converge: an edit on either side reaches the other, a delete follows', async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'team' });
    const a = home('a1', storeId);
    const b = home('b1', storeId);
    a.write('MEMORY.md', '- [Deploy](notes/deploy.md)\n');
    a.write('notes/deploy.md', 'deploy with make ship\n');
    const first = await syncTeamStore(a.target);
    expect(first.uploaded.map((u) => u.key).sort()).toEqual(['MEMORY.md', 'notes/deploy.md']);
    expect(await storePaths(storeId)).toEqual({
      '/MEMORY.md': '- [Deploy](notes/deploy.md)\n',
      '/notes/deploy.md': 'deploy with make ship\n',
    });

    const pulled = await syncTeamStore(b.target);
    expect(pulled.downloaded.map((d) => d.key).sort()).toEqual(['MEMORY.md', 'notes/deploy.md']);
    expect(b.read('notes/deploy.md')).toBe('deploy with make ship\n');

    b.write('notes/deploy.md', 'deploy with make ship, then tag\n');
    expect((await syncTeamStore(b.target)).uploaded).toEqual([
      { key: 'notes/deploy.md', change: 'updated', bytes: 32 },
    ]);
    const back = await syncTeamStore(a.target);
    expect(back.downloaded).toEqual([{ key: 'notes/deploy.md', change: 'updated', bytes: 32 }]);
    expect(a.read('notes/deploy.md')).toBe('deploy with make ship, then tag\n');
    // Nothing changed: a second pass moves nothing.
    const idle = await syncTeamStore(a.target);
    expect([idle.uploaded, idle.downloaded, idle.deleted, idle.conflicts]).toEqual([[], [], [], []]);

    // A delete on A: the store deletes it (on the baseline's hash) once a second pass 30 s on still misses
    // it, B follows.
    unlinkSync(join(a.teamDir, 'notes/deploy.md'));
    const noticed = await syncTeamStore(a.target);
    expect(noticed.deleted).toEqual([]);
    expect(noticed.pendingDeletes.map((p) => p.key)).toEqual(['notes/deploy.md']);
    expect(Object.keys(await storePaths(storeId))).toEqual(['/MEMORY.md', '/notes/deploy.md']);
    const later = () => new Date(Date.now() + DELETE_CORROBORATION_MS + 1_000);
    expect((await syncTeamStore({ ...a.target, now: later })).deleted).toEqual([
      { key: 'notes/deploy.md', where: 'store' },
    ]);
    expect(Object.keys(await storePaths(storeId))).toEqual(['/MEMORY.md']);
    expect((await syncTeamStore(b.target)).deleted).toEqual([{ key: 'notes/deploy.md', where: 'local' }]);
    expect(b.has('notes/deploy.md')).toBe(false);
    expect(b.has('MEMORY.md')).toBe(true);
  });

  it('concurrent edits: the first to the store wins, the other is kept as a conflict copy and reported', async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'race' });
    const a = home('a2', storeId);
    const b = home('b2', storeId);
    a.write('x.md', 'v1\n');
    await syncTeamStore(a.target);
    await syncTeamStore(b.target);
    a.write('x.md', 'from A\n');
    b.write('x.md', 'from B\n');
    await syncTeamStore(a.target);
    const r = await syncTeamStore(b.target);
    expect(r.uploaded).toEqual([]);
    expect(r.conflicts).toHaveLength(1);
    expect(r.conflicts[0]).toMatchObject({ key: 'x.md', reason: 'both-changed' });
    expect(r.conflicts[0]!.copy).toMatch(/^\.conflicts\/x\.conflict-\d{8}T\d{9}Z\.md$/);
    expect(b.read('x.md')).toBe('from A\n');
    expect(b.read(r.conflicts[0]!.copy)).toBe('from B\n');
    // The copy is hidden: never uploaded.
    await syncTeamStore(b.target);
    expect(Object.keys(await storePaths(storeId))).toEqual(['/x.md']);

    // A first sync over a differing local file (no baseline): the store wins, the local bytes are kept.
    const c = home('c2', storeId);
    c.write('x.md', 'C had this before syncing\n');
    const rc = await syncTeamStore(c.target);
    expect(rc.conflicts).toMatchObject([{ key: 'x.md', reason: 'no-base' }]);
    expect(c.read(rc.conflicts[0]!.copy)).toBe('C had this before syncing\n');
    expect(c.read('x.md')).toBe('from A\n');
  });

  it('a write landing between the listing and the upload: 409 on the precondition, the store wins, nothing lost', async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'late' });
    const a = home('a7', storeId);
    a.write('y.md', 'base\n');
    await syncTeamStore(a.target);
    const { data } = await sdk(keyA).beta.memoryStores.memories.list(storeId);
    const memoryId = data[0]!.type === 'memory' ? data[0]!.id : '';
    // A teammate's update arrives just before our conditional update reaches the server.
    let raced = false;
    const racing: typeof fetch = async (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (!raced && init?.method === 'POST' && url.includes(`/memories/${memoryId}`)) {
        raced = true;
        await sdk(keyA).beta.memoryStores.memories.update(memoryId, {
          memory_store_id: storeId,
          content: 'teammate\n',
        });
      }
      return fetch(input, init);
    };
    a.write('y.md', 'mine\n');
    const target = {
      ...a.target,
      client: new Anthropic({ baseURL: server.url, apiKey: keyA, maxRetries: 0, fetch: racing }),
    };
    const r = await syncTeamStore(target);
    expect(raced).toBe(true);
    expect(r.uploaded).toEqual([]);
    expect(r.conflicts).toMatchObject([{ key: 'y.md', reason: 'precondition' }]);
    expect(a.read('y.md')).toBe('teammate\n');
    expect(a.read(r.conflicts[0]!.copy)).toBe('mine\n');
    expect(await storePaths(storeId)).toEqual({ '/y.md': 'teammate\n' });
  });

  it('a file over the store limit is refused (413), reported, stored nowhere and kept on disk', async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'big' });
    const a = home('a8', storeId);
    const big = 'x'.repeat(102_401);
    a.write('big.md', big);
    a.write('small.md', 'ok\n');
    const r = await syncTeamStore(a.target);
    expect(r.uploaded.map((u) => u.key)).toEqual(['small.md']);
    expect(r.skipped).toContainEqual({ key: 'big.md', reason: 'refused', detail: '413 request_too_large' });
    expect(Object.keys(await storePaths(storeId))).toEqual(['/small.md']);
    expect(a.read('big.md')).toBe(big);

    // The same content is not sent again (no request at all), and is still reported.
    const posts: string[] = [];
    const counting: typeof fetch = async (input, init) => {
      if (init?.method === 'POST') posts.push(String(input instanceof Request ? input.url : input));
      return fetch(input, init);
    };
    const watched = {
      ...a.target,
      client: new Anthropic({ baseURL: server.url, apiKey: keyA, maxRetries: 0, fetch: counting }),
    };
    const again = await syncTeamStore(watched);
    expect(posts).toEqual([]);
    expect(again.skipped).toContainEqual({
      key: 'big.md',
      reason: 'refused',
      detail: '413 request_too_large; not sent again until the file changes',
    });
    // A person's push sends it anyway (they may have fixed it): one request, refused again.
    await syncTeamStore({ ...watched, retryRefused: true });
    expect(posts).toHaveLength(1);
    // Changed content is tried again: still too big, refused once more; then small enough, uploaded.
    a.write('big.md', `${big}y`);
    const changed = await syncTeamStore(watched);
    expect(posts).toHaveLength(2);
    expect(changed.skipped).toContainEqual({
      key: 'big.md',
      reason: 'refused',
      detail: '413 request_too_large',
    });
    a.write('big.md', 'small now\n');
    expect((await syncTeamStore(watched)).uploaded.map((u) => u.key)).toEqual(['big.md']);
    expect(Object.keys(await storePaths(storeId))).toEqual(['/big.md', '/small.md']);
  });

  it('a local delete goes out only once a second pass 30 s on still misses the file, at most deleteCap() a pass', async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'corroborate' });
    const a = home('a10', storeId);
    const names = Array.from({ length: 10 }, (_, i) => `f${i}.md`);
    for (const n of [...names, 'keep.md']) a.write(n, `${n}\n`);
    await syncTeamStore(a.target);
    let clock = Date.now();
    const at = () => ({ ...a.target, now: () => new Date(clock) });
    const half = DELETE_CORROBORATION_MS / 2;

    // Gone for a moment (an editor's delete-and-write, a restore): nothing is deleted.
    unlinkSync(join(a.teamDir, 'f0.md'));
    expect((await syncTeamStore(at())).pendingDeletes.map((p) => p.key)).toEqual(['f0.md']);
    clock += half;
    expect((await syncTeamStore(at())).deleted).toEqual([]); // not yet 30 s
    a.write('f0.md', 'f0.md\n');
    clock += DELETE_CORROBORATION_MS;
    const back = await syncTeamStore(at());
    expect([back.deleted, back.pendingDeletes]).toEqual([[], []]);

    // Nine gone: noticed now, deleted by a pass 30 s on, at most deleteCap() of them per pass.
    for (const n of names.slice(1)) unlinkSync(join(a.teamDir, n));
    expect((await syncTeamStore(at())).pendingDeletes).toHaveLength(9);
    expect(Object.keys(await storePaths(storeId))).toHaveLength(11);
    clock += DELETE_CORROBORATION_MS;
    const first = await syncTeamStore(at());
    expect(first.deleted).toHaveLength(deleteCap(11));
    expect(first.pendingDeletes).toHaveLength(9 - deleteCap(11));
    const rest = await syncTeamStore(at());
    expect(rest.deleted).toHaveLength(9 - deleteCap(11));
    expect(Object.keys(await storePaths(storeId))).toEqual(['/f0.md', '/keep.md']);

    // Changed in the store while its local delete waited: it comes back instead.
    unlinkSync(join(a.teamDir, 'keep.md'));
    await syncTeamStore(at());
    const { data } = await sdk(keyA).beta.memoryStores.memories.list(storeId);
    const keep = data.find((m) => m.path === '/keep.md');
    await sdk(keyA).beta.memoryStores.memories.update(keep!.type === 'memory' ? keep!.id : '', {
      memory_store_id: storeId,
      content: 'teammate kept it\n',
    });
    clock += DELETE_CORROBORATION_MS;
    const restored = await syncTeamStore(at());
    expect(restored.downloaded).toEqual([{ key: 'keep.md', change: 'restored', bytes: 17 }]);
    expect(a.read('keep.md')).toBe('teammate kept it\n');
  });

  it('a local file over the entry cap is reported, never uploaded and never overwritten from the store', async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'cap' });
    const a = home('a11', storeId);
    a.write('grow.md', 'small\n');
    await syncTeamStore(a.target);
    const { data } = await sdk(keyA).beta.memoryStores.memories.list(storeId);
    await sdk(keyA).beta.memoryStores.memories.update(data[0]!.type === 'memory' ? data[0]!.id : '', {
      memory_store_id: storeId,
      content: 'teammate\n',
    });
    const huge = 'x'.repeat(300_000);
    a.write('grow.md', huge);
    const r = await syncTeamStore(a.target);
    expect(r.skipped).toEqual([{ key: 'grow.md', reason: 'too-large' }]);
    expect([r.uploaded, r.downloaded, r.conflicts]).toEqual([[], [], []]);
    expect(a.read('grow.md')).toBe(huge);
    expect(await storePaths(storeId)).toEqual({ '/grow.md': 'teammate\n' });
  });

  it("an authored pass names the job on the job's own files only; a person's edits in it go out unauthored", async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'per-file' });
    const a = home('a12', storeId);
    a.write('facts.md', 'first\n');
    a.write('person.md', 'mine\n');
    await syncTeamStore(a.target);
    a.write('facts.md', 'first\nsecond (extracted)\n');
    a.write('person.md', 'mine, edited by hand\n');
    a.write('new-by-person.md', 'typed in an editor\n');
    const r = await syncTeamStore({ ...a.target, authored: { author: 'extract:77', keys: ['facts.md'] } });
    expect(r.uploaded.map((u) => [u.key, u.author])).toEqual([
      ['facts.md', 'extract:77'],
      ['new-by-person.md', undefined],
      ['person.md', undefined],
    ]);
    const newest = async (key: string) =>
      (await memoryHistory(sdk(keyA), storeId, key)).versions[0]!.created_by;
    expect(await newest('facts.md')).toEqual({
      type: 'api_actor',
      api_key_id: 'apikey_alpha',
      job: 'extract:77',
    });
    expect(await newest('person.md')).toEqual({ type: 'api_actor', api_key_id: 'apikey_alpha' });
    expect(await newest('new-by-person.md')).toEqual({ type: 'api_actor', api_key_id: 'apikey_alpha' });
    // An author that is not a job name is refused before anything is sent.
    await expect(
      syncTeamStore({ ...a.target, authored: { author: 'not a job', keys: ['facts.md'] } }),
    ).rejects.toMatchObject({ code: 'STORE_SYNC_BAD_AUTHOR' });
  });

  it('never uploads a secret or a foreign store mount, and leaves both as found', async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'secrets' });
    const a = home('a3', storeId);
    const pat = `ghp_${'A1b2C3d4E5'.repeat(3)}123456`;
    a.write('ok.md', 'fine\n');
    a.write('leak.md', `token ${pat}\n`);
    // Claude Code's / the SDK's mirror of another store: its marker and its files.
    a.write(`cc-team/${MARKER_PATH}`, 'marker\n');
    a.write('cc-team/their.md', 'mirrored by Claude Code\n');
    const r = await syncTeamStore(a.target);
    expect(r.uploaded.map((u) => u.key)).toEqual(['ok.md']);
    expect(r.skipped).toContainEqual(expect.objectContaining({ key: 'leak.md', reason: 'secret' }));
    expect(r.foreignMounts).toEqual([{ dir: 'cc-team', client: 'sdk' }]);
    const stored = await storePaths(storeId);
    expect(Object.keys(stored)).toEqual(['/ok.md']);
    expect(JSON.stringify(stored)).not.toContain('ghp_');
    // A memory another client put at a path inside the mount is not pulled into it either.
    await sdk(keyA).beta.memoryStores.memories.create(storeId, {
      path: '/cc-team/their.md',
      content: 'other',
    });
    const again = await syncTeamStore(a.target);
    expect(again.skipped).toContainEqual(
      expect.objectContaining({ key: 'cc-team/their.md', reason: 'foreign-mount' }),
    );
    expect(a.read('cc-team/their.md')).toBe('mirrored by Claude Code\n');
    expect(a.read(`cc-team/${MARKER_PATH}`)).toBe('marker\n');
    expect(a.read('leak.md')).toContain(pat);
  });

  it('a wiped folder is re-downloaded, not a mass delete', async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'wipe' });
    const a = home('a4', storeId);
    a.write('one.md', '1\n');
    a.write('two.md', '2\n');
    await syncTeamStore(a.target);
    for (const f of readdirSync(a.teamDir)) rmSync(join(a.teamDir, f), { recursive: true });
    const r = await syncTeamStore(a.target);
    expect(r.recovered).toBe(true);
    expect(r.deleted).toEqual([]);
    expect(a.read('one.md')).toBe('1\n');
    expect(Object.keys(await storePaths(storeId))).toEqual(['/one.md', '/two.md']);
  });

  it("another tenant's store id is not found and nothing is written; the own tenant's works", async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'mine' });
    const intruder = home('b5', storeId, keyB);
    intruder.write('plant.md', 'from beta\n');
    await expect(syncTeamStore(intruder.target)).rejects.toBeInstanceOf(Anthropic.NotFoundError);
    expect(await storePaths(storeId)).toEqual({});
    // Positive control: the same call with the store's own tenant key.
    const own = home('a5', storeId, keyA);
    own.write('plant.md', 'from alpha\n');
    expect((await syncTeamStore(own.target)).uploaded.map((u) => u.key)).toEqual(['plant.md']);
  });

  it("a tenant's team sync credential (the workers' key) reaches its own stores only", async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'workers' });
    const tenants = new TenantStore(join(base, 'home'));
    const alphaWorkers = home('a9', storeId, await tenants.teamSyncKey('alpha'));
    alphaWorkers.write('w.md', 'consolidated\n');
    const authored = { ...alphaWorkers.target, authored: { author: 'dream:7', keys: ['w.md'] } };
    expect((await syncTeamStore(authored)).uploaded.map((u) => u.key)).toEqual(['w.md']);
    const h = await memoryHistory(sdk(keyA), storeId, 'w.md');
    expect(h.versions[0]!.created_by).toEqual({
      type: 'api_actor',
      api_key_id: 'apikey_alpha',
      job: 'dream:7',
    });
    const betaWorkers = home('b9', storeId, await tenants.teamSyncKey('beta'));
    await expect(syncTeamStore(betaWorkers.target)).rejects.toBeInstanceOf(Anthropic.NotFoundError);
  });

  it('records the worker job as the author of the versions its push makes, and history lists them', async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'authored' });
    const person = home('a6', storeId);
    person.write('facts.md', 'first\n');
    await syncTeamStore(person.target);
    const worker = {
      ...person,
      target: { ...person.target, authored: { author: 'extract:42', keys: ['facts.md'] } },
    };
    worker.write('facts.md', 'first\nsecond (extracted)\n');
    await syncTeamStore(worker.target);
    const h = await memoryHistory(person.target.client, storeId, 'facts.md');
    expect(h.versions.map((v) => [v.operation, v.created_by])).toEqual([
      ['modified', { type: 'api_actor', api_key_id: 'apikey_alpha', job: 'extract:42' }],
      ['created', { type: 'api_actor', api_key_id: 'apikey_alpha' }],
    ]);
    // A malformed job header is refused before anything is stored.
    const raw = new Anthropic({
      baseURL: server.url,
      apiKey: keyA,
      maxRetries: 0,
      defaultHeaders: { 'x-engram-job': 'not a job' },
    });
    await expect(
      raw.beta.memoryStores.memories.create(storeId, { path: '/x.md', content: 'x' }),
    ).rejects.toBeInstanceOf(Anthropic.BadRequestError);
    expect(Object.keys(await storePaths(storeId))).toEqual(['/facts.md']);
  });

  it('engram team status names the protocol and engram memory history prints the versions', async () => {
    const { id: storeId } = await sdk(keyA).beta.memoryStores.create({ name: 'cli' });
    const project = join(base, 'proj');
    mkdirSync(project, { recursive: true });
    execFileSync('git', ['init', '-q', project]);
    execFileSync('git', ['-C', project, 'remote', 'add', 'origin', 'git@github.com:Acme/Widgets.git']);
    const env = {
      PATH: process.env.PATH,
      HOME: join(base, 'cli-home'),
      ENGRAM_HOME: join(base, 'cli-engram'),
      ANTHROPIC_API_KEY: 'test',
      ENGRAM_TEAM_SYNC_URL: server.url,
      ENGRAM_TEAM_SYNC_KEY: keyA,
      ENGRAM_TEAM_MEMORY_STORE: `acme/widgets=${storeId}`,
    };
    const config = loadAgentConfig(env);
    const paths = await resolveEngramPaths({ engramHome: config.engramHome, cwd: project });
    mkdirSync(paths.teamDir, { recursive: true });
    writeFileSync(join(paths.teamDir, 'runbook.md'), 'restart the queue\n');
    const lines: string[] = [];
    const io = { out: (t: string) => lines.push(t), err: (t: string) => lines.push(`ERR ${t}`) };
    expect(await teamStatus(config, { cwd: project, json: false }, io)).toBe(0);
    expect(lines).toContain(
      `  protocol: memory-store ${storeId} (bound by ENGRAM_TEAM_MEMORY_STORE: acme/widgets)`,
    );
    expect(lines).toContain('  to push (1): runbook.md');
    const { teamPush } = await import('../commands/team.js');
    lines.length = 0;
    expect(await teamPush(config, { cwd: project, json: false }, io)).toBe(0);
    expect(lines[0]).toMatch(/1 uploaded/);
    writeFileSync(join(paths.teamDir, 'runbook.md'), 'restart the queue, then the workers\n');
    await teamPush(config, { cwd: project, json: false }, io);
    lines.length = 0;
    expect(
      await memoryHistoryCommand(config, { cwd: project, json: false, file: 'team/runbook.md' }, io),
    ).toBe(0);
    expect(lines[0]).toMatch(
      new RegExp(`^runbook\\.md in memory store ${storeId} \\(mem_\\w+\\), newest first:$`),
    );
    expect(lines.slice(1).map((l) => l.replace(/^ {2}\S+ {2}/, '').replace(/memver_\w+/, 'V'))).toEqual([
      'modified V  36 bytes  by apikey_alpha',
      'created  V  18 bytes  by apikey_alpha',
    ]);
    // The same through the CLI entry point (`engram memory history <file>`; without a file: snapshots).
    const entry = fileURLToPath(new URL('../bin/engram.ts', import.meta.url));
    // (Asynchronously: the server runs in this process.)
    const run = promisify(execFile);
    const cli = await run(
      process.execPath,
      [
        '--conditions=source',
        '--import',
        'tsx',
        entry,
        'memory',
        'history',
        'team/runbook.md',
        '--json',
        '--cwd',
        project,
      ],
      { encoding: 'utf8', env: { ...env, ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md' } },
    );
    expect(cli.stderr).toBe('');
    expect(JSON.parse(cli.stdout)).toMatchObject({
      file: 'runbook.md',
      storeId,
      versions: [{ operation: 'modified' }, { operation: 'created' }],
    });
    const snapshots = await run(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', entry, 'memory', 'history', '--json', '--cwd', project],
      { encoding: 'utf8', env },
    );
    expect(snapshots.stdout).not.toContain(storeId);
    // Outside team/: a usage error naming why.
    lines.length = 0;
    expect(await memoryHistoryCommand(config, { cwd: project, json: false, file: 'notes.md' }, io)).toBe(2);
    expect(lines[0]).toMatch(/not a file of the team directory/);
    // The seed protocol for a repository not bound to a store.
    const seed = loadAgentConfig({ ...env, ENGRAM_TEAM_MEMORY_STORE: `other/repo=${storeId}` });
    lines.length = 0;
    await teamStatus(seed, { cwd: project, json: false }, io).catch(() => undefined);
    expect(lines).toContain('  protocol: team-memory (/api/claude_code/team_memory; no memory store bound)');
  });
});
