import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { promises as fs, statSync } from 'node:fs';
import { basename, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
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
//   $ENGRAM_HOME/tenants/<id>/team-stores.json  the tenant's memory-store bindings for team sync (team-stores.ts)
//   $ENGRAM_HOME/secrets/tenants/<id>/team-sync.key  the tenant's team sync credential (0600, directories
//                                           0700), made on first use by a worker. Outside every tenant's area
//                                           and workspace, so no fork or served tool of any tenant can read it;
//                                           a key left at the old place (tenants/<id>/team-sync.key) is moved
//                                           here on first use or by `migrateSecrets`.
//   $ENGRAM_HOME/tenants-retired/<id>.<t>/  a revoked tenant whose name was added again (kept, never deleted)
//
// A key is `egk.<tenant id>.<64 hex>`: the id says which record to read, the secret is compared with the
// stored hash in constant time. The key is shown once, when the tenant is added or its key rotated; only the
// hash is stored. A record is read on every authentication, so a revocation holds on every replica at once.

export const TENANT_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Keys of earlier rotations still inside their grace; a rotation beyond this drops the oldest at once. */
const MAX_PREVIOUS_KEYS = 2;

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
  /** Keys replaced by `rotate` that still work until `expiresAt` (the rotation's grace). */
  previousKeys: z
    .array(z.object({ keyHash: z.string().regex(/^[0-9a-f]{64}$/), expiresAt: z.iso.datetime() }))
    .max(MAX_PREVIOUS_KEYS)
    .optional(),
  rotatedAt: z.iso.datetime().optional(),
  /**
   * The tenant's key in the team memory store (default: its id). A name added again after revocation gets a
   * fresh scope, so it never sees the revoked tenant's team repositories unless it took over its memory.
   */
  teamScope: z
    .string()
    .regex(/^[a-z0-9][a-z0-9-]{0,62}(\.[0-9a-f]{16})?$/)
    .optional(),
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
  /** The tenant's key in the team memory store (see the record's `teamScope`). */
  teamScope: string;
}

export type TenantSummary = Omit<TenantRecord, 'keyHash' | 'version' | 'previousKeys'>;

function summaryOf(record: TenantRecord): TenantSummary {
  const { keyHash: _hash, version: _version, previousKeys: _previous, ...summary } = record;
  return summary;
}

export type TenantErrorCode =
  | 'TENANT_INVALID_NAME'
  | 'TENANT_EXISTS'
  | 'TENANT_NOT_FOUND'
  | 'TENANT_REVOKED'
  | 'TENANT_WORKSPACE_INVALID'
  | 'TENANT_WORKSPACE_OVERLAP'
  | 'TENANT_POLICY_INVALID'
  | 'TENANT_BINDING_INVALID';

export class TenantError extends EngramError {
  declare readonly code: TenantErrorCode;
  constructor(code: TenantErrorCode, message: string) {
    super(code, message, { retryable: false });
  }
}

const KEY_PATTERN = /^egk\.([a-z0-9][a-z0-9-]{0,62})\.([0-9a-f]{64})$/;
const TEAM_SYNC_KEY_PATTERN = /^egt\.([a-z0-9][a-z0-9-]{0,62})\.([0-9a-f]{64})$/;

/** The tenant's memory-store bindings for team sync, beside its record (team-stores.ts). */
export const TEAM_STORES_FILENAME = 'team-stores.json';

/** The team sync credential's file name, in `secretsDir` (and at the old place, in the tenant's directory). */
export const TEAM_SYNC_KEY_FILENAME = 'team-sync.key';
/** The team sync credential a rotation replaced, while its grace lasts: `{ key, expiresAt }`. */
const TEAM_SYNC_PREVIOUS_FILENAME = 'team-sync.key.previous';

/**
 * The operator-only directory holding tenants' credentials: under ENGRAM_HOME but outside `tenants/`, so it is
 * in no tenant's area (`tenants/<id>/`) and, since workspaces never contain ENGRAM_HOME, in no workspace.
 */
export function secretsRoot(engramHome: string): string {
  return join(resolve(engramHome), 'secrets', 'tenants');
}

/** Counted steps of a key lookup, for tests that check known and unknown ids take the same path. */
export type LookupStep = 'stat' | 'read' | 'hash' | 'compare';

export interface TenantStoreOptions {
  /** Called at each step of `authenticateKey` (tests count them; production passes nothing). */
  probe?: (step: LookupStep) => void;
}

/** Stands in for a missing record's stat (values of a typical record's magnitude, so the stamp costs the same). */
const MISSING_STAT = {
  ino: 10n ** 7n,
  size: 300n,
  mtimeNs: 1_700_000_000_000_000_000n,
  ctimeNs: 1_700_000_000_000_000_000n,
};

/** Compared with when the key names no tenant, so an unknown id costs the same hash and compare as a known one. */
const DUMMY_HASH = Buffer.alloc(32);
const DUMMY_HEX = '0'.repeat(64);

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
  readonly engramHome: string;
  readonly secretsRoot: string;
  private readonly probe: (step: LookupStep) => void;

  private workspaceCache: { stamp: string; workspaces: readonly TenantWorkspace[] } | undefined;
  /** Parsed tenant records for `authenticateKey`, each valid while its file's stat is unchanged. */
  private readonly recordCache = new Map<string, { stamp: string; record: TenantRecord }>();

  constructor(engramHome: string, options: TenantStoreOptions = {}) {
    this.engramHome = resolve(engramHome);
    this.root = tenantsRoot(engramHome);
    this.secretsRoot = secretsRoot(engramHome);
    this.probe = options.probe ?? (() => {});
  }

  private teamSyncKeyPath(id: string): string {
    return join(this.secretsRoot, id, TEAM_SYNC_KEY_FILENAME);
  }

  /**
   * Moves a team sync key from where earlier versions kept it (`tenants/<id>/team-sync.key`, inside the
   * tenant's area) to `secretsRoot`. A rename within ENGRAM_HOME, so the credential is never lost or
   * doubled; if both exist (two versions raced), the one in `secretsRoot` wins and the old one is kept next to
   * it as `team-sync.key.old`.
   */
  private async migrateTeamSyncKey(id: string): Promise<void> {
    const legacy = join(this.root, id, TEAM_SYNC_KEY_FILENAME);
    const legacyStat = await fs.lstat(legacy).catch(() => undefined);
    if (!legacyStat) return;
    const target = this.teamSyncKeyPath(id);
    await fs.mkdir(join(this.secretsRoot, id), { recursive: true, mode: 0o700 });
    await fs.chmod(join(this.secretsRoot, '..'), 0o700).catch(() => {});
    const exists = await fs.lstat(target).then(
      () => true,
      () => false,
    );
    await fs.rename(legacy, exists ? `${target}.old` : target).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error; // another process moved it first
    });
    await fs.chmod(exists ? `${target}.old` : target, 0o600).catch(() => {});
  }

  /** Moves every tenant's credentials out of its area (see `migrateTeamSyncKey`); `engram serve` runs it at start. */
  async migrateSecrets(): Promise<number> {
    let names: string[];
    try {
      names = await fs.readdir(this.root);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw error;
    }
    let moved = 0;
    for (const id of names) {
      if (!TENANT_ID_PATTERN.test(id)) continue;
      const had = await fs.lstat(join(this.root, id, TEAM_SYNC_KEY_FILENAME)).then(
        () => true,
        () => false,
      );
      await this.migrateTeamSyncKey(id);
      if (had) moved++;
    }
    return moved;
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
      teamScope: record.teamScope ?? record.id,
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
    this.probe('stat');
    // A missing record is an answer, not a thrown ENOENT: building that error made an unknown id measurably
    // slower than a known one (bench/tenant-lookup.ts). A synchronous stat is the one call that can say so
    // (`throwIfNoEntry`); it is one metadata lookup, cheaper than the thread-pool round trip it replaces.
    const found = statSync(this.recordPath(id), { bigint: true, throwIfNoEntry: false });
    // A missing record costs what a present one does: a stat that finds a file (the tenants root), the stamp,
    // the cache lookup.
    const st = found ?? statSync(this.root, { bigint: true, throwIfNoEntry: false }) ?? MISSING_STAT;
    const stamp = `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    const cached = this.recordCache.get(id);
    if (!found) {
      this.recordCache.delete(id);
      return undefined;
    }
    if (cached?.stamp === stamp) return cached.record;
    this.probe('read');
    const record = await this.read(id);
    const settled = Date.now() - Number(found.mtimeMs) > SETTLE_MS;
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
    options: {
      allowedTools?: readonly string[];
      /**
       * A revoked tenant (this name or another) whose memory the new tenant takes over: its private
       * ENGRAM_HOME (memory, transcripts, session memory) is moved to the new tenant. It must have had the same
       * workspace, since memory is kept per project path. Without it a new tenant starts with empty memory.
       */
      reuseMemoryOf?: string;
    } = {},
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
    // A workspace holding ENGRAM_HOME would put every tenant's area and the operator's secrets inside one
    // tenant's reach; one inside ENGRAM_HOME would let a tenant's tools reach the service's own files.
    const home = await fs.realpath(this.engramHome).catch(() => this.engramHome);
    if (isWithinOrEqual(real, home) || isWithinOrEqual(home, real)) {
      throw new TenantError(
        'TENANT_WORKSPACE_OVERLAP',
        `Workspace ${real} ${isWithinOrEqual(home, real) ? 'contains' : 'is inside'} ENGRAM_HOME (${home}); a tenant's workspace must be outside the service's own directory.`,
      );
    }
    const existing = await this.read(name);
    if (existing && !existing.revokedAt) {
      throw new TenantError(
        'TENANT_EXISTS',
        `Tenant ${name} already exists; revoke it first to reuse the name.`,
      );
    }
    let source: TenantRecord | undefined;
    if (options.reuseMemoryOf !== undefined) {
      source = await this.read(options.reuseMemoryOf);
      if (!source) {
        throw new TenantError(
          'TENANT_NOT_FOUND',
          `No tenant ${JSON.stringify(options.reuseMemoryOf)} to reuse the memory of; see \`engram tenants list\`.`,
        );
      }
      if (!source.revokedAt) {
        throw new TenantError(
          'TENANT_POLICY_INVALID',
          `Tenant ${source.id} is active; revoke it before a new tenant takes over its memory (\`engram tenants rotate\` keeps a tenant's memory under a new key).`,
        );
      }
      if (source.workspace !== real) {
        throw new TenantError(
          'TENANT_WORKSPACE_INVALID',
          `Tenant ${source.id} had workspace ${source.workspace}, not ${real}; its memory belongs to that workspace's projects.`,
        );
      }
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
    if (source) {
      const scope = source.teamScope ?? source.id;
      if (scope !== name) record.teamScope = scope;
    } else if (existing) {
      record.teamScope = `${name}.${randomBytes(8).toString('hex')}`;
    }
    await fs.mkdir(this.root, { recursive: true, mode: 0o700 });
    // A revoked tenant of this name is moved aside whole (record, memory, sessions) — kept, never deleted; its
    // memory comes back only through `reuseMemoryOf`.
    let retired: string | undefined;
    if (existing) retired = await this.retire(existing);
    const sourceHome =
      source && (source.id === name && retired ? join(retired, 'home') : join(this.root, source.id, 'home'));
    const created = await createExclusive(this.recordPath(name), `${JSON.stringify(record, null, 2)}\n`, {
      mode: 0o600,
      dirMode: 0o700,
    });
    if (!created) {
      throw new TenantError(
        'TENANT_EXISTS',
        `Tenant ${name} already exists (added by another process just now).`,
      );
    }
    const tenant = this.toTenant(record);
    if (sourceHome) {
      // One rename: the memory is in the old place or the new one, never both or neither.
      await fs.rename(sourceHome, tenant.home).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error;
      });
      // Its memory-store bindings come along: they name stores of the team scope it takes over too.
      const bindings = await fs
        .readFile(join(sourceHome, '..', TEAM_STORES_FILENAME), 'utf8')
        .catch(() => undefined);
      if (bindings !== undefined)
        await writeFileAtomic(join(this.root, name, TEAM_STORES_FILENAME), bindings, { mode: 0o600 });
    }
    await fs.mkdir(tenant.home, { recursive: true, mode: 0o700 });
    await fs.mkdir(tenant.sessionsDir, { recursive: true, mode: 0o700 });
    return { tenant, key: `egk.${name}.${secret}` };
  }

  /** Moves a revoked tenant's directory to `tenants-retired/<id>.<time>` and returns where it now is. */
  private async retire(record: TenantRecord): Promise<string> {
    const retiredRoot = join(this.engramHome, 'tenants-retired');
    await fs.mkdir(retiredRoot, { recursive: true, mode: 0o700 });
    const to = join(
      retiredRoot,
      `${record.id}.${(record.revokedAt ?? new Date().toISOString()).replace(/[:.]/g, '-')}`,
    );
    await fs.rename(join(this.root, record.id), to);
    this.recordCache.delete(record.id);
    // Its credentials go too: the new tenant of this name makes its own.
    const secretsRetired = join(this.secretsRoot, '..', 'retired');
    await fs.mkdir(secretsRetired, { recursive: true, mode: 0o700 });
    await fs
      .rename(join(this.secretsRoot, record.id), join(secretsRetired, basename(to)))
      .catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error;
      });
    return to;
  }

  /** The tenant's record (never its key hashes), revoked ones too; undefined for an unknown id. */
  async find(id: string): Promise<TenantSummary | undefined> {
    const record = await this.read(id);
    return record ? summaryOf(record) : undefined;
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
      out.push(summaryOf(record));
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
    return summaryOf(revoked);
  }

  /**
   * A new API key for an active tenant: same id, workspace, policy and memory. The old key stops working now
   * (`graceMs` 0) or `graceMs` from now, so clients can be switched over. Returns the new key, shown once.
   */
  async rotate(
    id: string,
    options: { graceMs?: number } = {},
  ): Promise<{ tenant: Tenant; key: string; oldKeyExpiresAt: string }> {
    const record = await this.read(id);
    if (!record) {
      throw new TenantError(
        'TENANT_NOT_FOUND',
        `No tenant ${JSON.stringify(id)}; see \`engram tenants list\`.`,
      );
    }
    if (record.revokedAt) {
      throw new TenantError(
        'TENANT_REVOKED',
        `Tenant ${id} is revoked; add it again (\`engram tenants add ${id} --workspace DIR --reuse-memory-of ${id}\`) to keep its memory.`,
      );
    }
    const graceMs = Math.max(0, options.graceMs ?? 0);
    const now = Date.now();
    const expiresAt = new Date(now + graceMs).toISOString();
    const stillValid = (record.previousKeys ?? []).filter((k) => Date.parse(k.expiresAt) > now);
    const previousKeys = graceMs > 0 ? [...stillValid, { keyHash: record.keyHash, expiresAt }] : stillValid;
    const secret = randomBytes(32).toString('hex');
    const rotated: TenantRecord = {
      ...record,
      keyHash: hashSecret(secret),
      rotatedAt: new Date(now).toISOString(),
      previousKeys: previousKeys.slice(-MAX_PREVIOUS_KEYS),
    };
    if (rotated.previousKeys?.length === 0) delete rotated.previousKeys;
    await writeFileAtomic(this.recordPath(id), `${JSON.stringify(rotated, null, 2)}\n`, { mode: 0o600 });
    this.recordCache.delete(id);
    await this.rotateTeamSyncKey(id, graceMs, now);
    return { tenant: this.toTenant(rotated), key: `egk.${id}.${secret}`, oldKeyExpiresAt: expiresAt };
  }

  /**
   * A rotation renews the team sync credential too, so a leaked `egt.` key stops working with the API key it
   * was leaked with: at once (`graceMs` 0) or after the same grace. The replaced key is written to its
   * `previous` file before the new one replaces it, so a worker's request in flight with it is accepted
   * throughout the grace. None issued yet: nothing to renew (the first use creates one).
   */
  private async rotateTeamSyncKey(id: string, graceMs: number, now: number): Promise<void> {
    await this.migrateTeamSyncKey(id);
    const path = this.teamSyncKeyPath(id);
    const current = await fs.readFile(path, 'utf8').then(
      (t) => t.trim(),
      () => undefined,
    );
    if (!current) return;
    const previous = join(this.secretsRoot, id, TEAM_SYNC_PREVIOUS_FILENAME);
    if (graceMs > 0) {
      const expiresAt = new Date(now + graceMs).toISOString();
      await writeFileAtomic(previous, `${JSON.stringify({ key: current, expiresAt })}\n`, { mode: 0o600 });
    } else {
      await fs.rm(previous, { force: true });
    }
    await writeFileAtomic(path, `egt.${id}.${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
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
    await this.migrateTeamSyncKey(id);
    const path = this.teamSyncKeyPath(id);
    const fresh = `egt.${id}.${randomBytes(32).toString('hex')}`;
    await fs.mkdir(join(this.secretsRoot, '..'), { recursive: true, mode: 0o700 });
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
    if (record && !record.revokedAt) await this.migrateTeamSyncKey(id).catch(() => {});
    const stored = await fs.readFile(this.teamSyncKeyPath(id), 'utf8').then(
      (t) => t.trim(),
      () => undefined,
    );
    // The key a rotation replaced, while its grace lasts.
    const previous = await fs
      .readFile(join(this.secretsRoot, id, TEAM_SYNC_PREVIOUS_FILENAME), 'utf8')
      .then((t) => JSON.parse(t) as { key?: unknown; expiresAt?: unknown })
      .catch(() => undefined);
    const graced =
      typeof previous?.key === 'string' &&
      typeof previous.expiresAt === 'string' &&
      Date.parse(previous.expiresAt) > Date.now()
        ? previous.key
        : undefined;
    // The hashes and compares run for unknown ids and missing files too (against a dummy): no early return.
    const given = Buffer.from(hashSecret(key), 'hex');
    const expected = stored ? Buffer.from(hashSecret(stored), 'hex') : DUMMY_HASH;
    const expectedGraced = graced ? Buffer.from(hashSecret(graced), 'hex') : DUMMY_HASH;
    const equal = timingSafeEqual(given, expected);
    const equalGraced = timingSafeEqual(given, expectedGraced);
    return ((equal && stored) || (equalGraced && graced)) && record && !record.revokedAt
      ? this.toTenant(record)
      : null;
  }

  /** The tenant a key belongs to, or null for a malformed, unknown, wrong or revoked key. */
  async authenticateKey(key: string, options: AuthenticateOptions = {}): Promise<Tenant | null> {
    if (options.teamSync && key.startsWith('egt.')) return this.authenticateTeamSyncKey(key);
    const match = KEY_PATTERN.exec(key);
    if (!match) return null;
    const record = await this.readCached(match[1]!).catch(() => undefined);
    // The same hash and compares whether the id is known, unknown or revoked: no early return before them, so
    // the answer's timing does not tell which tenant ids exist.
    this.probe('hash');
    const given = Buffer.from(hashSecret(match[2]!), 'hex');
    const now = Date.now();
    // Every candidate is decoded from hex, the dummy too: the same work whatever the record holds.
    const candidates = [
      record?.keyHash ?? DUMMY_HEX,
      ...Array.from({ length: MAX_PREVIOUS_KEYS }, (_, i) => {
        const previous = record?.previousKeys?.[i];
        return previous && Date.parse(previous.expiresAt) > now ? previous.keyHash : DUMMY_HEX;
      }),
    ];
    let match_ = false;
    for (const candidate of candidates) {
      this.probe('compare');
      if (timingSafeEqual(given, Buffer.from(candidate, 'hex'))) match_ = true;
    }
    return match_ && record && !record.revokedAt ? this.toTenant(record) : null;
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
