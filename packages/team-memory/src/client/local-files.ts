import { type Dirent, promises as fs } from 'node:fs';
import { join } from 'node:path';
import { validateTeamKey } from '@engram/memory-core/paths/containment';
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
}

export async function readLocalTeamFiles(teamDir: string): Promise<LocalTeamFiles> {
  const entries = new Map<string, LocalEntry>();
  const skipped: SkippedFile[] = [];
  const pending = [''];
  let visited = 0;
  while (pending.length > 0) {
    const rel = pending.pop() as string;
    let dirents: Dirent[];
    try {
      dirents = await fs.readdir(rel === '' ? teamDir : join(teamDir, rel), { withFileTypes: true });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      skipped.push({ key: rel || '.', reason: 'unreadable', code: code ?? 'UNKNOWN' });
      continue;
    }
    for (const dirent of dirents) {
      if (++visited > MAX_WALK_ENTRIES) break;
      if (dirent.name.startsWith('.')) continue;
      const key = rel === '' ? dirent.name : `${rel}/${dirent.name}`;
      if (dirent.isDirectory()) {
        pending.push(key);
        continue;
      }
      if (!dirent.isFile()) continue;
      const valid = validateTeamKey(key);
      if (!valid.ok) {
        skipped.push({ key, reason: 'invalid-key', code: valid.code });
        continue;
      }
      if (entries.size >= MAX_TEAM_FILES) {
        skipped.push({ key, reason: 'too-many-files' });
        continue;
      }
      const entry = await readEntry(join(teamDir, key));
      if ('reason' in entry) {
        skipped.push({ key, ...entry });
        continue;
      }
      entries.set(key, entry);
    }
  }
  return { entries: new Map([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))), skipped };
}

async function readEntry(path: string): Promise<LocalEntry | Omit<SkippedFile, 'key'>> {
  let buffer: Buffer;
  try {
    const stat = await fs.lstat(path);
    if (!stat.isFile()) return { reason: 'unreadable', code: 'NOT_A_FILE' };
    if (stat.size > MAX_ENTRY_BYTES) return { reason: 'too-large', bytes: stat.size };
    buffer = await fs.readFile(path);
  } catch (error) {
    return { reason: 'unreadable', code: (error as NodeJS.ErrnoException).code ?? 'UNKNOWN' };
  }
  if (buffer.length > MAX_ENTRY_BYTES) return { reason: 'too-large', bytes: buffer.length };
  const content = buffer.toString('utf8');
  // Entries are UTF-8 text; bytes that do not round-trip would be corrupted by the upload.
  if (!Buffer.from(content, 'utf8').equals(buffer)) return { reason: 'not-utf8' };
  const secrets = scanForSecrets(content);
  if (secrets.length > 0) return { reason: 'secret', ruleId: secrets[0]!.ruleId, label: secrets[0]!.label };
  return { content, checksum: hashContent(content), bytes: buffer.length };
}

/** Reads one local file the way pull compares it (undefined when absent or not a regular file). */
export async function readLocalFile(path: string): Promise<string | undefined> {
  try {
    const stat = await fs.lstat(path);
    if (!stat.isFile()) return undefined;
    return await fs.readFile(path, 'utf8');
  } catch {
    return undefined;
  }
}
