import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TenantTeamStores, teamStoreFor } from './team-stores.js';
import { type LookupStep, resolveTenantCwd, type TenantError, TenantStore } from './tenant-store.js';

function fresh() {
  const base = mkdtempSync(join(tmpdir(), 'engram-tenants-'));
  const ws = (name: string) => {
    const dir = join(base, 'ws', name);
    mkdirSync(dir, { recursive: true });
    return dir;
  };
  return { store: new TenantStore(join(base, 'home')), ws, base };
}

describe('TenantStore', () => {
  it('adds a tenant, stores only the hash of its key, authenticates Bearer keys and honours revocation', async () => {
    const { store, ws } = fresh();
    const { tenant, key } = await store.add('acme', ws('acme'));
    expect(key).toMatch(/^egk\.acme\.[0-9a-f]{64}$/);
    const raw = readFileSync(join(store.root, 'acme', 'tenant.json'), 'utf8');
    expect(raw).not.toContain(key.split('.')[2]);
    expect((await store.authenticate(`Bearer ${key}`))?.id).toBe('acme');
    expect(await store.authenticate(key)).toBeNull();
    expect(await store.authenticate(undefined)).toBeNull();
    // One hex digit changed (to a digit it is not: a fixed replacement equals the key one time in 16).
    const wrong = `${key.slice(0, -1)}${key.endsWith('0') ? '1' : '0'}`;
    expect(await store.authenticate(`Bearer ${wrong}`)).toBeNull();
    expect(await store.authenticate('Bearer egk.../../x.00')).toBeNull();
    expect(tenant.home).toBe(join(store.root, 'acme', 'home'));
    await store.revoke('acme');
    expect(await store.authenticate(`Bearer ${key}`)).toBeNull();
    expect((await store.list())[0]).toMatchObject({ id: 'acme', revokedAt: expect.any(String) });
  });

  it('refuses bad names, duplicates, missing and overlapping workspaces and unknown tools', async () => {
    const { store, ws } = fresh();
    await store.add('one', ws('one'));
    const code = (p: Promise<unknown>) =>
      p.then(
        () => 'ok',
        (e: TenantError) => e.code,
      );
    expect(await code(store.add('One', ws('x')))).toBe('TENANT_INVALID_NAME');
    expect(await code(store.add('../x', ws('y')))).toBe('TENANT_INVALID_NAME');
    expect(await code(store.add('one', ws('z')))).toBe('TENANT_EXISTS');
    expect(await code(store.add('two', '/nonexistent/dir'))).toBe('TENANT_WORKSPACE_INVALID');
    expect(await code(store.add('three', join(ws('one'), '..', 'one')))).toBe('TENANT_WORKSPACE_OVERLAP');
    mkdirSync(join(ws('one'), 'sub'));
    expect(await code(store.add('four', join(ws('one'), 'sub')))).toBe('TENANT_WORKSPACE_OVERLAP');
    expect(await code(store.add('five', ws('five'), { allowedTools: ['Read', 'Sudo'] }))).toBe(
      'TENANT_POLICY_INVALID',
    );
    expect((await store.list()).map((t) => t.id)).toEqual(['one']);
  });

  it('resolves a cwd only inside the workspace, after resolving symlinks', async () => {
    const { store, ws, base } = fresh();
    const { tenant } = await store.add('acme', ws('acme'));
    mkdirSync(join(tenant.workspace, 'app'));
    symlinkSync(ws('other'), join(tenant.workspace, 'escape'));
    expect(await resolveTenantCwd(tenant, join(tenant.workspace, 'app'))).toBe(join(tenant.workspace, 'app'));
    expect(await resolveTenantCwd(tenant, tenant.workspace)).toBe(tenant.workspace);
    expect(await resolveTenantCwd(tenant, join(tenant.workspace, 'escape'))).toBeUndefined();
    expect(await resolveTenantCwd(tenant, join(tenant.workspace, '..', 'other'))).toBeUndefined();
    expect(await resolveTenantCwd(tenant, base)).toBeUndefined();
    expect(await resolveTenantCwd(tenant, 'relative')).toBeUndefined();
  });
});

describe('TenantStore.workspaces', () => {
  it('serves a settled listing from its cache and lists again once the tenants root changes', async () => {
    const { store, ws } = fresh();
    await store.add('acme', ws('acme'));
    await store.add('bravo', ws('bravo'));
    // Right after a change the listing is not trusted to the cache (a record may still be being written).
    expect((await store.workspaces()).map((t) => t.id)).toEqual(['acme', 'bravo']);
    const old = new Date(Date.now() - 60_000);
    utimesSync(store.root, old, old);
    const warm = await store.workspaces();
    expect(warm.map((t) => t.id)).toEqual(['acme', 'bravo']);
    // A record changed behind the store's back, in a way that leaves the root alone: the warm call does not
    // read the records again (that is what makes it one stat per turn).
    const record = join(store.root, 'bravo', 'tenant.json');
    writeFileSync(
      record,
      readFileSync(record, 'utf8').replace(/"workspace": "[^"]+"/, '"workspace": "/elsewhere"'),
    );
    expect(await store.workspaces()).toBe(warm);
    // Adding a tenant (as `engram tenants add` does from another process) changes the root: listed again.
    const added = await new TenantStore(join(store.root, '..')).add('carol', ws('carol'));
    const after = await store.workspaces();
    expect(after.map((t) => t.id)).toEqual(['acme', 'bravo', 'carol']);
    expect(after.find((t) => t.id === 'carol')?.workspace).toBe(added.tenant.workspace);
    expect(after.find((t) => t.id === 'bravo')?.workspace).toBe('/elsewhere');
    // Revoked tenants stay listed: their workspaces keep their files and stay hidden from the others.
    await store.revoke('acme');
    expect((await store.workspaces()).map((t) => t.id)).toContain('acme');
  });

  it('authenticates from a settled record cache and sees every change of the record at once', async () => {
    const { store, ws } = fresh();
    const { key } = await store.add('acme', ws('acme'));
    const bravo = await store.add('bravo', ws('bravo'));
    const record = join(store.root, 'acme', 'tenant.json');
    const old = new Date(Date.now() - 60_000);
    utimesSync(record, old, old);
    expect((await store.authenticate(`Bearer ${key}`))?.id).toBe('acme');
    expect((await store.authenticate(`Bearer ${key}`))?.id).toBe('acme');
    // An edit in place (same inode) that swaps in another key's hash: the cached record is not served.
    const bravoHash = JSON.parse(readFileSync(join(store.root, 'bravo', 'tenant.json'), 'utf8')).keyHash;
    const raw = readFileSync(record, 'utf8');
    writeFileSync(record, raw.replace(/"keyHash": "[0-9a-f]+"/, `"keyHash": "${bravoHash}"`));
    utimesSync(record, old, old);
    expect(await store.authenticate(`Bearer ${key}`)).toBeNull();
    writeFileSync(record, raw);
    utimesSync(record, old, old);
    expect((await store.authenticate(`Bearer ${key}`))?.id).toBe('acme');
    // `tenants revoke` from another process replaces the file: the next request is refused.
    await new TenantStore(join(store.root, '..')).revoke('acme');
    expect(await store.authenticate(`Bearer ${key}`)).toBeNull();
    expect((await store.authenticate(`Bearer ${bravo.key}`))?.id).toBe('bravo');
  });
});

describe('TenantStore.teamSyncKey', () => {
  it('makes one team sync credential per tenant, accepted only where asked for and never after revocation', async () => {
    const { store, ws } = fresh();
    const { key } = await store.add('acme', ws('acme'));
    await store.add('bravo', ws('bravo'));
    const team = await store.teamSyncKey('acme');
    expect(team).toMatch(/^egt\.acme\.[0-9a-f]{64}$/);
    // Made once: the same credential every time, in a file only its owner reads.
    expect(await store.teamSyncKey('acme')).toBe(team);
    expect(statSync(join(store.secretsRoot, 'acme', 'team-sync.key')).mode & 0o777).toBe(0o600);
    expect(existsSync(join(store.root, 'acme', 'team-sync.key'))).toBe(false);
    expect(await store.teamSyncKey('bravo')).not.toBe(team);
    expect((await store.authenticate(`Bearer ${team}`, { teamSync: true }))?.id).toBe('acme');
    // Not an API key: /v1 (no teamSync option) refuses it; the API key still works on team routes.
    expect(await store.authenticate(`Bearer ${team}`)).toBeNull();
    expect((await store.authenticate(`Bearer ${key}`, { teamSync: true }))?.id).toBe('acme');
    // Another tenant's id with acme's secret is refused.
    expect(
      await store.authenticate(`Bearer ${team.replace('acme', 'bravo')}`, { teamSync: true }),
    ).toBeNull();
    await store.revoke('acme');
    expect(await store.authenticate(`Bearer ${team}`, { teamSync: true })).toBeNull();
    await expect(store.teamSyncKey('acme')).rejects.toMatchObject({ code: 'TENANT_NOT_FOUND' });
    await expect(store.teamSyncKey('nobody')).rejects.toMatchObject({ code: 'TENANT_NOT_FOUND' });
  });
});

describe('TenantStore credentials out of every tenant area', () => {
  it('keeps the team sync key under secrets/ (0700/0600), outside tenants/, and migrates a key left in the tenant area', async () => {
    const { store, ws, base } = fresh();
    await store.add('acme', ws('acme'));
    await store.add('bravo', ws('bravo'));
    // A key as earlier versions wrote it: in the tenant's directory, where its tools could reach it.
    const legacyKey = `egt.acme.${'ab'.repeat(32)}`;
    writeFileSync(join(store.root, 'acme', 'team-sync.key'), `${legacyKey}\n`, { mode: 0o600 });
    writeFileSync(join(store.root, 'bravo', 'team-sync.key'), `egt.bravo.${'cd'.repeat(32)}\n`, {
      mode: 0o600,
    });
    // A replica still running the old code authenticated with it; after the move the same key still works.
    expect(await store.migrateSecrets()).toBe(2);
    expect(existsSync(join(store.root, 'acme', 'team-sync.key'))).toBe(false);
    expect(readFileSync(join(store.secretsRoot, 'acme', 'team-sync.key'), 'utf8').trim()).toBe(legacyKey);
    expect(statSync(join(store.secretsRoot, 'acme')).mode & 0o777).toBe(0o700);
    expect(statSync(join(base, 'home', 'secrets')).mode & 0o777).toBe(0o700);
    expect(await store.teamSyncKey('acme')).toBe(legacyKey);
    expect((await store.authenticate(`Bearer ${legacyKey}`, { teamSync: true }))?.id).toBe('acme');
    // Migration is idempotent: nothing left to move, nothing lost.
    expect(await store.migrateSecrets()).toBe(0);
    expect(await store.teamSyncKey('acme')).toBe(legacyKey);
    // A key left at the old place is also moved on first use, without `migrateSecrets`.
    const carol = await store.add('carol', ws('carol'));
    const carolLegacy = `egt.carol.${'ef'.repeat(32)}`;
    writeFileSync(join(store.root, 'carol', 'team-sync.key'), `${carolLegacy}\n`, { mode: 0o600 });
    expect((await store.authenticate(`Bearer ${carolLegacy}`, { teamSync: true }))?.id).toBe(carol.tenant.id);
    expect(existsSync(join(store.root, 'carol', 'team-sync.key'))).toBe(false);
    // Nothing secret is left anywhere under tenants/ (every tenant's area).
    const { spawnSync } = await import('node:child_process');
    const grep = spawnSync('grep', ['-rl', 'egt\\.', store.root], { encoding: 'utf8' });
    expect(grep.status).toBe(1); // 1: no match (2 would be an error)
    expect(grep.stdout).toBe('');
  });
});

describe('TenantStore workspaces and ENGRAM_HOME', () => {
  it('refuses a workspace inside or containing ENGRAM_HOME or another workspace, and accepts a sibling', async () => {
    const base = mkdtempSync(join(tmpdir(), 'engram-tenants-'));
    const home = join(base, 'srv', 'home');
    mkdirSync(join(home, 'inner'), { recursive: true });
    const store = new TenantStore(home);
    const code = (p: Promise<unknown>) =>
      p.then(
        () => 'ok',
        (e: TenantError) => e.code,
      );
    expect(await code(store.add('a', join(base, 'srv')))).toBe('TENANT_WORKSPACE_OVERLAP');
    expect(await code(store.add('a', base))).toBe('TENANT_WORKSPACE_OVERLAP');
    expect(await code(store.add('a', home))).toBe('TENANT_WORKSPACE_OVERLAP');
    expect(await code(store.add('a', join(home, 'inner')))).toBe('TENANT_WORKSPACE_OVERLAP');
    // Through a symlink: judged on the real path.
    symlinkSync(join(home, 'inner'), join(base, 'link'));
    expect(await code(store.add('a', join(base, 'link')))).toBe('TENANT_WORKSPACE_OVERLAP');
    mkdirSync(join(base, 'ws', 'one', 'sub'), { recursive: true });
    mkdirSync(join(base, 'ws', 'two'), { recursive: true });
    expect(await code(store.add('one', join(base, 'ws', 'one')))).toBe('ok');
    expect(await code(store.add('x', join(base, 'ws', 'one', 'sub')))).toBe('TENANT_WORKSPACE_OVERLAP');
    expect(await code(store.add('x', join(base, 'ws')))).toBe('TENANT_WORKSPACE_OVERLAP');
    // Positive control: a sibling of another workspace, outside ENGRAM_HOME.
    expect(await code(store.add('two', join(base, 'ws', 'two')))).toBe('ok');
  });
});

describe('TenantStore lookup', () => {
  it('does the same steps for a known, an unknown and a revoked tenant id', async () => {
    const { store: plain, ws } = fresh();
    const steps: LookupStep[] = [];
    const store = new TenantStore(join(plain.root, '..'), { probe: (s) => steps.push(s) });
    const { key } = await store.add('acme', ws('acme'));
    await store.add('gone', ws('gone'));
    await store.revoke('gone');
    const old = new Date(Date.now() - 60_000);
    for (const id of ['acme', 'gone']) utimesSync(join(store.root, id, 'tenant.json'), old, old);
    const secret = key.split('.')[2]!;
    const run = async (k: string) => {
      await store.authenticateKey(k); // warm the record cache, as a serving replica is
      steps.length = 0;
      const result = await store.authenticateKey(k);
      return { result: result?.id ?? null, steps: [...steps] };
    };
    const known = await run(key);
    const wrong = await run(`egk.acme.${'0'.repeat(64)}`);
    const unknown = await run(`egk.nobody.${secret}`);
    const revoked = await run(`egk.gone.${secret}`);
    expect(known.result).toBe('acme');
    expect([wrong.result, unknown.result, revoked.result]).toEqual([null, null, null]);
    expect(known.steps).toEqual(['stat', 'hash', 'compare', 'compare', 'compare']);
    expect(wrong.steps).toEqual(known.steps);
    expect(unknown.steps).toEqual(known.steps);
    expect(revoked.steps).toEqual(known.steps);
  });
});

describe('TenantStore.rotate and re-adding a name', () => {
  it('rotates a key keeping the tenant (id, area, memory); the old key works only through its grace', async () => {
    const { store, ws } = fresh();
    const { tenant, key: first } = await store.add('acme', ws('acme'));
    mkdirSync(join(tenant.home, 'projects', 'p', 'memory'), { recursive: true });
    writeFileSync(join(tenant.home, 'projects', 'p', 'memory', 'MEMORY.md'), '- [a](a.md) kept\n');
    const now = await store.rotate('acme');
    expect(now.key).not.toBe(first);
    expect(await store.authenticate(`Bearer ${first}`)).toBeNull();
    const auth = await store.authenticate(`Bearer ${now.key}`);
    expect(auth?.id).toBe('acme');
    expect(auth?.home).toBe(tenant.home);
    expect(readFileSync(join(tenant.home, 'projects', 'p', 'memory', 'MEMORY.md'), 'utf8')).toContain('kept');
    // With a grace the old key keeps working until it ends, then is refused.
    const graced = await store.rotate('acme', { graceMs: 60_000 });
    expect((await store.authenticate(`Bearer ${now.key}`))?.id).toBe('acme');
    expect((await store.authenticate(`Bearer ${graced.key}`))?.id).toBe('acme');
    const record = join(store.root, 'acme', 'tenant.json');
    const parsed = JSON.parse(readFileSync(record, 'utf8'));
    parsed.previousKeys[0].expiresAt = new Date(Date.now() - 1).toISOString();
    writeFileSync(record, JSON.stringify(parsed));
    expect(await store.authenticate(`Bearer ${now.key}`)).toBeNull();
    expect((await store.authenticate(`Bearer ${graced.key}`))?.id).toBe('acme');
    // Revocation ends every key, graced ones too; a revoked tenant is not rotated.
    const again = await store.rotate('acme', { graceMs: 60_000 });
    await store.revoke('acme');
    expect(await store.authenticate(`Bearer ${again.key}`)).toBeNull();
    expect(await store.authenticate(`Bearer ${graced.key}`)).toBeNull();
    await expect(store.rotate('acme')).rejects.toMatchObject({ code: 'TENANT_REVOKED' });
    await expect(store.rotate('nobody')).rejects.toMatchObject({ code: 'TENANT_NOT_FOUND' });
  });

  it('renews the team sync credential with the API key: the old one refused at once, or after the same grace', async () => {
    const { store, ws } = fresh();
    await store.add('acme', ws('acme'));
    const team = (key: string) => store.authenticateKey(key, { teamSync: true });
    const first = await store.teamSyncKey('acme');
    expect((await team(first))?.id).toBe('acme'); // positive control: the issued credential works
    // A rotation with no grace: the old credential stops at once, the new one (what the workers read) works.
    await store.rotate('acme');
    const second = await store.teamSyncKey('acme');
    expect(second).not.toBe(first);
    expect(second).toMatch(/^egt\.acme\.[0-9a-f]{64}$/);
    expect(await team(first)).toBeNull();
    expect((await team(second))?.id).toBe('acme');
    // With a grace, the replaced credential keeps working until the grace ends (a worker's request in flight).
    await store.rotate('acme', { graceMs: 60_000 });
    const third = await store.teamSyncKey('acme');
    expect((await team(second))?.id).toBe('acme');
    expect((await team(third))?.id).toBe('acme');
    const previous = join(store.secretsRoot, 'acme', 'team-sync.key.previous');
    const held = JSON.parse(readFileSync(previous, 'utf8'));
    writeFileSync(previous, JSON.stringify({ ...held, expiresAt: new Date(Date.now() - 1).toISOString() }));
    expect(await team(second)).toBeNull();
    expect((await team(third))?.id).toBe('acme');
    // Revocation ends both.
    await store.rotate('acme', { graceMs: 60_000 });
    const fourth = await store.teamSyncKey('acme').catch(() => undefined);
    await store.revoke('acme');
    expect(await team(third)).toBeNull();
    if (fourth) expect(await team(fourth)).toBeNull();
  });

  it('re-adds a revoked name: empty memory and a fresh team scope by default, the old memory with reuseMemoryOf', async () => {
    const { store, ws, base } = fresh();
    const { tenant, key } = await store.add('acme', ws('acme'));
    const memory = join(tenant.home, 'projects', 'p', 'memory');
    mkdirSync(memory, { recursive: true });
    writeFileSync(join(memory, 'MEMORY.md'), '- [a](a.md) old\n');
    const oldTeamKey = await store.teamSyncKey('acme');
    expect(tenant.teamScope).toBe('acme');
    await expect(store.add('acme', ws('acme'))).rejects.toMatchObject({ code: 'TENANT_EXISTS' });
    await store.revoke('acme');
    // Re-added without reuse: starts empty; the old tenant is kept whole under tenants-retired/.
    const fresh1 = await store.add('acme', ws('acme'));
    expect(existsSync(join(fresh1.tenant.home, 'projects'))).toBe(false);
    expect(fresh1.tenant.teamScope).toMatch(/^acme\.[0-9a-f]{16}$/);
    expect(await store.authenticate(`Bearer ${key}`)).toBeNull();
    expect((await store.authenticate(`Bearer ${fresh1.key}`))?.id).toBe('acme');
    expect(await store.teamSyncKey('acme')).not.toBe(oldTeamKey);
    expect(await store.authenticate(`Bearer ${oldTeamKey}`, { teamSync: true })).toBeNull();
    const { readdirSync } = await import('node:fs');
    const retired = readdirSync(join(base, 'home', 'tenants-retired'));
    expect(retired).toHaveLength(1);
    expect(
      readFileSync(
        join(base, 'home', 'tenants-retired', retired[0]!, 'home', 'projects', 'p', 'memory', 'MEMORY.md'),
        'utf8',
      ),
    ).toContain('old');
    // A new tenant (another name) on that workspace takes over a revoked tenant's memory only when asked.
    await store.revoke('acme');
    const bad = store.add('acme2', ws('other'), { reuseMemoryOf: 'acme' });
    await expect(bad).rejects.toMatchObject({ code: 'TENANT_WORKSPACE_INVALID' });
    const live = await store.add('live', ws('live'));
    await expect(store.add('x', ws('live2'), { reuseMemoryOf: live.tenant.id })).rejects.toMatchObject({
      code: 'TENANT_POLICY_INVALID',
    });
    writeFileSync(join(fresh1.tenant.home, 'note.txt'), 'second life');
    const adopted = await store.add('acme2', ws('acme'), { reuseMemoryOf: 'acme' });
    expect(readFileSync(join(adopted.tenant.home, 'note.txt'), 'utf8')).toBe('second life');
    expect(adopted.tenant.teamScope).toBe(fresh1.tenant.teamScope);
    expect(existsSync(join(store.root, 'acme', 'home'))).toBe(false);
  });
});

describe('TenantTeamStores', () => {
  it("keeps a tenant's memory-store bindings beside its record: set, unset, resolve, refusals", async () => {
    const { store, ws } = fresh();
    await store.add('acme', ws('acme'));
    const bindings = new TenantTeamStores(store);
    expect(await bindings.get('acme')).toEqual({});
    const at = new Date('2026-12-02T10:00:00.000Z');
    const set = await bindings.change(
      'acme',
      { set: { 'Acme/Widgets': 'memstore_abc', '*': 'memstore_all' } },
      at,
    );
    expect(set).toEqual({
      '*': { storeId: 'memstore_all', boundAt: at.toISOString() },
      'acme/widgets': { storeId: 'memstore_abc', boundAt: at.toISOString() },
    });
    // Beside the record, outside the tenant's ENGRAM_HOME (no tool of the tenant reaches it), mode 0600.
    expect(bindings.path('acme')).toBe(join(store.root, 'acme', 'team-stores.json'));
    expect(statSync(bindings.path('acme')).mode & 0o777).toBe(0o600);
    expect(teamStoreFor(set, 'ACME/widgets')).toEqual({ key: 'acme/widgets', storeId: 'memstore_abc' });
    expect(teamStoreFor(set, 'acme/other')).toEqual({ key: '*', storeId: 'memstore_all' });
    expect(teamStoreFor({}, 'acme/other')).toBeUndefined();
    expect(await bindings.change('acme', { unset: ['*'] })).toEqual({ 'acme/widgets': set['acme/widgets'] });

    const refused = async (p: Promise<unknown>) => ((await p.catch((e) => e)) as TenantError).code;
    expect(await refused(bindings.change('acme', { set: { 'not a repo': 'memstore_abc' } }))).toBe(
      'TENANT_BINDING_INVALID',
    );
    expect(await refused(bindings.change('acme', { set: { 'a/b': 'mem_abc' } }))).toBe(
      'TENANT_BINDING_INVALID',
    );
    expect(await refused(bindings.change('acme', { set: { '../b': 'memstore_abc' } }))).toBe(
      'TENANT_BINDING_INVALID',
    );
    expect(await refused(bindings.get('nobody'))).toBe('TENANT_NOT_FOUND');
    // A corrupt file is an error, never "no bindings" (which would switch the tenant to the seed protocol).
    writeFileSync(bindings.path('acme'), '{"version":1,"bindings":{"acme/widgets":"memstore_abc"}}');
    expect(await refused(bindings.get('acme'))).toBe('TENANT_BINDING_INVALID');
    // A revoked tenant's bindings are kept but cannot change.
    await store.revoke('acme');
    expect(await refused(bindings.change('acme', { set: { 'a/b': 'memstore_x' } }))).toBe('TENANT_NOT_FOUND');
  });

  it('a tenant taking over a revoked tenant’s memory takes its bindings too; a fresh one starts without', async () => {
    const { store, ws } = fresh();
    await store.add('acme', ws('acme'));
    const bindings = new TenantTeamStores(store);
    await bindings.change('acme', { set: { 'acme/widgets': 'memstore_abc' } });
    await store.revoke('acme');
    await store.add('acme', ws('acme'), { reuseMemoryOf: 'acme' });
    expect(teamStoreFor(await bindings.get('acme'), 'acme/widgets')?.storeId).toBe('memstore_abc');
    await store.revoke('acme');
    await store.add('acme', ws('acme'));
    expect(await bindings.get('acme')).toEqual({});
  });
});
