import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { EngramError } from '@engram/errors/engram-error';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { resolveTeamKeyPath } from '@engram/memory-core/paths/containment';
import { z } from 'zod';
import { MAX_ENTRY_BYTES } from '../contract.js';
import { invalidKeyReason } from '../keys.js';
import { JOB_AUTHOR_HEADER, JOB_AUTHOR_PATTERN } from '../memory-stores/job-author.js';
import { LIMITS } from '../memory-stores/limits.js';
import {
  type ForeignMount,
  inForeignMount,
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
// - deleted locally, store unchanged since the baseline: deleted on the store with expected_content_sha256 —
//   only once the file has been missing across two passes at least DELETE_CORROBORATION_MS apart and is still
//   missing just before the request, at most deleteCap() a pass (the SDK's rule: a file that vanished for a
//   moment, or a half-restored folder, never deletes anything);
// - deleted on the store, file unchanged: deleted here; a file with un-pushed edits re-creates the memory;
// - every file is gone at once (a wiped folder): nothing is deleted on the store, everything comes back;
// - files with a secret, too large, or not UTF-8 never leave (readLocalTeamFiles) and are left alone here; a
//   file the store refuses (413, a 400 path) is not sent again until its content changes;
// - a folder under team/ holding Claude Code's manifest or the SDK's marker is another client's mirror of a
//   store: read by the memory scan like any file, never synced from here.

export const STORE_SYNC_STATE_FILENAME = 'team-store-sync.json';

/** How long a file must stay missing, across two passes, before its delete is sent (the SDK's constant). */
export const DELETE_CORROBORATION_MS = 30_000;

/** Deletes one pass sends at most (the SDK's bounds): small stores clear in one pass, a big one loses little. */
export function deleteCap(baselineSize: number): number {
  return Math.max(8, Math.min(50, Math.floor(baselineSize / 4)));
}

const stateSchema = z.object({
  version: z.literal(1),
  storeId: z.string(),
  /** The project's repository (`owner/name`), so a worker that wrote into team/ can ask for an authored push. */
  repo: z.string().optional(),
  /** key → the memory's id and content_sha256 (bare hex) when both sides last agreed. */
  baseline: z.record(z.string(), z.object({ id: z.string(), sha: z.string() })),
  /** key → when a pass first found the file missing (its store delete waits for the corroboration). */
  pendingDeletes: z.record(z.string(), z.iso.datetime()).optional(),
  /** key → the content the store refused and why: not sent again while the file holds exactly that content. */
  refused: z.record(z.string(), z.object({ sha: z.string(), detail: z.string() })).optional(),
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
  maxRetries?: number;
  timeoutMs?: number;
}

/** The SDK client a store sync talks through (no hand-written HTTP). */
export function memoryStoreClient(o: StoreClientOptions): Anthropic {
  return new Anthropic({
    baseURL: o.baseUrl,
    apiKey: o.apiKey,
    maxRetries: o.maxRetries ?? 3,
    timeout: o.timeoutMs ?? 30_000,
  });
}

/** A worker job's writes this pass carries: its author and the team keys it changed (its receipt's files). */
export interface AuthoredChanges {
  /** `extract:<job id>`, `dream:<job id>`: sent as `x-engram-job` on the requests for `keys` only. */
  author: string;
  keys: readonly string[];
}

export interface StoreSyncTarget {
  teamDir: string;
  storeId: string;
  repo?: string;
  client: Anthropic;
  state: StoreSyncStateFile;
  /** The job whose changes this pass uploads: only its files' versions name it; other changes go out unauthored. */
  authored?: AuthoredChanges;
  /** A person's `engram team push`: send files the store refused before even if unchanged since. */
  retryRefused?: boolean;
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
  uploaded: Array<{ key: string; change: 'created' | 'updated'; bytes: number; author?: string }>;
  downloaded: Array<{ key: string; change: 'created' | 'updated' | 'restored'; bytes: number }>;
  /** `store`: a local delete sent to the store; `local`: the store's delete applied here. */
  deleted: Array<{ key: string; where: 'store' | 'local'; author?: string }>;
  /** Files missing here whose store delete waits: sent by a pass from `dueAt` on if still missing. */
  pendingDeletes: Array<{ key: string; dueAt: string }>;
  unchanged: number;
  conflicts: StoreConflict[];
  skipped: Array<{ key: string; reason: string; detail?: string }>;
  /** Folders under team/ that mirror a store for another client (Claude Code, the SDK): never synced here. */
  foreignMounts: ForeignMount[];
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
  if (target.authored && !JOB_AUTHOR_PATTERN.test(target.authored.author))
    return Promise.reject(
      new StoreSyncError(
        'STORE_SYNC_BAD_AUTHOR',
        `Not a job author: ${JSON.stringify(target.authored.author)} (expected <job kind>:<job id>).`,
        { retryable: false },
      ),
    );
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
/** A refusal the store would repeat for the same content (a 4xx other than 404, 408, 409, 429). */
function refusalOf(error: unknown): string | undefined {
  if (!(error instanceof Anthropic.APIError) || error.status === undefined) return undefined;
  const s = error.status;
  if (s >= 500 || s === 404 || s === 408 || s === 409 || s === 429) return undefined;
  return `${s} ${errorType(error) ?? ''}`.trim();
}

async function sync(target: StoreSyncTarget): Promise<StoreSyncReport> {
  const { teamDir, storeId, client } = target;
  const now = target.now ?? (() => new Date());
  const memories = client.beta.memoryStores.memories;
  const state = await target.state.load(storeId);
  const local = await readLocalTeamFiles(teamDir);
  const report: StoreSyncReport = {
    action: 'store-sync',
    storeId,
    uploaded: [],
    downloaded: [],
    deleted: [],
    pendingDeletes: [],
    unchanged: 0,
    conflicts: [],
    skipped: [],
    foreignMounts: local.foreignMounts,
    recovered: false,
  };
  const underMount = (key: string) => inForeignMount(key, local.foreignMounts);
  // The job's own files carry its name; everything else this pass sends is unauthored (a person's edit, another
  // job's file whose push has not run yet): a version never names a job that did not make it.
  const authoredKeys = new Set(target.authored?.keys ?? []);
  const as = (key: string): { headers: Record<string, string> } | undefined =>
    target.authored && authoredKeys.has(key)
      ? { headers: { [JOB_AUTHOR_HEADER]: target.authored.author } }
      : undefined;
  const authorOf = (key: string) =>
    target.authored && authoredKeys.has(key) ? { author: target.authored.author } : {};
  const localSha = new Map<string, { content: string; sha: string; bytes: number }>();
  for (const [key, e] of local.entries)
    localSha.set(key, { content: e.content, sha: bare(e.checksum), bytes: e.bytes });
  // A file that cannot leave (a secret, too large, not UTF-8) is still there: never deleted on the store, never
  // overwritten from it; it keeps its baseline until it can sync again.
  const held = new Set<string>();
  for (const s of local.skipped as SkippedFile[]) {
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
  const nextPending: Record<string, string> = {};
  const nextRefused: NonNullable<StoreSyncState['refused']> = {};
  const pendingSince = state.pendingDeletes ?? {};
  const refusedBefore = state.refused ?? {};
  let deleteSlots = deleteCap(baseKeys.length);
  const at = now();

  /** A refusal the store would repeat: reported, remembered by content hash, not sent again until it changes. */
  const refused = (key: string, sha: string, detail: string, again: boolean) => {
    nextRefused[key] = { sha, detail };
    report.skipped.push({
      key,
      reason: 'refused',
      detail: again ? `${detail}; not sent again until the file changes` : detail,
    });
  };
  const wasRefused = (key: string, sha: string) => {
    const r = refusedBefore[key];
    if (target.retryRefused || r?.sha !== sha) return false;
    refused(key, sha, r.detail, true);
    return true;
  };

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
    const read = await readLocalBytes(join(teamDir, key));
    if (read && !('bytes' in read)) {
      // Grew past the cap (or became unreadable) since the walk: never overwritten, never uploaded.
      report.skipped.push({
        key,
        reason: 'tooLarge' in read ? 'too-large' : 'unreadable',
        detail:
          'tooLarge' in read
            ? `the local file has ${read.tooLarge} bytes > ${MAX_ENTRY_BYTES}; left as it is`
            : read.error,
      });
      if (baseline[key]) next[key] = baseline[key]!;
      return;
    }
    await download(key, item, 'updated', read ? { reason, localBytes: read.bytes } : undefined);
  };

  const createFrom = async (
    key: string,
    mine: { content: string; sha: string; bytes: number },
  ): Promise<void> => {
    if (wasRefused(key, mine.sha)) return;
    try {
      const m = await memories.create(storeId, { path: storePath(key), content: mine.content }, as(key));
      if (m.content_sha256 === mine.sha) {
        next[key] = { id: m.id, sha: m.content_sha256 };
        report.uploaded.push({ key, change: 'created', bytes: mine.bytes, ...authorOf(key) });
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
      const refusal = refusalOf(error);
      if (refusal) {
        refused(key, mine.sha, refusal, false);
        return;
      }
      throw error;
    }
  };

  /** A file missing here whose memory the store still holds unchanged: delete it once corroborated. */
  const corroboratedDelete = async (key: string, theirs: RemoteItem, base: string): Promise<void> => {
    const first = pendingSince[key] ?? at.toISOString();
    const dueAt = new Date(Date.parse(first) + DELETE_CORROBORATION_MS);
    const wait = () => {
      nextPending[key] = first;
      next[key] = baseline[key]!;
      report.pendingDeletes.push({ key, dueAt: dueAt.toISOString() });
    };
    // First seen missing now (or not long enough ago): keep the memory and its baseline, look again later.
    if (pendingSince[key] === undefined || at.getTime() < dueAt.getTime()) return wait();
    // Re-checked just before the request: a file back by now (an editor's replace, a restore) deletes nothing.
    const back = await fs.lstat(join(teamDir, key)).then(
      () => true,
      () => false,
    );
    if (back) {
      next[key] = baseline[key]!;
      return;
    }
    if (deleteSlots <= 0) return wait();
    deleteSlots--;
    try {
      await memories.delete(theirs.id, { memory_store_id: storeId, expected_content_sha256: base }, as(key));
      report.deleted.push({ key, where: 'store', ...authorOf(key) });
    } catch (error) {
      if (isNotFound(error)) return;
      if (!isConflict(error)) throw error;
      // Changed on the store since: it comes back.
      const fresh = await memories.retrieve(theirs.id, { memory_store_id: storeId, view: 'basic' });
      await download(key, { id: fresh.id, sha: fresh.content_sha256 }, 'restored');
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
      if (base !== undefined && theirs.sha === base && !wiped) return corroboratedDelete(key, theirs, base);
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
      next[key] = baseline[key]!;
      if (wasRefused(key, mine.sha)) return;
      try {
        const m = await memories.update(
          theirs.id,
          {
            memory_store_id: storeId,
            content: mine.content,
            precondition: { type: 'content_sha256', content_sha256: base },
          },
          as(key),
        );
        next[key] = { id: m.id, sha: m.content_sha256 };
        report.uploaded.push({ key, change: 'updated', bytes: mine.bytes, ...authorOf(key) });
      } catch (error) {
        if (isNotFound(error)) {
          // Deleted in the store since our listing; this file holds un-pushed edits: re-create it.
          delete next[key];
          await createFrom(key, mine);
          return;
        }
        if (isConflict(error)) {
          const fresh = await memories.retrieve(theirs.id, { memory_store_id: storeId, view: 'basic' });
          await conflictFor(key, 'precondition', { id: fresh.id, sha: fresh.content_sha256 });
          return;
        }
        const refusal = refusalOf(error);
        if (refusal) {
          refused(key, mine.sha, refusal, false);
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
  for (const list of [
    report.uploaded,
    report.downloaded,
    report.deleted,
    report.pendingDeletes,
    report.conflicts,
    report.skipped,
  ])
    list.sort(byKey);
  state.baseline = next;
  if (Object.keys(nextPending).length) state.pendingDeletes = nextPending;
  else delete state.pendingDeletes;
  if (Object.keys(nextRefused).length) state.refused = nextRefused;
  else delete state.refused;
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
  /** Files missing here whose store delete waits for its corroboration (sent from `dueAt` on). */
  pendingDeletes: Array<{ key: string; dueAt: string }>;
  /** Files the store refused, not sent again until they change. */
  refused: Array<{ key: string; detail: string }>;
  conflictCopies: string[];
  foreignMounts: ForeignMount[];
  skipped: SkippedFile[];
  remoteError?: string;
}> {
  const state = await target.state.load(target.storeId);
  const local = await readLocalTeamFiles(target.teamDir);
  const underMount = (key: string) => inForeignMount(key, local.foreignMounts);
  const mine = new Map([...local.entries].map(([k, e]) => [k, bare(e.checksum)]));
  let remote = new Map<string, RemoteItem>();
  let remoteError: string | undefined;
  try {
    remote = await listRemote(target);
  } catch (error) {
    remoteError = (error as Error).message;
  }
  const pending = state.pendingDeletes ?? {};
  const toPush: string[] = [];
  const toPull: string[] = [];
  const conflicts: string[] = [];
  for (const key of [...new Set([...mine.keys(), ...remote.keys()])].sort()) {
    if (underMount(key) || pending[key] !== undefined) continue;
    const l = mine.get(key);
    const r = remote.get(key)?.sha;
    const b = state.baseline[key]?.sha;
    if (l === r) continue;
    if (l !== undefined && state.refused?.[key]?.sha === l) continue;
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
    pendingDeletes: Object.entries(pending)
      .map(([key, first]) => ({
        key,
        dueAt: new Date(Date.parse(first) + DELETE_CORROBORATION_MS).toISOString(),
      }))
      .sort((a, b) => (a.key < b.key ? -1 : 1)),
    refused: Object.entries(state.refused ?? {})
      .filter(([key, r]) => mine.get(key) === r.sha)
      .map(([key, r]) => ({ key, detail: r.detail })),
    conflictCopies: await listConflictCopies(target.teamDir),
    foreignMounts: local.foreignMounts,
    skipped: local.skipped,
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
