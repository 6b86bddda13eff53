import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { createExclusive, writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { z } from 'zod';

// Tenants of the hosted service and their API keys. Every replica sees them because they live on the shared
// ENGRAM_HOME volume, next to the transcripts the replicas already share (a queue engine such as Redis may
// be run without persistence; a tenant must survive its restart):
//
//   $ENGRAM_HOME/tenants/<id>/tenant.json   the record: name, workspace root, policy, sha256 of the key
//   $ENGRAM_HOME/tenants/<id>/home/         the tenant's own ENGRAM_HOME: projects/<p>/memory, transcripts,
//                                           session memory, tool results — never shared with another tenant
//   $ENGRAM_HOME/tenants/<id>/sessions/     one record per API session (its cwd), see the agent's server
//   $ENGRAM_HOME/tenants/<id>/team-sync.key the tenant's team sync credential, made on first use by a worker
//
// A key is `egk.<tenant id>.<64 hex>`: the id says which record to read, the secret is compared with the
// stored hash in constant time. The key is shown once, when the tenant is added or its key rotated; only the
// hash is stored. A record is read on every authentication, so a revocation holds on every replica at once.

export const TENANT_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Tools a served turn may use unattended; request options can only remove from this set. */
export const SERVED_TOOLS = ['Read', 'Grep', 'Glob', 'Write', 'Edit', 'Bash'] as const;
export type ServedTool = (typeof SERVED_TOOLS)[number];
/** Default policy: read the workspace and keep memory; no writes to the workspace, no shell. */
export const DEFAULT_TENANT_TOOLS: readonly ServedTool[] = ['Read', 'Grep', 'Glob'];

const tenantRecord = z.object({
  version: z.literal(1),
  id: z.string().regex(TENANT_ID_PATTERN),
  /** Real path of the workspace root every session's cwd must resolve inside. */
  workspace: z.string().refine(isAbsolute),
  createdAt: z.iso.datetime(),
  revokedAt: z.iso.datetime().optional(),
  /** sha256 (hex) of the key's secret part. */
  keyHash: z.string().regex(/^[0-9a-f]{64}$/),
  policy: z.object({
    /** Tools allowed unattended (memory-directory writes are always allowed; secrets into team memory never). */
    allowedTools: z.array(z.enum(SERVED_TOOLS)),
  }),
});
export type TenantRecord = z.infer<typeof tenantRecord>;

export interface Tenant {
  id: string;
  workspace: string;
  createdAt: string;
  allowedTools: ReadonlySet<ServedTool>;
  /** The tenant's private ENGRAM_HOME (memory, transcripts, session memory). */
  home: string;
  /** Where the tenant's API session records live. */
  sessionsDir: string;
}

export type TenantSummary = Omit<TenantRecord, 'keyHash' | 'version'>;

export class TenantError extends Error {
  constructor(
    readonly code:
      | 'TENANT_INVALID_NAME'
      | 'TENANT_EXISTS'
      | 'TENANT_NOT_FOUND'
      | 'TENANT_WORKSPACE_INVALID'
      | 'TENANT_WORKSPACE_OVERLAP'
      | 'TENANT_POLICY_INVALID',
    message: string,
  ) {
    super(message);
    this.name = 'TenantError';
  }
}

const KEY_PATTERN = /^egk\.([a-z0-9][a-z0-9-]{0,62})\.([0-9a-f]{64})$/;
const TEAM_SYNC_KEY_PATTERN = /^egt\.([a-z0-9][a-z0-9-]{0,62})\.([0-9a-f]{64})$/;

/** Where a tenant's team sync credential lives (outside its home area: never visible to its turns). */
export const TEAM_SYNC_KEY_FILENAME = 'team-sync.key';

export interface AuthenticateOptions {
  /**
   * Also accept the tenant's team sync credential (`egt.…`): only the team memory routes do. It is what the
   * workers present when they sync a tenant's `memory/team/`, so no deployment-wide key is needed.
   */
  teamSync?: boolean;
}

function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

function isWithinOrEqual(child: string, parent: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel) && rel.split(sep)[0] !== '..');
}

export function tenantsRoot(engramHome: string): string {
  return join(resolve(engramHome), 'tenants');
}

/** The tenant's private ENGRAM_HOME: what workers resolve a tenant job's paths under. */
export function tenantHomeDir(engramHome: string, tenantId: string): string {
  if (!TENANT_ID_PATTERN.test(tenantId)) throw new Error(`invalid tenant id ${JSON.stringify(tenantId)}`);
  return join(tenantsRoot(engramHome), tenantId, 'home');
}

/**
 * A listing of the tenants root taken less than this long after the root last changed is not cached: a
 * tenant being added has its directory before its record, and a second change within the timestamp's
 * granularity would not move the mtime again (the same rule git applies to its "racily clean" index).
 */
const SETTLE_MS = 2_000;

export interface TenantWorkspace {
  id: string;
  workspace: string;
}

export class TenantStore {
  readonly root: string;

  private workspaceCache: { stamp: string; workspaces: readonly TenantWorkspace[] } | undefined;
  /** Parsed tenant records for `authenticateKey`, each valid while its file's stat is unchanged. */
  private readonly recordCache = new Map<string, { stamp: string; record: TenantRecord }>();

  constructor(engramHome: string) {
    this.root = tenantsRoot(engramHome);
  }

  private recordPath(id: string): string {
    return join(this.root, id, 'tenant.json');
  }

  private toTenant(record: TenantRecord): Tenant {
    return {
      id: record.id,
      workspace: record.workspace,
      createdAt: record.createdAt,
      allowedTools: new Set(record.policy.allowedTools),
      home: join(this.root, record.id, 'home'),
      sessionsDir: join(this.root, record.id, 'sessions'),
    };
  }

  private async read(id: string): Promise<TenantRecord | undefined> {
    if (!TENANT_ID_PATTERN.test(id)) return undefined;
    let raw: string;
    try {
      raw = await fs.readFile(this.recordPath(id), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    const parsed = tenantRecord.safeParse(JSON.parse(raw));
    if (!parsed.success) throw new Error(`${this.recordPath(id)} is not a valid tenant record`);
    return parsed.data;
  }

  /**
   * `read` for every authenticated request: one `stat` of the record once warm. The parsed record is kept while
   * the file's identity and times are unchanged and settled (SETTLE_MS); `revoke` and `add` replace the file
   * (a new inode), so a revocation is seen by the next request on every replica.
   */
  private async readCached(id: string): Promise<TenantRecord | undefined> {
    if (!TENANT_ID_PATTERN.test(id)) return undefined;
    const st = await fs.stat(this.recordPath(id), { bigint: true }).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    if (!st) {
      this.recordCache.delete(id);
      return undefined;
    }
    const stamp = `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    const cached = this.recordCache.get(id);
    if (cached?.stamp === stamp) return cached.record;
    const record = await this.read(id);
    const settled = Date.now() - Number(st.mtimeMs) > SETTLE_MS;
    if (record && settled) this.recordCache.set(id, { stamp, record });
    else this.recordCache.delete(id);
    return record;
  }

  /**
   * Creates tenant `name` owning `workspace` (an existing directory; stored as its real path). Workspaces of
   * live tenants never nest or coincide, so a project (and its queue state) belongs to one tenant. Returns the
   * API key — the only time it exists outside the caller's hands.
   */
  async add(
    name: string,
    workspace: string,
    options: { allowedTools?: readonly string[] } = {},
  ): Promise<{ tenant: Tenant; key: string }> {
    if (!TENANT_ID_PATTERN.test(name)) {
      throw new TenantError(
        'TENANT_INVALID_NAME',
        `Tenant name ${JSON.stringify(name)} is invalid: use 1–63 characters of a-z, 0-9 and -, starting with a letter or digit.`,
      );
    }
    const tools = options.allowedTools ?? DEFAULT_TENANT_TOOLS;
    const unknown = tools.filter((t) => !(SERVED_TOOLS as readonly string[]).includes(t));
    if (unknown.length > 0) {
      throw new TenantError(
        'TENANT_POLICY_INVALID',
        `Unknown tool(s) ${unknown.join(', ')}; a tenant may be allowed ${SERVED_TOOLS.join(', ')}.`,
      );
    }
    let real: string;
    try {
      real = await fs.realpath(resolve(workspace));
      if (!(await fs.stat(real)).isDirectory()) throw new Error('not a directory');
    } catch (error) {
      throw new TenantError(
        'TENANT_WORKSPACE_INVALID',
        `Workspace ${workspace} is not an existing directory (${(error as Error).message}). Create it first.`,
      );
    }
    if (real === '/') {
      throw new TenantError('TENANT_WORKSPACE_INVALID', 'The filesystem root cannot be a tenant workspace.');
    }
    for (const other of await this.list()) {
      if (other.revokedAt) continue;
      if (isWithinOrEqual(real, other.workspace) || isWithinOrEqual(other.workspace, real)) {
        throw new TenantError(
          'TENANT_WORKSPACE_OVERLAP',
          `Workspace ${real} overlaps tenant ${other.id}'s workspace ${other.workspace}; give each tenant its own directory.`,
        );
      }
    }
    const secret = randomBytes(32).toString('hex');
    const record: TenantRecord = {
      version: 1,
      id: name,
      workspace: real,
      createdAt: new Date().toISOString(),
      keyHash: hashSecret(secret),
      policy: { allowedTools: [...new Set(tools as ServedTool[])] },
    };
    await fs.mkdir(this.root, { recursive: true, mode: 0o700 });
    const created = await createExclusive(this.recordPath(name), `${JSON.stringify(record, null, 2)}\n`, {
      mode: 0o600,
      dirMode: 0o700,
    });
    if (!created) {
      throw new TenantError(
        'TENANT_EXISTS',
        `Tenant ${name} already exists (revoked tenants keep their name).`,
      );
    }
    const tenant = this.toTenant(record);
    await fs.mkdir(tenant.home, { recursive: true, mode: 0o700 });
    await fs.mkdir(tenant.sessionsDir, { recursive: true, mode: 0o700 });
    return { tenant, key: `egk.${name}.${secret}` };
  }

  async list(): Promise<TenantSummary[]> {
    let names: string[];
    try {
      names = await fs.readdir(this.root);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const out: TenantSummary[] = [];
    for (const name of names.sort()) {
      const record = await this.read(name).catch(() => undefined);
      if (!record) continue;
      const { keyHash: _hash, version: _version, ...summary } = record;
      out.push(summary);
    }
    return out;
  }

  /**
   * Every tenant's workspace, revoked tenants' too (their files stay), so served turns can hide them from each
   * other. One `stat` of the tenants root per call once warm: the listing (one record read per tenant) is
   * cached and taken again when the root changes — `tenants add` creates a directory in it, so a tenant
   * added by the CLI while `engram serve` runs is hidden from the next turn on. Workspaces never change
   * after `add`, and revocation is enforced by `authenticate` (which checks the record's stat every time).
   */
  async workspaces(): Promise<readonly TenantWorkspace[]> {
    const st = await fs.stat(this.root, { bigint: true }).catch(() => undefined);
    if (!st) return [];
    const stamp = `${st.ino}:${st.mtimeNs}:${st.ctimeNs}:${st.nlink}`;
    const settled = Date.now() - Number(st.mtimeMs) > SETTLE_MS;
    if (settled && this.workspaceCache?.stamp === stamp) return this.workspaceCache.workspaces;
    const workspaces = (await this.list()).map(({ id, workspace }) => ({ id, workspace }));
    this.workspaceCache = settled ? { stamp, workspaces } : undefined;
    return workspaces;
  }

  /** Revokes the tenant's key at once on every replica. Its files stay (delete them yourself if wanted). */
  async revoke(id: string): Promise<TenantSummary> {
    const record = await this.read(id);
    if (!record)
      throw new TenantError(
        'TENANT_NOT_FOUND',
        `No tenant ${JSON.stringify(id)}; see \`engram tenants list\`.`,
      );
    const revoked: TenantRecord = { ...record, revokedAt: record.revokedAt ?? new Date().toISOString() };
    await writeFileAtomic(this.recordPath(id), `${JSON.stringify(revoked, null, 2)}\n`, { mode: 0o600 });
    const { keyHash: _hash, version: _version, ...summary } = revoked;
    return summary;
  }

  /**
   * The tenant's team sync credential, created (exclusively, mode 0600) on first use. Workers present it to
   * the team memory service when they pull or push the tenant's `memory/team/`: each tenant syncs with its
   * own credential, which the service accepts for the team memory routes only (`authenticate` with
   * `teamSync`), never for `/v1`. Refused for an unknown or revoked tenant.
   */
  async teamSyncKey(id: string): Promise<string> {
    const record = await this.read(id);
    if (!record || record.revokedAt) {
      throw new TenantError(
        'TENANT_NOT_FOUND',
        `No active tenant ${JSON.stringify(id)} (unknown or revoked); its team memory is not synced.`,
      );
    }
    const path = join(this.root, id, TEAM_SYNC_KEY_FILENAME);
    const fresh = `egt.${id}.${randomBytes(32).toString('hex')}`;
    if (await createExclusive(path, `${fresh}\n`, { mode: 0o600, dirMode: 0o700 })) return fresh;
    const stored = (await fs.readFile(path, 'utf8')).trim();
    if (!TEAM_SYNC_KEY_PATTERN.test(stored) || TEAM_SYNC_KEY_PATTERN.exec(stored)?.[1] !== id) {
      throw new Error(`${path} does not hold a team sync key of tenant ${id}; delete it to make a new one.`);
    }
    return stored;
  }

  private async authenticateTeamSyncKey(key: string): Promise<Tenant | null> {
    const match = TEAM_SYNC_KEY_PATTERN.exec(key);
    if (!match) return null;
    const id = match[1]!;
    const record = await this.read(id).catch(() => undefined);
    if (!record || record.revokedAt) return null;
    const stored = await fs.readFile(join(this.root, id, TEAM_SYNC_KEY_FILENAME), 'utf8').then(
      (t) => t.trim(),
      () => undefined,
    );
    if (!stored) return null;
    const given = Buffer.from(hashSecret(key), 'hex');
    const expected = Buffer.from(hashSecret(stored), 'hex');
    return timingSafeEqual(given, expected) ? this.toTenant(record) : null;
  }

  /** The tenant a key belongs to, or null for a malformed, unknown, wrong or revoked key. */
  async authenticateKey(key: string, options: AuthenticateOptions = {}): Promise<Tenant | null> {
    if (options.teamSync && key.startsWith('egt.')) return this.authenticateTeamSyncKey(key);
    const match = KEY_PATTERN.exec(key);
    if (!match) return null;
    const record = await this.readCached(match[1]!).catch(() => undefined);
    if (!record || record.revokedAt) return null;
    const given = Buffer.from(hashSecret(match[2]!), 'hex');
    const stored = Buffer.from(record.keyHash, 'hex');
    if (given.length !== stored.length || !timingSafeEqual(given, stored)) return null;
    return this.toTenant(record);
  }

  /** `authenticate(req.headers.authorization)`: Bearer scheme only; anything else → null. */
  async authenticate(
    authorizationHeader: string | undefined | null,
    options: AuthenticateOptions = {},
  ): Promise<Tenant | null> {
    if (!authorizationHeader) return null;
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(authorizationHeader);
    if (!match) return null;
    return this.authenticateKey(match[1]!, options);
  }
}

/**
 * The real path of `cwd` if it is the tenant's workspace or a directory inside it, else undefined. Symlinks
 * are resolved first (a link inside the workspace pointing out of it is outside); a path that does not exist
 * or is not a directory is refused.
 */
export async function resolveTenantCwd(
  tenant: Pick<Tenant, 'workspace'>,
  cwd: string,
): Promise<string | undefined> {
  if (!isAbsolute(cwd) || cwd.includes('\0')) return undefined;
  try {
    const real = await fs.realpath(cwd);
    if (!(await fs.stat(real)).isDirectory()) return undefined;
    const root = await fs.realpath(tenant.workspace);
    return isWithinOrEqual(real, root) ? real : undefined;
  } catch {
    return undefined;
  }
}
