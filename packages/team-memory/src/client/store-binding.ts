import Anthropic from '@anthropic-ai/sdk';
import { EngramError } from '@engram/errors/engram-error';

// Checks made before a memory store is bound to a tenant's repositories (docs/memory-stores.md "Per-tenant
// bindings"), through the SDK client the tenant's team sync will use — its own credential, the workers' store
// service — so "exists and belongs to the tenant" is judged by the service that will serve the syncs: a foreign
// store id answers 404 to this tenant exactly as an unknown one does.

export type StoreBindingErrorCode =
  | 'STORE_NOT_THE_TENANTS'
  | 'STORE_ARCHIVED'
  | 'STORE_SERVICE_REFUSED'
  | 'STORE_SERVICE_UNREACHABLE';

export class StoreBindingError extends EngramError {
  declare readonly code: StoreBindingErrorCode;
  constructor(code: StoreBindingErrorCode, message: string) {
    super(code, message, { retryable: code === 'STORE_SERVICE_UNREACHABLE' });
  }
}

/** The store, when `storeId` is a live store of the tenant `client` authenticates as; else a StoreBindingError. */
export async function checkStoreForBinding(
  client: Anthropic,
  storeId: string,
  tenant: string,
): Promise<{ id: string; name: string }> {
  let store: Awaited<ReturnType<Anthropic['beta']['memoryStores']['retrieve']>>;
  try {
    store = await client.beta.memoryStores.retrieve(storeId);
  } catch (error) {
    if (error instanceof Anthropic.NotFoundError)
      throw new StoreBindingError(
        'STORE_NOT_THE_TENANTS',
        `${storeId} is not a memory store of tenant ${tenant}: the store service answered 404 to the tenant's own credential (another tenant's store, or no such store). Bind one of ${tenant}'s stores (\`engram tenants stores ${tenant} create owner/name\` makes one).`,
      );
    if (error instanceof Anthropic.AuthenticationError || error instanceof Anthropic.PermissionDeniedError)
      throw new StoreBindingError(
        'STORE_SERVICE_REFUSED',
        `The store service refused tenant ${tenant}'s team sync credential (${error.status}); is ENGRAM_TEAM_SYNC_URL this deployment's engram serve, and is the tenant active?`,
      );
    if (error instanceof Anthropic.APIError && error.status !== undefined && error.status < 500)
      throw new StoreBindingError(
        'STORE_SERVICE_REFUSED',
        `The store service refused the check: ${error.message}`,
      );
    throw new StoreBindingError(
      'STORE_SERVICE_UNREACHABLE',
      `Cannot check ${storeId} against the store service: ${(error as Error).message}`,
    );
  }
  if (store.archived_at)
    throw new StoreBindingError(
      'STORE_ARCHIVED',
      `${storeId} (${store.name}) is archived: it takes no writes, so team sync through it cannot push. Bind a live store.`,
    );
  return { id: store.id, name: store.name };
}

/** A new store of the tenant for `repo`'s team memory (named for it), made with the tenant's credential. */
export async function createTeamStore(
  client: Anthropic,
  repo: string,
): Promise<{ id: string; name: string }> {
  const store = await client.beta.memoryStores.create({
    name: `team memory ${repo}`,
    description: `memory/team/ of ${repo}, synced by Engram's workers`,
    metadata: { repository: repo, created_by: 'engram tenants stores' },
  });
  return { id: store.id, name: store.name };
}
