import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { z } from 'zod';
import { TEAM_STORES_FILENAME, TenantError, type TenantStore } from './tenant-store.js';

// A hosted tenant's memory-store bindings for team sync (docs/memory-stores.md "Per-tenant bindings"): which
// of its repositories sync `memory/team/` through which of its own memory stores. A store belongs to one
// tenant, so the binding lives with the tenant — `tenants/<id>/team-stores.json`, beside its record, outside
// its ENGRAM_HOME (no fork or served tool of the tenant can change it) — and is set by the operator
// (`engram tenants stores`), which checks each store against the store service as that tenant first. A
// tenant's team-sync job resolves its binding here from the job's tenant (the authenticated envelope); the
// deployment's ENGRAM_TEAM_MEMORY_STORE is for jobs without a tenant.

/** A memory store id (`memstore_…`), as the Memory Stores API issues them. */
export const TEAM_STORE_ID_PATTERN = /^memstore_[A-Za-z0-9]{1,64}$/;
/** A repository as team sync names it (`owner/name`, lower case), or `*`: every repository without its own. */
export const TEAM_STORE_KEY_PATTERN = /^(\*|[a-z0-9_.-]+\/[a-z0-9_.-]+)$/;

const bindingSchema = z.object({
  storeId: z.string().regex(TEAM_STORE_ID_PATTERN),
  boundAt: z.iso.datetime(),
});
const fileSchema = z.object({
  version: z.literal(1),
  bindings: z.record(z.string().regex(TEAM_STORE_KEY_PATTERN), bindingSchema),
});

export type TeamStoreBinding = z.infer<typeof bindingSchema>;
/** Repository (`owner/name`) or `*` → the store it syncs through. */
export type TeamStoreBindings = Record<string, TeamStoreBinding>;

/** The binding for `repo`: its own, else the tenant's `*`; undefined when neither is set. */
export function teamStoreFor(
  bindings: TeamStoreBindings,
  repo: string,
): { key: string; storeId: string } | undefined {
  const key = repo.toLowerCase();
  const own = bindings[key];
  if (own) return { key, storeId: own.storeId };
  const all = bindings['*'];
  return all ? { key: '*', storeId: all.storeId } : undefined;
}

/** `Acme/Widgets` → `acme/widgets`; `*` stays; anything else is refused with a message saying what is expected. */
export function bindingKey(repo: string): string {
  const key = repo.trim().toLowerCase();
  if (!TEAM_STORE_KEY_PATTERN.test(key) || key.split('/').some((p) => p === '.' || p === '..'))
    throw new TenantError(
      'TENANT_BINDING_INVALID',
      `${JSON.stringify(repo)} is not a repository: use owner/name (as the project's origin remote names it) or *.`,
    );
  return key;
}

export class TenantTeamStores {
  constructor(private readonly tenants: TenantStore) {}

  path(id: string): string {
    return join(this.tenants.root, id, TEAM_STORES_FILENAME);
  }

  /**
   * The tenant's bindings (none: `{}`). An unknown tenant is refused; a file that does not parse is an error,
   * never "no bindings": falling back would send the tenant's team memory somewhere it was not bound to.
   */
  async get(id: string): Promise<TeamStoreBindings> {
    if (!(await this.tenants.find(id)))
      throw new TenantError(
        'TENANT_NOT_FOUND',
        `No tenant ${JSON.stringify(id)}; see \`engram tenants list\`.`,
      );
    let text: string;
    try {
      text = await fs.readFile(this.path(id), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw error;
    }
    let parsed: ReturnType<typeof fileSchema.safeParse>;
    try {
      parsed = fileSchema.safeParse(JSON.parse(text));
    } catch {
      parsed = fileSchema.safeParse(undefined);
    }
    if (!parsed.success)
      throw new TenantError(
        'TENANT_BINDING_INVALID',
        `${this.path(id)} is not a valid memory-store binding file; set the bindings again with \`engram tenants stores ${id} set …\`.`,
      );
    return parsed.data.bindings;
  }

  /**
   * Sets (`set`: repository or `*` → store id) and removes (`unset`) bindings of an active tenant, in one atomic
   * write. The caller has checked every store in `set` against the store service as this tenant.
   */
  async change(
    id: string,
    change: { set?: Record<string, string>; unset?: readonly string[] },
    now: Date = new Date(),
  ): Promise<TeamStoreBindings> {
    const tenant = await this.tenants.find(id);
    if (!tenant || tenant.revokedAt)
      throw new TenantError(
        'TENANT_NOT_FOUND',
        `No active tenant ${JSON.stringify(id)} (unknown or revoked); its bindings are not changed.`,
      );
    const bindings = { ...(await this.get(id)) };
    for (const repo of change.unset ?? []) delete bindings[bindingKey(repo)];
    for (const [repo, storeId] of Object.entries(change.set ?? {})) {
      if (!TEAM_STORE_ID_PATTERN.test(storeId))
        throw new TenantError(
          'TENANT_BINDING_INVALID',
          `${JSON.stringify(storeId)} is not a memory store id (memstore_…).`,
        );
      bindings[bindingKey(repo)] = { storeId, boundAt: now.toISOString() };
    }
    const sorted = Object.fromEntries(Object.entries(bindings).sort(([a], [b]) => (a < b ? -1 : 1)));
    await writeFileAtomic(this.path(id), `${JSON.stringify({ version: 1, bindings: sorted }, null, 2)}\n`, {
      mode: 0o600,
    });
    return sorted;
  }
}
