import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { resolveTeamKeyPath } from '@engram/memory-core/paths/containment';
import { hashContent, MAX_CONFLICT_RETRIES, MAX_ENTRY_BYTES, MAX_PUT_BODY_BYTES } from '../contract.js';
import { invalidKeyReason } from '../keys.js';
import { type TeamMemoryHttpClient, TeamSyncHttpError } from './http-client.js';
import {
  foreignMountsOf,
  inForeignMount,
  keepConflictCopy,
  listConflictCopies,
  readLocalBytes,
  readLocalTeamFiles,
  type SkippedFile,
} from './local-files.js';
import type { TeamSyncState, TeamSyncStateFile } from './sync-state.js';

// Pull and push of one project's team/ directory (docs/team-memory.md has the rules and why):
// - pull: the service wins per key where it has news; identical content is not rewritten (mtime kept); entries
//   over 250,000 bytes and keys that fail validation are skipped; writes are atomic and land inside team/ only;
//   a key deleted locally comes back. A local edit never pushed of a key the service also changed (or a local
//   file that differs from the service with no sync base to tell which is newer) is first copied, atomically,
//   to team/.conflicts/ — hidden, so neither push nor the memory scan reads it — and only then overwritten.
// - push: the local side wins; only entries whose checksum differs from the service's are sent, in PUT bodies
//   of ≤200,000 serialized bytes, each with If-Match; a 412 refreshes the checksums (view=hashes) and retries,
//   at most twice. Deletions are not sent. A permanent refusal suppresses pushes until a file changes.

export interface SyncTarget {
  /** The project's memory/team directory. */
  teamDir: string;
  /** `owner/name`. */
  repo: string;
  http: TeamMemoryHttpClient;
  state: TeamSyncStateFile;
  now?: () => Date;
}

export type PullSkipReason =
  | 'invalid-key'
  | 'too-large'
  | 'outside-team-dir'
  | 'unwritable'
  | 'foreign-mount';

export interface PullReport {
  action: 'pull';
  repo: string;
  outcome: 'pulled' | 'not-modified' | 'no-data';
  written: Array<{ key: string; change: 'created' | 'updated' | 'restored'; bytes: number }>;
  unchanged: number;
  /** Local edits made since the last sync of a key the service did not change: kept for the next push. */
  keptLocal: string[];
  /**
   * Keys both sides changed since the last sync (or that differ with no sync base): the service's version was
   * written, the local one kept first at `copy` (relative to the team directory, under `.conflicts/`).
   */
  conflicts: PullConflict[];
  skipped: Array<{ key: string; reason: PullSkipReason; detail?: string }>;
  bytes: number;
  checksum: string | null;
}

export interface PullConflict {
  key: string;
  /** `both-changed`: edited here and on the service since the last sync; `no-base`: no sync record of it. */
  reason: 'both-changed' | 'no-base';
  copy: string;
}

export interface PushReport {
  action: 'push';
  repo: string;
  outcome: 'pushed' | 'up-to-date' | 'suppressed' | 'failed';
  pushed: Array<{ key: string; bytes: number }>;
  skipped: SkippedFile[];
  /** 412s met (each one refreshed the checksums and retried). */
  conflicts: number;
  batches: number;
  bytes: number;
  checksum: string | null;
  /** failed / suppressed: what the service said. */
  error?: { code: string; status?: number; message: string; permanent: boolean };
}

// One sync at a time per state file in this process: a pull and a push of one project never interleave here
// (across processes the service's compare-and-set keeps the data right; the state file is only a cache).
const running = new Map<string, Promise<unknown>>();
function serialized<T>(key: string, work: () => Promise<T>): Promise<T> {
  const previous = running.get(key) ?? Promise.resolve();
  const next = previous.catch(() => undefined).then(work);
  running.set(key, next);
  void next
    .finally(() => {
      if (running.get(key) === next) running.delete(key);
    })
    .catch(() => undefined);
  return next;
}

export function pullTeamMemory(
  target: SyncTarget,
  opts: { skipEtagCache?: boolean } = {},
): Promise<PullReport> {
  return serialized(target.state.path, () => pull(target, opts));
}

export function pushTeamMemory(target: SyncTarget, opts: { force?: boolean } = {}): Promise<PushReport> {
  return serialized(target.state.path, () => push(target, opts));
}

async function pull(target: SyncTarget, opts: { skipEtagCache?: boolean }): Promise<PullReport> {
  const { teamDir, repo, http } = target;
  const now = target.now ?? (() => new Date());
  const state = await target.state.load(repo);
  const report: PullReport = {
    action: 'pull',
    repo,
    outcome: 'pulled',
    written: [],
    unchanged: 0,
    keptLocal: [],
    conflicts: [],
    skipped: [],
    bytes: 0,
    checksum: state.lastKnownChecksum,
  };
  // The ETag says the service has not changed, not that the disk still holds it: a key deleted here since the
  // last pull must come back, so a missing file means a full download.
  let etag = opts.skipEtagCache ? undefined : (state.lastKnownChecksum ?? undefined);
  if (etag) {
    // (Keys in the state passed validation when they were pulled; an lstat per key is all this needs.)
    for (const key of Object.keys(state.serverChecksums)) {
      const present = await fs.lstat(join(teamDir, key)).then(
        (st) => st.isFile(),
        () => false,
      );
      if (!present) {
        etag = undefined;
        break;
      }
    }
  }
  const fetched = await http.fetchData(repo, etag);
  if (fetched.kind === 'empty') {
    state.lastKnownChecksum = null;
    state.serverChecksums = {};
    state.lastPullAt = now().toISOString();
    await target.state.save(state);
    return { ...report, outcome: 'no-data', checksum: null };
  }
  if (fetched.kind === 'not-modified') {
    state.lastPullAt = now().toISOString();
    await target.state.save(state);
    return { ...report, outcome: 'not-modified' };
  }
  const base = state.serverChecksums;
  const served = fetched.data.content.entries;
  const serverChecksums: Record<string, string> = {};
  // Another client's store mirror (Claude Code's, the SDK's) is its client's to write: never pulled into.
  const mounts = await foreignMountsOf(teamDir);
  for (const key of Object.keys(served).sort()) {
    const content = served[key]!;
    const serverHash = hashContent(content);
    const invalid = invalidKeyReason(key) ?? hiddenKey(key);
    if (invalid) {
      report.skipped.push({ key, reason: 'invalid-key', detail: invalid.code });
      continue;
    }
    if (inForeignMount(key, mounts)) {
      report.skipped.push({ key, reason: 'foreign-mount', detail: key.split('/')[0] });
      continue;
    }
    serverChecksums[key] = serverHash;
    const bytes = Buffer.byteLength(content, 'utf8');
    if (bytes > MAX_ENTRY_BYTES) {
      report.skipped.push({ key, reason: 'too-large', detail: `${bytes} bytes > ${MAX_ENTRY_BYTES}` });
      continue;
    }
    const path = await resolveTeamKeyPath(teamDir, key);
    if (!path.ok) {
      report.skipped.push({ key, reason: 'outside-team-dir', detail: path.reason });
      continue;
    }
    const read = await readLocalBytes(path.path);
    // A local file over the entry cap (or unreadable) is never overwritten: reported, left as it is.
    if (read && 'tooLarge' in read) {
      report.skipped.push({
        key,
        reason: 'too-large',
        detail: `the local file has ${read.tooLarge} bytes > ${MAX_ENTRY_BYTES}; left as it is`,
      });
      continue;
    }
    if (read && 'error' in read) {
      report.skipped.push({ key, reason: 'unwritable', detail: `local file unreadable: ${read.error}` });
      continue;
    }
    const localBytes = read?.bytes;
    const local = localBytes?.toString('utf8');
    if (localBytes?.equals(Buffer.from(content, 'utf8'))) {
      report.unchanged++;
      continue;
    }
    const baseHash = base[key];
    const localChanged = local !== undefined && (baseHash === undefined || hashContent(local) !== baseHash);
    if (localChanged && serverHash === baseHash) {
      // Edited here since the last sync; the service still has what we last saw: the edit is newer.
      report.keptLocal.push(key);
      continue;
    }
    if (localChanged) {
      // Both sides changed it: the service's version is written (pull's contract), but only once the local
      // bytes are safely in a conflict copy; if the copy cannot be made, the local file stays as it is.
      const kept = await keepConflictCopy(teamDir, key, localBytes!, now());
      if (!kept.ok) {
        report.skipped.push({ key, reason: 'unwritable', detail: `conflict copy: ${kept.reason}` });
        continue;
      }
      report.conflicts.push({
        key,
        reason: baseHash === undefined ? 'no-base' : 'both-changed',
        copy: kept.copy,
      });
    }
    try {
      await writeFileAtomic(path.path, content);
    } catch (error) {
      report.skipped.push({
        key,
        reason: 'unwritable',
        detail: (error as NodeJS.ErrnoException).code ?? 'error',
      });
      continue;
    }
    report.bytes += bytes;
    report.written.push({
      key,
      bytes,
      change: local !== undefined ? 'updated' : baseHash !== undefined ? 'restored' : 'created',
    });
  }
  // Prefer the service's own per-key checksums when it sent them for the keys we accepted.
  const sent = fetched.data.content.entryChecksums;
  if (sent) for (const key of Object.keys(serverChecksums)) if (sent[key]) serverChecksums[key] = sent[key]!;
  state.serverChecksums = serverChecksums;
  state.lastKnownChecksum = fetched.checksum || null;
  state.lastPullAt = now().toISOString();
  await target.state.save(state);
  return { ...report, checksum: state.lastKnownChecksum };
}

async function push(target: SyncTarget, opts: { force?: boolean }): Promise<PushReport> {
  const { teamDir, repo } = target;
  const now = target.now ?? (() => new Date());
  const state = await target.state.load(repo);
  const local = await readLocalTeamFiles(teamDir);
  const report: PushReport = {
    action: 'push',
    repo,
    outcome: 'up-to-date',
    pushed: [],
    skipped: local.skipped,
    conflicts: 0,
    batches: 0,
    bytes: 0,
    checksum: state.lastKnownChecksum,
  };
  let keys = [...local.entries.keys()];
  // What the suppression after a permanent refusal is tied to: every local file, before any truncation.
  const fingerprint = fingerprintOf(keys.map((k) => [k, local.entries.get(k)!.checksum]));
  if (state.serverMaxEntries !== undefined && keys.length > state.serverMaxEntries) {
    // Deterministic truncation (sorted keys) so the same subset is compared with the service every time.
    for (const key of keys.slice(state.serverMaxEntries))
      report.skipped.push({ key, reason: 'too-many-files' });
    keys = keys.slice(0, state.serverMaxEntries);
  }
  if (state.suppressed && !opts.force && state.suppressed.fingerprint === fingerprint) {
    return { ...report, outcome: 'suppressed', error: suppressedError(state.suppressed) };
  }
  try {
    if (state.lastKnownChecksum === null && Object.keys(state.serverChecksums).length === 0) {
      // Never synced: learn what the service has, so only differences are sent.
      await refreshHashes(target, state);
    }
    for (let attempt = 0; ; attempt++) {
      const delta = keys.filter((k) => local.entries.get(k)!.checksum !== state.serverChecksums[k]);
      if (delta.length === 0) break;
      const outcome = await sendBatches(target, state, delta, local.entries, report);
      if (outcome === 'done') break;
      if (outcome === 'too-many-entries') {
        const message = `The service holds at most ${state.serverMaxEntries} entries for ${repo}; remove or merge team files.`;
        state.suppressed = {
          code: 'team_memory_too_many_entries',
          status: 413,
          message,
          at: now().toISOString(),
          fingerprint,
        };
        await target.state.save(state);
        return {
          ...report,
          outcome: 'failed',
          error: { code: 'team_memory_too_many_entries', status: 413, message, permanent: true },
        };
      }
      report.conflicts++;
      if (attempt >= MAX_CONFLICT_RETRIES) {
        await target.state.save(state);
        return {
          ...report,
          outcome: 'failed',
          error: {
            code: 'TEAM_SYNC_CONFLICT',
            status: 412,
            message: `The team memory kept changing during the push (${report.conflicts} conflicts); it is tried again later.`,
            permanent: false,
          },
        };
      }
      await refreshHashes(target, state);
    }
  } catch (error) {
    if (!(error instanceof TeamSyncHttpError)) throw error;
    if (error.permanent) {
      state.suppressed = {
        code: error.code,
        ...(error.status !== undefined ? { status: error.status } : {}),
        message: error.message,
        at: now().toISOString(),
        fingerprint,
      };
    }
    await target.state.save(state);
    return {
      ...report,
      outcome: 'failed',
      error: {
        code: error.code,
        ...(error.status !== undefined ? { status: error.status } : {}),
        message: error.message,
        permanent: error.permanent,
      },
    };
  }
  delete state.suppressed;
  if (report.pushed.length > 0) state.lastPushAt = now().toISOString();
  await target.state.save(state);
  return {
    ...report,
    outcome: report.pushed.length > 0 ? 'pushed' : 'up-to-date',
    checksum: state.lastKnownChecksum,
  };
}

function suppressedError(s: NonNullable<TeamSyncState['suppressed']>): NonNullable<PushReport['error']> {
  return {
    code: s.code,
    ...(s.status !== undefined ? { status: s.status } : {}),
    message: s.message,
    permanent: true,
  };
}

async function sendBatches(
  target: SyncTarget,
  state: TeamSyncState,
  delta: string[],
  entries: Map<string, { content: string; checksum: string; bytes: number }>,
  report: PushReport,
): Promise<'done' | 'conflict' | 'too-many-entries'> {
  const batches = batchByBytes(Object.fromEntries(delta.map((k) => [k, entries.get(k)!.content])));
  for (const batch of batches) {
    const result = await target.http.put(target.repo, batch, state.lastKnownChecksum ?? undefined);
    if (result.kind === 'conflict') return 'conflict';
    if (result.kind === 'too-many-entries') {
      state.serverMaxEntries = result.maxEntries;
      return 'too-many-entries';
    }
    report.batches++;
    if (result.checksum) state.lastKnownChecksum = result.checksum;
    for (const key of Object.keys(batch)) {
      const entry = entries.get(key)!;
      // A retry after a later batch's conflict resumes from what is not committed yet.
      state.serverChecksums[key] = entry.checksum;
      report.pushed.push({ key, bytes: entry.bytes });
      report.bytes += entry.bytes;
    }
  }
  return 'done';
}

async function refreshHashes(target: SyncTarget, state: TeamSyncState): Promise<void> {
  const hashes = await target.http.fetchHashes(target.repo);
  if (hashes.kind === 'empty') {
    state.lastKnownChecksum = null;
    state.serverChecksums = {};
    return;
  }
  state.lastKnownChecksum = hashes.checksum || null;
  state.serverChecksums = { ...hashes.entryChecksums };
}

/**
 * Greedy over sorted keys: a batch is closed before it would pass `maxBytes` serialized bytes (counted as the
 * JSON the PUT sends); an entry larger than that on its own goes alone.
 */
export function batchByBytes(
  delta: Readonly<Record<string, string>>,
  maxBytes = MAX_PUT_BODY_BYTES,
): Array<Record<string, string>> {
  const keys = Object.keys(delta).sort();
  const empty = Buffer.byteLength('{"entries":{}}', 'utf8');
  const batches: Array<Record<string, string>> = [];
  let current: Record<string, string> = {};
  let size = empty;
  for (const key of keys) {
    // "key":"value" plus the comma that separates it from the next one.
    const added =
      Buffer.byteLength(JSON.stringify(key), 'utf8') +
      Buffer.byteLength(JSON.stringify(delta[key]), 'utf8') +
      2;
    if (size + added > maxBytes && Object.keys(current).length > 0) {
      batches.push(current);
      current = {};
      size = empty;
    }
    current[key] = delta[key]!;
    size += added;
  }
  if (Object.keys(current).length > 0) batches.push(current);
  return batches;
}

function hiddenKey(key: string): { code: string } | undefined {
  return key.split('/').some((segment) => segment.startsWith('.')) ? { code: 'HIDDEN' } : undefined;
}

function fingerprintOf(pairs: Array<[string, string]> | string[][]): string {
  return createHash('sha256').update(JSON.stringify(pairs)).digest('hex');
}

export interface StatusReport {
  repo: string;
  lastKnownChecksum: string | null;
  lastPullAt?: string;
  lastPushAt?: string;
  suppressed?: TeamSyncState['suppressed'];
  local: number;
  /** Local files whose content the service does not have (what a push would send). */
  toPush: string[];
  /** Keys where the service has content this directory lacks or differs from (what a pull would write). */
  toPull: string[];
  /**
   * Of toPull, the keys a pull would overwrite over a local edit not yet pushed (both sides changed them, or
   * they differ with no sync base): the pull keeps the local version in a conflict copy under `.conflicts/`.
   */
  conflicts: string[];
  /** Conflict copies earlier pulls left under `.conflicts/` (relative to the team directory). */
  conflictCopies: string[];
  skipped: SkippedFile[];
  /** Whether toPull was computed from a fresh view=hashes (false: from the last sync's checksums). */
  remoteChecked: boolean;
  remoteError?: string;
}

/** What push and pull would do now, without changing anything (one view=hashes request when reachable). */
export async function teamSyncStatus(
  target: SyncTarget,
  opts: { remote?: boolean } = {},
): Promise<StatusReport> {
  const state = await target.state.load(target.repo);
  const local = await readLocalTeamFiles(target.teamDir);
  let server = state.serverChecksums;
  let remoteChecked = false;
  let remoteError: string | undefined;
  if (opts.remote !== false) {
    try {
      const hashes = await target.http.fetchHashes(target.repo);
      server = hashes.kind === 'empty' ? {} : hashes.entryChecksums;
      remoteChecked = true;
    } catch (error) {
      remoteError = (error as Error).message;
    }
  }
  const toPush = [...local.entries].filter(([k, e]) => server[k] !== e.checksum).map(([k]) => k);
  // A pull writes a key the service changed since the last sync, or one missing here; a local edit of a key
  // the service did not change is kept (and pushed).
  const toPull = Object.keys(server)
    .sort()
    .filter((k) => {
      if (local.skipped.some((s) => s.key === k) || inForeignMount(k, local.foreignMounts)) return false;
      const mine = local.entries.get(k);
      return mine === undefined || (mine.checksum !== server[k] && server[k] !== state.serverChecksums[k]);
    });
  // The same rule pull applies: the local file differs from the last synced checksum (or there is none) and
  // the service's changed since.
  const conflicts = toPull.filter((k) => {
    const mine = local.entries.get(k);
    const base = state.serverChecksums[k];
    return mine !== undefined && (base === undefined || mine.checksum !== base);
  });
  return {
    repo: target.repo,
    lastKnownChecksum: state.lastKnownChecksum,
    ...(state.lastPullAt ? { lastPullAt: state.lastPullAt } : {}),
    ...(state.lastPushAt ? { lastPushAt: state.lastPushAt } : {}),
    ...(state.suppressed ? { suppressed: state.suppressed } : {}),
    local: local.entries.size,
    toPush,
    toPull,
    conflicts,
    conflictCopies: await listConflictCopies(target.teamDir),
    skipped: local.skipped,
    remoteChecked,
    ...(remoteError ? { remoteError } : {}),
  };
}
