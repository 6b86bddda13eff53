import { type Dir, promises as fs } from 'node:fs';
import { join } from 'node:path';

// The session gate's input (docs/claude-code-memory.md §8.4.3): sessions of this launch directory whose transcript
// changed since the last consolidation. A transcript is `<sessionId>.jsonl` directly in the per-cwd transcript
// directory; agent sidechains (`agent-*.jsonl`) are not sessions. mtime, not birthtime: birthtime is 0 on ext4.

/** Directory entries looked at before giving up: a transcript directory of a busy project stays far below. */
export const MAX_TRANSCRIPT_DIR_ENTRIES = 20_000;
/** Sessions returned at most (the gate needs 5; the consolidation prompt lists a bounded number). */
export const MAX_SESSIONS_LISTED = 1_000;

/** Session ids as transcripts name them: UUIDs, or Engram's [A-Za-z0-9_-] ids. */
const SESSION_FILE = /^([A-Za-z0-9][A-Za-z0-9_-]{0,127})\.jsonl$/;

export interface ListSessionsOptions {
  /** The current session, which never counts toward its own gate. */
  excludeSessionId?: string;
  /** Default MAX_SESSIONS_LISTED. */
  limit?: number;
}

export function isSessionTranscriptName(name: string): boolean {
  const match = SESSION_FILE.exec(name);
  return !!match && !(match[1] as string).startsWith('agent-');
}

/**
 * Session ids whose transcript's mtime is strictly after `sinceMs`, newest first, at most `limit`. A missing
 * or unreadable directory is no sessions (the gate stays shut) rather than an error.
 */
export async function listSessionsTouchedSince(
  transcriptDir: string,
  sinceMs: number,
  options: ListSessionsOptions = {},
): Promise<string[]> {
  const limit = Math.max(0, Math.floor(options.limit ?? MAX_SESSIONS_LISTED));
  let dir: Dir;
  try {
    dir = await fs.opendir(transcriptDir);
  } catch {
    return [];
  }
  const found: Array<{ id: string; mtimeMs: number }> = [];
  let seen = 0;
  try {
    for await (const entry of dir) {
      if (++seen > MAX_TRANSCRIPT_DIR_ENTRIES) break;
      if (!entry.isFile() || !isSessionTranscriptName(entry.name)) continue;
      const id = entry.name.slice(0, -'.jsonl'.length);
      if (id === options.excludeSessionId) continue;
      try {
        const stat = await fs.stat(join(transcriptDir, entry.name));
        if (stat.mtimeMs > sinceMs) found.push({ id, mtimeMs: stat.mtimeMs });
      } catch {
        // removed while listing
      }
    }
  } catch {
    // the directory went away mid-listing: count what was seen
  }
  found.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.id < b.id ? -1 : 1));
  return found.slice(0, limit).map((f) => f.id);
}
