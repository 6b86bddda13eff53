import { mkdir } from 'node:fs/promises';
import { TenantError, TenantStore } from '@engram/tenants/tenant-store';
import type { AgentConfig } from '../config.js';
import { EXIT, type Output } from './output.js';

// `engram tenants add|list|revoke|rotate|stores`: the hosted service's tenants, on the shared ENGRAM_HOME.

/** `30s`, `10m`, `1h`, `2d` (or plain seconds) → milliseconds; undefined when malformed. */
export function parseGrace(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(s|m|h|d)?$/.exec(text.trim());
  if (!m) return undefined;
  const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
  return Math.round(Number(m[1]) * unit);
}

export async function tenantsCommand(
  config: AgentConfig,
  action:
    | {
        kind: 'add';
        name: string;
        workspace: string;
        allowedTools?: string[];
        create?: boolean;
        reuseMemoryOf?: string;
      }
    | { kind: 'rotate'; name: string; grace?: string }
    | { kind: 'list'; json: boolean }
    | { kind: 'revoke'; name: string }
    | { kind: 'stores'; name: string; args: string[]; json: boolean },
  io: Output,
): Promise<number> {
  const store = new TenantStore(config.engramHome);
  try {
    // Its own module, loaded only for it: the SDK client stays out of `tenants add|list|revoke|rotate`.
    if (action.kind === 'stores')
      return await (await import('./tenant-stores.js')).tenantStoresCommand(config, store, action, io);
    if (action.kind === 'add') {
      // `--create`: a fresh host (or compose volume) has no workspace directory yet; the store still takes
      // only an existing directory, so without the flag a mistyped path is an error, not a new directory.
      if (action.create) await mkdir(action.workspace, { recursive: true });
      const { tenant, key } = await store.add(action.name, action.workspace, {
        ...(action.allowedTools ? { allowedTools: action.allowedTools } : {}),
        ...(action.reuseMemoryOf ? { reuseMemoryOf: action.reuseMemoryOf } : {}),
      });
      if (action.reuseMemoryOf) io.err(`Took over the memory of revoked tenant ${action.reuseMemoryOf}.`);
      io.err(
        `Tenant ${tenant.id}: workspace ${tenant.workspace}, tools ${[...tenant.allowedTools].join(', ') || '(none)'}.`,
      );
      io.err('Its API key follows. It is shown only this once; store it now.');
      io.out(key);
      return EXIT.ok;
    }
    if (action.kind === 'rotate') {
      const graceMs = action.grace === undefined ? 0 : parseGrace(action.grace);
      if (graceMs === undefined) {
        io.err(
          `engram tenants: --grace ${JSON.stringify(action.grace)} is not a duration (e.g. 30s, 10m, 1h, 2d).`,
        );
        return EXIT.usage;
      }
      const { tenant, key, oldKeyExpiresAt } = await store.rotate(action.name, { graceMs });
      io.err(
        graceMs > 0
          ? `Tenant ${tenant.id}: new key; the old key keeps working until ${oldKeyExpiresAt}. Memory is unchanged.`
          : `Tenant ${tenant.id}: new key; the old key is refused from now on. Memory is unchanged.`,
      );
      io.err('Its new API key follows. It is shown only this once; store it now.');
      io.out(key);
      return EXIT.ok;
    }
    if (action.kind === 'revoke') {
      const t = await store.revoke(action.name);
      io.out(`Revoked tenant ${t.id} at ${t.revokedAt}.`);
      return EXIT.ok;
    }
    const list = await store.list();
    if (action.json) {
      io.out(JSON.stringify(list, null, 2));
      return EXIT.ok;
    }
    if (list.length === 0) io.out('No tenants. Add one with `engram tenants add NAME --workspace DIR`.');
    for (const t of list) {
      io.out(
        `${t.id}\t${t.revokedAt ? 'revoked' : 'active'}\t${t.workspace}\t${t.policy.allowedTools.join(',')}\t${t.createdAt}`,
      );
    }
    return EXIT.ok;
  } catch (error) {
    if (error instanceof TenantError) {
      io.err(`engram tenants: ${error.message}`);
      return EXIT.usage;
    }
    throw error;
  }
}
