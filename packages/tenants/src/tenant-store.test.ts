import {
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
import { resolveTenantCwd, type TenantError, TenantStore } from './tenant-store.js';

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
    expect(statSync(join(store.root, 'acme', 'team-sync.key')).mode & 0o777).toBe(0o600);
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
