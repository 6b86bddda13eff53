import { existsSync, mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
