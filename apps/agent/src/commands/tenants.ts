import { mkdir } from 'node:fs/promises';
import {
  checkStoreForBinding,
  createTeamStore,
  StoreBindingError,
} from '@engram/team-memory/client/store-binding';
import { memoryStoreClient } from '@engram/team-memory/client/store-sync';
import { bindingKey, type TeamStoreBindings, TenantTeamStores } from '@engram/tenants/team-stores';
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
    if (action.kind === 'stores') return await storesCommand(config, store, action, io);
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
    if (error instanceof TenantError || error instanceof StoreBindingError) {
      io.err(`engram tenants: ${error.message}`);
      return error instanceof StoreBindingError && error.retryable ? EXIT.failure : EXIT.usage;
    }
    throw error;
  }
}

/**
 * `engram tenants stores NAME` lists the tenant's memory-store bindings for team sync;
 * `… set owner/name=memstore_… [*=memstore_…]`, `… unset owner/name|*`, `… create owner/name` change them.
 * Every store is checked first against the store service the workers sync with (ENGRAM_TEAM_SYNC_URL), as the
 * tenant (its team sync credential): a store that is not the tenant's own — another tenant's, an unknown id,
 * an archived one — is refused and nothing is written.
 */
async function storesCommand(
  config: AgentConfig,
  tenants: TenantStore,
  action: { name: string; args: string[]; json: boolean },
  io: Output,
): Promise<number> {
  const bindings = new TenantTeamStores(tenants);
  const [verb, ...rest] = action.args;
  const show = (b: TeamStoreBindings) => {
    if (action.json) {
      io.out(JSON.stringify({ tenant: action.name, bindings: b }, null, 2));
      return;
    }
    const entries = Object.entries(b);
    if (entries.length === 0)
      io.out(
        `Tenant ${action.name} has no memory-store bindings: its team memory syncs with the team-memory protocol.`,
      );
    for (const [repo, { storeId, boundAt }] of entries) io.out(`${repo}\t${storeId}\t${boundAt}`);
  };
  if (verb === undefined) {
    show(await bindings.get(action.name));
    return EXIT.ok;
  }
  const usage = () => {
    io.err(
      'engram tenants stores NAME [set owner/name=memstore_… …] [unset owner/name …] [create owner/name …] (* stands for every repository)',
    );
    return EXIT.usage;
  };
  if (!['set', 'unset', 'create'].includes(verb) || rest.length === 0) return usage();
  if (verb === 'unset') {
    show(await bindings.change(action.name, { unset: rest }));
    return EXIT.ok;
  }
  const url = config.teamSync?.url;
  if (!url) {
    io.err(
      'engram tenants: a binding is checked against the memory store service the workers sync with: set ENGRAM_TEAM_SYNC_URL to it (this deployment: its engram serve).',
    );
    return EXIT.usage;
  }
  const tenant = await tenants.find(action.name);
  if (!tenant || tenant.revokedAt)
    throw new TenantError(
      'TENANT_NOT_FOUND',
      `No active tenant ${JSON.stringify(action.name)} (unknown or revoked); its bindings are not changed.`,
    );
  // As the tenant: the credential its team-sync jobs present, so the check is the one its syncs will meet.
  const client = memoryStoreClient({
    baseUrl: url,
    apiKey: await tenants.teamSyncKey(action.name),
    maxRetries: 1,
  });
  const set: Record<string, string> = {};
  if (verb === 'set') {
    for (const arg of rest) {
      const eq = arg.indexOf('=');
      if (eq <= 0) return usage();
      const repo = bindingKey(arg.slice(0, eq));
      const store = await checkStoreForBinding(client, arg.slice(eq + 1), action.name);
      set[repo] = store.id;
      io.err(`${repo} → ${store.id} (${store.name})`);
    }
  } else {
    for (const arg of rest) {
      const repo = bindingKey(arg);
      if (repo === '*') return usage();
      const store = await createTeamStore(client, repo);
      set[repo] = store.id;
      io.err(`${repo} → ${store.id} (${store.name}, created)`);
    }
  }
  show(await bindings.change(action.name, { set }));
  return EXIT.ok;
}
