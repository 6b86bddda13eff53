import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { walk } from '@engram/fs-walk/walk';
import { NotARegularFileError, readRegularFileBounded } from '@engram/memory-core/memdir/bounded-read';
import { resolveInside, validateTeamKey } from '@engram/memory-core/paths/containment';
import { scanForSecrets } from '@engram/memory-core/security/secret-scanner';
import { hashContent, MAX_ENTRY_BYTES } from '../contract.js';

// The local side of a push: every regular file under team/ as a key (relative path, forward slashes) with its
// content and checksum. Hidden names (atomic-write temp files, editor swap files, dot-directories) and symlinks
// are not team memory. A file with a secret in it is skipped whole and reported by rule id, never by value.

export const MAX_TEAM_FILES = 5_000;
const MAX_WALK_ENTRIES = 50_000;

export type SkipReason =
  | 'secret'
  | 'too-large'
  | 'invalid-key'
  | 'not-utf8'
  | 'unreadable'
  | 'too-many-files';

export interface SkippedFile {
  key: string;
  reason: SkipReason;
  /** secret: the first matching rule's id and label (never the matched text). */
  ruleId?: string;
  label?: string;
  /** too-large: the file's size; invalid-key: the validation code. */
  bytes?: number;
  code?: string;
}

export interface LocalEntry {
  content: string;
  checksum: string;
  bytes: number;
}

export interface LocalTeamFiles {
  entries: Map<string, LocalEntry>;
  skipped: SkippedFile[];
  /** Folders of team/ that another client mirrors a store into: never read as team files to sync. */
  foreignMounts: ForeignMount[];
}

// Another client's mirror of a memory store inside team/ (docs/memory-stores.md "Claude Code's on-disk layout"):
// Claude Code 2.1.x keeps its team memory stores in `team/<mount>/`, stamped with its manifest; the SDK's
// SessionMemoryStores stamps its folders with its marker (`MARKER_PATH` in the SDK's
// tools/agent-toolset/memories.ts). Such a folder is read as memory but never synced by Engram: its own client
// syncs it, and a second writer would make that client push Engram's writes as edits (or stop syncing).

/** Claude Code's manifest: `{"v":1,"partition":"/v1/memory_stores/<id>"}`, the store the folder mirrors. */
export const CLAUDE_CODE_MANIFEST = '.memory-sync';
/** The SDK's marker: `version 1\n<store id>`; the SDK trusts the folder only while its SHA-256 matches. */
export const SDK_STORE_MARKER = '.anthropic-memory-store';

export interface ForeignMount {
  /** The folder, relative to team/ (one segment). */
  dir: string;
  client: 'claude-code' | 'sdk';
}

/** Top-level folders of team/ holding Claude Code's manifest or the SDK's marker (a regular file). */
export async function foreignMountsOf(teamDir: string): Promise<ForeignMount[]> {
  const names = await fs.readdir(teamDir, { withFileTypes: true }).catch(() => []);
  const mounts: ForeignMount[] = [];
  const isFile = (path: string) =>
    fs.lstat(path).then(
      (s) => s.isFile(),
      () => false,
    );
  for (const d of names) {
    if (!d.isDirectory() || d.name.startsWith('.')) continue;
    if (await isFile(join(teamDir, d.name, CLAUDE_CODE_MANIFEST)))
      mounts.push({ dir: d.name, client: 'claude-code' });
    else if (await isFile(join(teamDir, d.name, SDK_STORE_MARKER)))
      mounts.push({ dir: d.name, client: 'sdk' });
  }
  return mounts.sort((a, b) => (a.dir < b.dir ? -1 : a.dir > b.dir ? 1 : 0));
}

/** Whether `key` (relative to team/) lies inside one of `mounts`. */
export function inForeignMount(key: string, mounts: readonly ForeignMount[]): boolean {
  return mounts.some((m) => key.startsWith(`${m.dir}/`));
}

export async function readLocalTeamFiles(teamDir: string): Promise<LocalTeamFiles> {
  const entries = new Map<string, LocalEntry>();
  const skipped: SkippedFile[] = [];
  const foreignMounts = await foreignMountsOf(teamDir);
  const listing = await walk(teamDir, { maxEntries: MAX_WALK_ENTRIES });
  for (const error of listing.errors) {
    // A directory that vanished (or turned into a file) mid-walk holds nothing to push.
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') continue;
    if (inForeignMount(error.rel, foreignMounts)) continue;
    skipped.push({ key: error.rel || '.', reason: 'unreadable', code: error.code });
  }
  for (const { rel: key, path } of listing.files) {
    if (inForeignMount(key, foreignMounts)) continue;
    const valid = validateTeamKey(key);
    if (!valid.ok) {
      skipped.push({ key, reason: 'invalid-key', code: valid.code });
      continue;
    }
    if (entries.size >= MAX_TEAM_FILES) {
      skipped.push({ key, reason: 'too-many-files' });
      continue;
    }
    const entry = await readEntry(path);
    if ('reason' in entry) {
      skipped.push({ key, ...entry });
      continue;
    }
    entries.set(key, entry);
  }
  return {
    entries: new Map([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    skipped,
    foreignMounts,
  };
}

async function readEntry(path: string): Promise<LocalEntry | Omit<SkippedFile, 'key'>> {
  const read = await readLocalBytes(path);
  if (read === undefined) return { reason: 'unreadable', code: 'NOT_A_FILE' };
  if ('error' in read) return { reason: 'unreadable', code: read.error };
  if ('tooLarge' in read) return { reason: 'too-large', bytes: read.tooLarge };
  const buffer = read.bytes;
  const content = buffer.toString('utf8');
  // Entries are UTF-8 text; bytes that do not round-trip would be corrupted by the upload.
  if (!Buffer.from(content, 'utf8').equals(buffer)) return { reason: 'not-utf8' };
  const secrets = scanForSecrets(content);
  if (secrets.length > 0) return { reason: 'secret', ruleId: secrets[0]!.ruleId, label: secrets[0]!.label };
  return { content, checksum: hashContent(content), bytes: buffer.length };
}

/** A local team file as read: its bytes, or its size when over the cap (never read whole), or an error code. */
export type LocalRead = { bytes: Buffer } | { tooLarge: number } | { error: string };

/**
 * Reads one local team file through one non-blocking open that does not follow a final symlink, judged on the
 * descriptor (regular files only) and capped at `maxBytes` (MAX_ENTRY_BYTES): undefined when absent or not a
 * regular file (a FIFO, a directory, a symlink), `tooLarge` when bigger than the cap — such a file is never
 * uploaded and never overwritten; the callers report it and leave it as it is.
 */
export async function readLocalBytes(
  path: string,
  maxBytes = MAX_ENTRY_BYTES,
): Promise<LocalRead | undefined> {
  try {
    const read = await readRegularFileBounded(path, maxBytes, { followSymlinks: false });
    return read.truncated ? { tooLarge: Math.max(read.stat.size, maxBytes + 1) } : { bytes: read.bytes };
  } catch (error) {
    if (error instanceof NotARegularFileError) return undefined;
    const code = (error as NodeJS.ErrnoException).code;
    // ENOENT: gone; ELOOP: a symlink in the last component (never followed); ENOTDIR: a parent became a file.
    if (code === 'ENOENT' || code === 'ELOOP' || code === 'ENOTDIR') return undefined;
    return { error: code ?? 'UNKNOWN' };
  }
}

/**
 * Where pull keeps the local version of a key it had to overwrite (both sides changed it). Hidden, so the
 * walker above (push) and the memory scan skip it; pull refuses hidden keys, so the service cannot write it.
 */
export const CONFLICTS_DIRNAME = '.conflicts';

/** `notes/x.md` → `notes/x.conflict-20261201T225041123Z.md` (`-n` before the extension from the second on). */
export function conflictCopyKey(key: string, at: Date, n = 1): string {
  const stamp = at.toISOString().replace(/[-:.]/g, '');
  const suffix = `.conflict-${stamp}${n > 1 ? `-${n}` : ''}`;
  return key.endsWith('.md') ? `${key.slice(0, -3)}${suffix}.md` : `${key}${suffix}`;
}

/** One copy, written by pull (the seed protocol) and by the store sync alike. */
/**
 * Writes `bytes` atomically to a fresh `.conflicts/<key>.conflict-<UTC time>[-n].md` inside `teamDir` (never
 * over an earlier copy), resolved through symlinks so it cannot land outside the team directory.
 */
export async function keepConflictCopy(
  teamDir: string,
  key: string,
  bytes: Buffer,
  at: Date,
): Promise<{ ok: true; copy: string } | { ok: false; reason: string }> {
  for (let n = 1; n <= 100; n++) {
    const copy = `${CONFLICTS_DIRNAME}/${conflictCopyKey(key, at, n)}`;
    const path = await resolveInside(join(teamDir, copy), teamDir);
    if (!path.ok) return { ok: false, reason: path.reason };
    const taken = await fs.lstat(path.path).then(
      () => true,
      () => false,
    );
    if (taken) continue;
    try {
      await writeFileAtomic(path.path, bytes);
      return { ok: true, copy };
    } catch (error) {
      return { ok: false, reason: (error as NodeJS.ErrnoException).code ?? 'error' };
    }
  }
  return { ok: false, reason: 'too many conflict copies with the same time' };
}

/** The conflict copies under team/.conflicts/ (relative to the team directory), oldest name first. */
export async function listConflictCopies(teamDir: string): Promise<string[]> {
  const listing = await walk(join(teamDir, CONFLICTS_DIRNAME), { maxEntries: MAX_WALK_ENTRIES });
  return listing.files.map((f) => `${CONFLICTS_DIRNAME}/${f.rel}`).sort();
}
