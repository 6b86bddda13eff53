import { PermanentJobError } from '@engram/queue/worker';
import { type TeamProtocol, teamProtocolFor } from '@engram/team-memory/client/protocol';
import { TenantTeamStores, teamStoreFor } from '@engram/tenants/team-stores';
import { TenantError, TenantStore } from '@engram/tenants/tenant-store';
import type { WorkersConfig } from '../config.js';

// Which protocol a team-sync job's project uses, and where that choice comes from (docs/memory-stores.md
// "Per-tenant bindings"). The tenant is the job's own (set from the authenticated request that made it, never
// from model output); a store belongs to one tenant, so:
// - a hosted tenant's job: the tenant's bindings (`engram tenants stores`), else the seed protocol;
// - a job without a tenant (the operator's sessions): the deployment's ENGRAM_TEAM_MEMORY_STORE.
// A tenant job for a repository the deployment binding names, with no binding of the tenant's own, fails
// permanently saying so: the deployment's store is not the tenant's, and switching the repository to the seed
// protocol unasked would send its team memory to another service.

export interface ResolvedTeamProtocol {
  protocol: TeamProtocol;
  /** `tenant`: the tenant's binding; `deployment`: ENGRAM_TEAM_MEMORY_STORE; `none`: nothing binds it. */
  source: 'tenant' | 'deployment' | 'none';
  /** The binding's key: the repository or `*` (tenant), `owner/name` or `all` (deployment). */
  binding?: string;
}

export async function teamProtocolForJob(
  config: Pick<WorkersConfig, 'engramHome' | 'teamSync'>,
  payload: { tenant?: string | undefined; repo: string },
): Promise<ResolvedTeamProtocol> {
  const deployment = config.teamSync?.stores;
  if (!payload.tenant) {
    const protocol = teamProtocolFor(deployment, payload.repo);
    if (protocol.kind === 'team-memory') return { protocol, source: 'none' };
    const named = deployment?.byRepo[payload.repo.toLowerCase()] !== undefined;
    return { protocol, source: 'deployment', binding: named ? payload.repo.toLowerCase() : 'all' };
  }
  let bound: { key: string; storeId: string } | undefined;
  try {
    bound = teamStoreFor(
      await new TenantTeamStores(new TenantStore(config.engramHome)).get(payload.tenant),
      payload.repo,
    );
  } catch (error) {
    if (error instanceof TenantError) throw new PermanentJobError(error.code, error.message);
    throw error;
  }
  if (bound)
    return {
      protocol: { kind: 'memory-store', storeId: bound.storeId },
      source: 'tenant',
      binding: bound.key,
    };
  if (teamProtocolFor(deployment, payload.repo).kind === 'memory-store')
    throw new PermanentJobError(
      'TEAM_STORE_NOT_BOUND_FOR_TENANT',
      `ENGRAM_TEAM_MEMORY_STORE binds ${payload.repo} for jobs without a tenant only; tenant ${payload.tenant} has no memory store bound for it. Bind one of its own stores (engram tenants stores ${payload.tenant} set ${payload.repo}=memstore_…, or create …).`,
    );
  return { protocol: { kind: 'team-memory' }, source: 'none' };
}
