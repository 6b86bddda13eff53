import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { TenantStore } from '@engram/tenants/tenant-store';
import { describe, expect, it } from 'vitest';
import { loadAgentConfig } from '../config.js';
import type { Output } from './output.js';
import { EXIT } from './output.js';
import { tenantsCommand } from './tenants.js';

// `engram tenants add --create` on a fresh host: the workspace directory is made, the tenant owns it; without
// the flag a missing directory is still a usage error and no tenant is added.

function capture(): Output & { lines: string[] } {
  const lines: string[] = [];
  return { lines, out: (l) => void lines.push(l), err: (l) => void lines.push(l) };
}

describe('engram tenants add', () => {
  it('creates a missing workspace with --create, and refuses it without', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-tenants-cli-'));
    const config = loadAgentConfig({ ENGRAM_HOME: home, REDIS_URL: 'redis://127.0.0.1:1' });
    // Outside ENGRAM_HOME: a workspace inside the home is refused whatever the flag.
    const missing = join(mkdtempSync(join(tmpdir(), 'engram-tenants-ws-')), 'workspaces', 'acme');

    const refused = capture();
    expect(await tenantsCommand(config, { kind: 'add', name: 'acme', workspace: missing }, refused)).toBe(
      EXIT.usage,
    );
    expect(existsSync(missing)).toBe(false);
    expect(await new TenantStore(home).list()).toEqual([]);

    const io = capture();
    expect(
      await tenantsCommand(config, { kind: 'add', name: 'acme', workspace: missing, create: true }, io),
    ).toBe(EXIT.ok);
    const [tenant] = await new TenantStore(home).list();
    expect(tenant?.workspace).toBe(realpathSync(missing));
    expect(io.lines.at(-1)).toMatch(/\S{20,}/);
  });
});

describe('engram tenants stores', () => {
  it('lists bindings through the CLI entry point; changing one needs the store service to check it against', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-tenants-stores-'));
    const ws = mkdtempSync(join(tmpdir(), 'engram-tenants-stores-ws-'));
    await new TenantStore(home).add('acme', ws);
    const env = { PATH: process.env.PATH, HOME: home, ENGRAM_HOME: home, REDIS_URL: 'redis://127.0.0.1:1' };
    const entry = fileURLToPath(new URL('../bin/engram.ts', import.meta.url));
    const listed = await promisify(execFile)(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', entry, 'tenants', 'stores', 'acme', '--json'],
      { encoding: 'utf8', env },
    );
    expect(JSON.parse(listed.stdout)).toEqual({ tenant: 'acme', bindings: {} });

    const config = loadAgentConfig(env);
    const io = capture();
    const set: { kind: 'stores'; name: string; args: string[]; json: boolean } = {
      kind: 'stores',
      name: 'acme',
      args: ['set', 'acme/widgets=memstore_abc'],
      json: false,
    };
    expect(await tenantsCommand(config, set, io)).toBe(EXIT.usage);
    expect(io.lines.join('\n')).toMatch(/set ENGRAM_TEAM_SYNC_URL/);
    const bad = capture();
    expect(await tenantsCommand(config, { ...set, args: ['rename', 'x'] }, bad)).toBe(EXIT.usage);
    expect(bad.lines[0]).toMatch(/^engram tenants stores NAME \[set owner\/name=memstore_…/);
    const unknown = capture();
    expect(await tenantsCommand(config, { ...set, name: 'nobody', args: [] }, unknown)).toBe(EXIT.usage);
    expect(unknown.lines[0]).toMatch(/No tenant "nobody"/);
    expect(await new TenantStore(home).find('acme')).toBeDefined();
  });
});
