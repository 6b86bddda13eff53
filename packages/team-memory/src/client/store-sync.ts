import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { MARKER_PATH } from '@anthropic-ai/sdk/tools/agent-toolset/memories';
import { EngramError } from '@engram/errors/engram-error';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { resolveTeamKeyPath } from '@engram/memory-core/paths/containment';
import { z } from 'zod';
import { invalidKeyReason } from '../keys.js';
import { JOB_AUTHOR_HEADER, JOB_AUTHOR_PATTERN } from '../memory-stores/job-author.js';
import { LIMITS } from '../memory-stores/limits.js';
import {
  keepConflictCopy,
  listConflictCopies,
  readLocalBytes,
  readLocalTeamFiles,
  type SkippedFile,
} from './local-files.js';

// Team sync through a memory store (`/v1/memory_stores/{id}/memories…`), as a client of any memory store service
// — Engram's own `engram serve` or another one reached with an API key — through the SDK's
// `client.beta.memoryStores` (docs/memory-stores.md "Engram as a client"). One pass does both directions, like
// the SDK's SessionMemoryStores, judged per file against the baseline (the store's content_sha256 at the last
// sync) kept in `team-store-sync.json`:
// - changed on one side only: that side wins (upload with a content_sha256 precondition, or download);
// - changed on both (or differing with no baseline): the store wins, the local bytes are first copied to
//   team/.conflicts/ (as the team_memory pull does) and reported; a 409 on a precondition is the same case
//   found late (someone wrote between our list and our write);
// - deleted locally, store unchanged since the baseline: deleted on the store with expected_content_sha256;
//   deleted on the store, file unchanged: deleted here; a file with un-pushed edits re-creates the memory;
// - every file is gone at once (a wiped folder): nothing is deleted on the store, everything comes back;
// - files with a secret, too large, or not UTF-8 never leave (readLocalTeamFiles) and are left alone here;
// - a folder under team/ holding the SDK's / Claude Code's store marker (`.anthropic-memory-store`) is another
//   client's mirror of a store: read by the memory scan like any file, never synced from here.

export const STORE_SYNC_STATE_FILENAME = 'team-store-sync.json';

const stateSchema = z.object({
  version: z.literal(1),
  storeId: z.string(),
  /** The project's repository (`owner/name`), so a worker that wrote into team/ can ask for an authored push. */
  repo: z.string().optional(),
  /** key → the memory's id and content_sha256 (bare hex) when both sides last agreed. */
  baseline: z.record(z.string(), z.object({ id: z.string(), sha: z.string() })),
  lastSyncAt: z.string().optional(),
});
export type StoreSyncState = z.infer<typeof stateSchema>;

export class StoreSyncStateFile {
  constructor(readonly path: string) {}
  /** The saved state for `storeId`; missing, corrupt or another store's: start afresh (it is a cache). */
  async load(storeId: string): Promise<StoreSyncState> {
    const saved = await this.loadAny();
    return saved?.storeId === storeId ? saved : { version: 1, storeId, baseline: {} };
  }
  /** Whatever state is saved, for any store (undefined when none is readable). */
  async loadAny(): Promise<StoreSyncState | undefined> {
    try {
      const parsed = stateSchema.safeParse(JSON.parse(await fs.readFile(this.path, 'utf8')));
      return parsed.success ? parsed.data : undefined;
    } catch {
      return undefined; // missing or corrupt
    }
  }
  async save(state: StoreSyncState): Promise<void> {
    await writeFileAtomic(this.path, `${JSON.stringify(state, null, 2)}\n`);
  }
}

export class StoreSyncError extends EngramError {}

export interface StoreClientOptions {
  baseUrl: string;
  apiKey: string;
  /** `extract:<job id>`: the worker job this sync's writes are made for (sent as `x-engram-job`). */
  author?: string;
  maxRetries?: number;
  timeoutMs?: number;
}

/** The SDK client a store sync talks through (no hand-written HTTP). */
export function memoryStoreClient(o: StoreClientOptions): Anthropic {
  if (o.author !== undefined && !JOB_AUTHOR_PATTERN.test(o.author))
    throw new StoreSyncError('STORE_SYNC_BAD_AUTHOR', `Not a job author: ${JSON.stringify(o.author)}`, {
      retryable: false,
    });
  return new Anthropic({
    baseURL: o.baseUrl,
    apiKey: o.apiKey,
    maxRetries: o.maxRetries ?? 3,
    timeout: o.timeoutMs ?? 30_000,
    defaultHeaders: o.author ? { [JOB_AUTHOR_HEADER]: o.author } : {},
  });
}

export interface StoreSyncTarget {
  teamDir: string;
  storeId: string;
  repo?: string;
  client: Anthropic;
  state: StoreSyncStateFile;
  now?: () => Date;
}

export interface StoreConflict {
  key: string;
  reason: 'both-changed' | 'no-base' | 'precondition';
  /** The local version's copy, relative to the team directory (under `.conflicts/`). */
  copy: string;
}

export interface StoreSyncReport {
  action: 'store-sync';
  storeId: string;
  uploaded: Array<{ key: string; change: 'created' | 'updated'; bytes: number }>;
  downloaded: Array<{ key: string; change: 'created' | 'updated' | 'restored'; bytes: number }>;
  /** `store`: a local delete sent to the store; `local`: the store's delete applied here. */
  deleted: Array<{ key: string; where: 'store' | 'local' }>;
  unchanged: number;
  conflicts: StoreConflict[];
  skipped: Array<{ key: string; reason: string; detail?: string }>;
  /** Folders under team/ that mirror a store for another client (Claude Code, the SDK): never synced here. */
  foreignMounts: string[];
  /** The whole folder was empty against a non-empty baseline: treated as wiped, nothing deleted on the store. */
  recovered: boolean;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const bare = (checksum: string) => checksum.replace(/^sha256:/, '');
const storePath = (key: string) => `/${key}`;

/** Requests one sync keeps in flight (files are independent; the SDK's folder sync keeps 32). */
const UPLOAD_CONCURRENCY = 8;

async function inPool<T>(
  items: readonly T[],
  width: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed: unknown;
  const lanes = Array.from({ length: Math.min(width, items.length) }, async () => {
    while (next < items.length && failed === undefined) {
      const item = items[next++]!;
      try {
        await work(item);
      } catch (error) {
        failed ??= error;
      }
    }
  });
  await Promise.all(lanes);
  if (failed !== undefined) throw failed;
}

// One sync at a time per state file in this process (across processes the store's preconditions keep it right).
const running = new Map<string, Promise<unknown>>();

export function syncTeamStore(target: StoreSyncTarget): Promise<StoreSyncReport> {
  const key = target.state.path;
  const previous = running.get(key) ?? Promise.resolve();
  const next = previous.catch(() => undefined).then(() => sync(target));
  running.set(key, next);
  void next
    .finally(() => {
      if (running.get(key) === next) running.delete(key);
    })
    .catch(() => undefined);
  return next;
}

/** Top-level folders of team/ that hold another client's store marker. */
export async function foreignMountsOf(teamDir: string): Promise<string[]> {
  const names = await fs.readdir(teamDir, { withFileTypes: true }).catch(() => []);
  const mounts: string[] = [];
  for (const d of names) {
    if (!d.isDirectory() || d.name.startsWith('.')) continue;
    const marker = await fs.lstat(join(teamDir, d.name, MARKER_PATH)).then(
      (s) => s.isFile(),
      () => false,
    );
    if (marker) mounts.push(d.name);
  }
  return mounts.sort();
}

interface RemoteItem {
  id: string;
  sha: string;
}

async function listRemote(target: StoreSyncTarget): Promise<Map<string, RemoteItem>> {
  const remote = new Map<string, RemoteItem>();
  const pages = target.client.beta.memoryStores.memories.list(target.storeId, {
    view: 'basic',
    limit: LIMITS.basicPageMax,
  });
  for await (const item of pages) {
    if (item.type !== 'memory') continue;
    remote.set(item.path.slice(1), { id: item.id, sha: item.content_sha256 });
  }
  return remote;
}

function isConflict(error: unknown): error is InstanceType<typeof Anthropic.ConflictError> {
  return error instanceof Anthropic.ConflictError;
}
function isNotFound(error: unknown): boolean {
  return error instanceof Anthropic.NotFoundError;
}
function errorType(error: unknown): string | undefined {
  const body = (error as { error?: { error?: { type?: string } } }).error;
  return body?.error?.type;
}

async function sync(target: StoreSyncTarget): Promise<StoreSyncReport> {
  const { teamDir, storeId, client } = target;
  const now = target.now ?? (() => new Date());
  const memories = client.beta.memoryStores.memories;
  const state = await target.state.load(storeId);
  const report: StoreSyncReport = {
    action: 'store-sync',
    storeId,
    uploaded: [],
    downloaded: [],
    deleted: [],
    unchanged: 0,
    conflicts: [],
    skipped: [],
    foreignMounts: await foreignMountsOf(teamDir),
    recovered: false,
  };
  const underMount = (key: string) => report.foreignMounts.some((m) => key.startsWith(`${m}/`));
  const local = await readLocalTeamFiles(teamDir);
  const localSha = new Map<string, { content: string; sha: string; bytes: number }>();
  for (const [key, e] of local.entries)
    if (!underMount(key)) localSha.set(key, { content: e.content, sha: bare(e.checksum), bytes: e.bytes });
  // A file that cannot leave (a secret, too large, not UTF-8) is still there: never deleted on the store, never
  // overwritten from it; it keeps its baseline until it can sync again.
  const held = new Set<string>();
  for (const s of local.skipped as SkippedFile[]) {
    if (underMount(s.key)) continue;
    held.add(s.key);
    report.skipped.push({
      key: s.key,
      reason: s.reason,
      ...(s.ruleId ? { detail: `rule ${s.ruleId}` } : s.code ? { detail: s.code } : {}),
    });
  }
  const remote = await listRemote(target);
  for (const key of [...remote.keys()]) {
    const invalid =
      invalidKeyReason(key) ??
      (key.split('/').some((s) => s.startsWith('.')) ? { code: 'HIDDEN' } : undefined);
    if (invalid || underMount(key)) {
      report.skipped.push({
        key,
        reason: underMount(key) ? 'foreign-mount' : 'invalid-key',
        ...(invalid ? { detail: invalid.code } : {}),
      });
      remote.delete(key);
    }
  }
  const baseline = state.baseline;
  const baseKeys = Object.keys(baseline).filter((k) => !underMount(k));
  // Every file gone at once is a wiped folder, not a mass delete (the SDK's rule): bring everything back.
  const wiped = localSha.size === 0 && held.size === 0 && baseKeys.length > 1;
  report.recovered = wiped;
  const next: StoreSyncState['baseline'] = {};

  const download = async (
    key: string,
    item: RemoteItem,
    change: 'created' | 'updated' | 'restored',
    conflict?: { reason: StoreConflict['reason']; localBytes: Buffer },
  ): Promise<void> => {
    const m = await memories.retrieve(item.id, { memory_store_id: storeId, view: 'full' });
    const content = m.content ?? '';
    const path = await resolveTeamKeyPath(teamDir, key);
    if (!path.ok) {
      report.skipped.push({ key, reason: 'outside-team-dir', detail: path.reason });
      return;
    }
    if (conflict) {
      const kept = await keepConflictCopy(teamDir, key, conflict.localBytes, now());
      if (!kept.ok) {
        report.skipped.push({ key, reason: 'unwritable', detail: `conflict copy: ${kept.reason}` });
        if (baseline[key]) next[key] = baseline[key]!;
        return;
      }
      report.conflicts.push({ key, reason: conflict.reason, copy: kept.copy });
    }
    await writeFileAtomic(path.path, content);
    next[key] = { id: m.id, sha: m.content_sha256 };
    report.downloaded.push({ key, change, bytes: Buffer.byteLength(content, 'utf8') });
  };
  const conflictFor = async (key: string, reason: StoreConflict['reason'], item: RemoteItem) => {
    const localBytes = await readLocalBytes(join(teamDir, key));
    await download(key, item, 'updated', localBytes ? { reason, localBytes } : undefined);
  };

  const createFrom = async (
    key: string,
    mine: { content: string; sha: string; bytes: number },
  ): Promise<void> => {
    try {
      const m = await memories.create(storeId, { path: storePath(key), content: mine.content });
      if (m.content_sha256 === mine.sha) {
        next[key] = { id: m.id, sha: m.content_sha256 };
        report.uploaded.push({ key, change: 'created', bytes: mine.bytes });
      } else await conflictFor(key, 'no-base', { id: m.id, sha: m.content_sha256 });
    } catch (error) {
      const id = (error as { error?: { error?: { conflicting_memory_id?: string } } }).error?.error
        ?.conflicting_memory_id;
      if (isConflict(error) && errorType(error) === 'memory_path_conflict_error' && id) {
        // Created by someone else since our listing (or a path that nests with another memory).
        const fresh = await memories.retrieve(id, { memory_store_id: storeId, view: 'basic' });
        if (fresh.path === storePath(key))
          await conflictFor(key, 'no-base', { id, sha: fresh.content_sha256 });
        else report.skipped.push({ key, reason: 'path-conflict', detail: fresh.path });
        return;
      }
      if (
        error instanceof Anthropic.APIError &&
        error.status !== undefined &&
        error.status < 500 &&
        error.status !== 429
      ) {
        report.skipped.push({
          key,
          reason: 'refused',
          detail: `${error.status} ${errorType(error) ?? ''}`.trim(),
        });
        return;
      }
      throw error;
    }
  };

  const keys = [...new Set([...localSha.keys(), ...remote.keys(), ...baseKeys])].sort();
  const handle = async (key: string): Promise<void> => {
    if (held.has(key)) {
      if (baseline[key]) next[key] = baseline[key]!;
      return;
    }
    const mine = localSha.get(key);
    const theirs = remote.get(key);
    const base = baseline[key]?.sha;
    if (mine === undefined) {
      if (theirs === undefined) return;
      if (base !== undefined && theirs.sha === base && !wiped) {
        try {
          await memories.delete(theirs.id, { memory_store_id: storeId, expected_content_sha256: base });
          report.deleted.push({ key, where: 'store' });
        } catch (error) {
          if (isNotFound(error)) return;
          if (!isConflict(error)) throw error;
          // Changed on the store since: it comes back.
          const fresh = await memories.retrieve(theirs.id, { memory_store_id: storeId, view: 'basic' });
          await download(key, { id: fresh.id, sha: fresh.content_sha256 }, 'restored');
        }
        return;
      }
      await download(key, theirs, base !== undefined ? 'restored' : 'created');
      return;
    }
    if (theirs === undefined) {
      if (base !== undefined && mine.sha === base) {
        // Deleted on the store; this copy holds nothing newer.
        await fs.rm(join(teamDir, key), { force: true });
        report.deleted.push({ key, where: 'local' });
        return;
      }
      await createFrom(key, mine);
      return;
    }
    if (mine.sha === theirs.sha) {
      next[key] = theirs;
      report.unchanged++;
      return;
    }
    if (base !== undefined && theirs.sha === base) {
      // Edited here only: the upload, on the condition that the store still holds what we last saw.
      try {
        const m = await memories.update(theirs.id, {
          memory_store_id: storeId,
          content: mine.content,
          precondition: { type: 'content_sha256', content_sha256: base },
        });
        next[key] = { id: m.id, sha: m.content_sha256 };
        report.uploaded.push({ key, change: 'updated', bytes: mine.bytes });
      } catch (error) {
        if (isNotFound(error)) {
          // Deleted in the store since our listing; this file holds un-pushed edits: re-create it.
          await createFrom(key, mine);
          return;
        }
        if (isConflict(error)) {
          const fresh = await memories.retrieve(theirs.id, { memory_store_id: storeId, view: 'basic' });
          await conflictFor(key, 'precondition', { id: fresh.id, sha: fresh.content_sha256 });
          return;
        }
        if (
          error instanceof Anthropic.APIError &&
          error.status !== undefined &&
          error.status < 500 &&
          error.status !== 429 &&
          !isNotFound(error)
        ) {
          report.skipped.push({
            key,
            reason: 'refused',
            detail: `${error.status} ${errorType(error) ?? ''}`.trim(),
          });
          next[key] = baseline[key]!;
          return;
        }
        throw error;
      }
      return;
    }
    if (base !== undefined && mine.sha === base) {
      await download(key, theirs, 'updated');
      return;
    }
    await conflictFor(key, base === undefined ? 'no-base' : 'both-changed', theirs);
  };
  await inPool(keys, UPLOAD_CONCURRENCY, handle);
  const byKey = (a: { key: string }, b: { key: string }) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  for (const list of [report.uploaded, report.downloaded, report.deleted, report.conflicts, report.skipped])
    list.sort(byKey);
  state.baseline = next;
  if (target.repo) state.repo = target.repo;
  state.lastSyncAt = now().toISOString();
  await target.state.save(state);
  return report;
}

/** What a sync would do now, from one content-free listing (nothing is changed). */
export async function teamStoreStatus(target: StoreSyncTarget): Promise<{
  storeId: string;
  lastSyncAt?: string;
  local: number;
  toPush: string[];
  toPull: string[];
  conflicts: string[];
  conflictCopies: string[];
  foreignMounts: string[];
  skipped: SkippedFile[];
  remoteError?: string;
}> {
  const state = await target.state.load(target.storeId);
  const mounts = await foreignMountsOf(target.teamDir);
  const underMount = (key: string) => mounts.some((m) => key.startsWith(`${m}/`));
  const local = await readLocalTeamFiles(target.teamDir);
  const mine = new Map(
    [...local.entries].filter(([k]) => !underMount(k)).map(([k, e]) => [k, bare(e.checksum)]),
  );
  let remote = new Map<string, RemoteItem>();
  let remoteError: string | undefined;
  try {
    remote = await listRemote(target);
  } catch (error) {
    remoteError = (error as Error).message;
  }
  const toPush: string[] = [];
  const toPull: string[] = [];
  const conflicts: string[] = [];
  for (const key of [...new Set([...mine.keys(), ...remote.keys()])].sort()) {
    if (underMount(key)) continue;
    const l = mine.get(key);
    const r = remote.get(key)?.sha;
    const b = state.baseline[key]?.sha;
    if (l === r) continue;
    const localChanged = l !== b;
    const remoteChanged = r !== b;
    if (localChanged && remoteChanged && l !== undefined && r !== undefined) conflicts.push(key);
    else if (localChanged) toPush.push(key);
    else toPull.push(key);
  }
  return {
    storeId: target.storeId,
    ...(state.lastSyncAt ? { lastSyncAt: state.lastSyncAt } : {}),
    local: mine.size,
    toPush,
    toPull,
    conflicts,
    conflictCopies: await listConflictCopies(target.teamDir),
    foreignMounts: mounts,
    skipped: local.skipped.filter((s) => !underMount(s.key)),
    ...(remoteError ? { remoteError } : {}),
  };
}

/** The versions of one store-backed team file, newest first (`engram memory history`). */
export async function memoryHistory(
  client: Anthropic,
  storeId: string,
  key: string,
): Promise<{
  memoryId: string | null;
  versions: Array<{
    id: string;
    operation: string;
    created_at: string;
    created_by: unknown;
    content_sha256: string | null;
    content_size_bytes: number | null;
    redacted: boolean;
  }>;
}> {
  const path = storePath(key);
  // The live memory at that path, else the newest version that had it (a deleted file keeps its history).
  let memoryId: string | null = null;
  for await (const item of client.beta.memoryStores.memories.list(storeId, {
    view: 'basic',
    path_prefix: path.slice(0, path.lastIndexOf('/') + 1),
    limit: LIMITS.basicPageMax,
  })) {
    if (item.type === 'memory' && item.path === path) {
      memoryId = item.id;
      break;
    }
  }
  if (!memoryId) {
    for await (const v of client.beta.memoryStores.memoryVersions.list(storeId, { limit: 100 })) {
      if (v.path === path) {
        memoryId = v.memory_id;
        break;
      }
    }
  }
  if (!memoryId) return { memoryId: null, versions: [] };
  const versions = [];
  for await (const v of client.beta.memoryStores.memoryVersions.list(storeId, {
    memory_id: memoryId,
    limit: 100,
  })) {
    versions.push({
      id: v.id,
      operation: v.operation,
      created_at: v.created_at,
      created_by: v.created_by ?? null,
      content_sha256: v.content_sha256 ?? null,
      content_size_bytes: v.content_size_bytes ?? null,
      redacted: Boolean(v.redacted_at),
    });
  }
  return { memoryId, versions };
}

export { sha256 as storeContentSha256 };
