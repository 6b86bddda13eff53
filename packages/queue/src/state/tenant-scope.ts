// Every state key (and queue deduplication id) that is per session or per project is also per tenant: two
// hosted tenants may both have a session `s1` in a directory that sanitizes to the same name, or a project
// at the same path string in their own workspaces, and their cursors, leases and receipts must never meet.
// The tenant comes from a job's payload, which the hosted service fills from the authenticated request
// (never from the model or request fields).
//
// The operator (the CLI, `engram run`, workers serving the operator's own sessions: no tenant) is the
// "local" tenant, whose keys are the unprefixed keys Engram always wrote: local data keeps working with no
// migration. A hosted tenant's keys all start with `tenant:<id>:`; tenant ids are [a-z0-9-] and no local key
// starts with `tenant:`, so the two sets can never overlap. On a Redis Cluster the store's namespace is a
// hash tag (`{engram}`, see topologyNamespace), so a multi-key script's keys stay in one slot whatever the
// tenant part.

export interface TenantScoped {
  /** The hosted tenant, or undefined for the operator's own (local) work. */
  tenant?: string | undefined;
}

/** A project as the state store sees it: its sanitized memory directory name, in its tenant's scope. */
export type ProjectScope = string | (TenantScoped & { projectDir: string });

/** The prefix of every per-session/per-project key of `tenant` ('' for the operator). */
export function tenantKeyPrefix(tenant: string | undefined): string {
  return tenant ? `tenant:${tenant}:` : '';
}

/** `key` in the scope of `tenant`. */
export function tenantKey(tenant: string | undefined, key: string): string {
  return `${tenantKeyPrefix(tenant)}${key}`;
}

export function projectDirOf(project: ProjectScope): string {
  return typeof project === 'string' ? project : project.projectDir;
}

export function tenantOf(project: ProjectScope): string | undefined {
  return typeof project === 'string' ? undefined : project.tenant;
}

/** `key` (built from the project's directory name) in the project's tenant scope. */
export function projectKey(project: ProjectScope, build: (projectDir: string) => string): string {
  return tenantKey(tenantOf(project), build(projectDirOf(project)));
}
