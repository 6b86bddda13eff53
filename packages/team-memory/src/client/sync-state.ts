import { promises as fs } from 'node:fs';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { z } from 'zod';

// What a client remembers between syncs of one project: the store checksum it last saw (its ETag), the
// service's per-key checksums at that point (the base that deltas and local edits are measured against), and
// a push suppression after a permanent refusal. It lives beside the memory directory, not in it, and is only
// a cache: deleting it costs one full download and a hashes probe, never data.

export const TEAM_SYNC_STATE_FILENAME = 'team-sync.json';

const stateSchema = z.object({
  version: z.literal(1),
  repo: z.string(),
  lastKnownChecksum: z.string().nullable(),
  serverChecksums: z.record(z.string(), z.string()),
  serverMaxEntries: z.number().int().positive().optional(),
  lastPullAt: z.string().optional(),
  lastPushAt: z.string().optional(),
  suppressed: z
    .object({
      status: z.number().int().optional(),
      code: z.string(),
      message: z.string(),
      at: z.string(),
      /** Digest of the local files (keys and checksums) the refused push was made of. */
      fingerprint: z.string(),
    })
    .optional(),
});
export type TeamSyncState = z.infer<typeof stateSchema>;

export function emptyState(repo: string): TeamSyncState {
  return { version: 1, repo, lastKnownChecksum: null, serverChecksums: {} };
}

export class TeamSyncStateFile {
  constructor(readonly path: string) {}

  /** The saved state for `repo`; a missing, unreadable or other-repository file starts afresh. */
  async load(repo: string): Promise<TeamSyncState> {
    let text: string;
    try {
      text = await fs.readFile(this.path, 'utf8');
    } catch {
      return emptyState(repo);
    }
    try {
      const parsed = stateSchema.safeParse(JSON.parse(text));
      if (parsed.success && parsed.data.repo === repo) return parsed.data;
    } catch {
      // corrupt: start afresh (it is a cache)
    }
    return emptyState(repo);
  }

  async save(state: TeamSyncState): Promise<void> {
    await writeFileAtomic(this.path, `${JSON.stringify(state, null, 2)}\n`);
  }
}
