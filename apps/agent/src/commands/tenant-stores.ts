import {
  checkStoreForBinding,
  createTeamStore,
  StoreBindingError,
} from '@engram/team-memory/client/store-binding';
import { memoryStoreClient } from '@engram/team-memory/client/store-sync';
import { bindingKey, type TeamStoreBindings, TenantTeamStores } from '@engram/tenants/team-stores';
import { TenantError, type TenantStore } from '@engram/tenants/tenant-store';
import type { AgentConfig } from '../config.js';
import { EXIT, type Output } from './output.js';

// `engram tenants stores`: a hosted tenant's memory-store bindings for team sync (docs/memory-stores.md
// "Bindings: per tenant, or for the deployment").

/**
 * `engram tenants stores NAME` lists the tenant's memory-store bindings for team sync;
 * `… set owner/name=memstore_… [*=memstore_…]`, `… unset owner/name|*`, `… create owner/name` change them.
 * Every store is checked first against the store service the workers sync with (ENGRAM_TEAM_SYNC_URL), as the
 * tenant (its team sync credential): a store that is not the tenant's own — another tenant's, an unknown id,
 * an archived one — is refused and nothing is written.
 */
export async function tenantStoresCommand(
  config: AgentConfig,
  tenants: TenantStore,
  action: { name: string; args: string[]; json: boolean },
  io: Output,
): Promise<number> {
  try {
    return await stores(config, tenants, action, io);
  } catch (error) {
    // A store that is not the tenant's, or a refusal of the service: nothing was written.
    if (error instanceof TenantError || error instanceof StoreBindingError) {
      io.err(`engram tenants: ${error.message}`);
      return error.retryable ? EXIT.failure : EXIT.usage;
    }
    throw error;
  }
}

async function stores(
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
