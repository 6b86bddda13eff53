import { join, relative, sep } from 'node:path';
import type { projectRef } from '@engram/queue/jobs/common';
import { MAX_AUTHORED_KEYS } from '@engram/queue/jobs/team-sync';
import { STORE_SYNC_STATE_FILENAME, StoreSyncStateFile } from '@engram/team-memory/client/store-sync';
import type { z } from 'zod';
import type { HandlerDeps } from '../service.js';
import { pathsForJob } from './job-paths.js';
import { teamProtocolForJob } from './team-protocol.js';

// A worker job (extraction, consolidation) that wrote into a store-backed team/ asks for a push that names it:
// the memory store records `created_by.job` on the versions of the files that job changed — the files of its
// receipt, nothing else (docs/memory-stores.md "Worker authorship"). The project's repository comes from its
// store-sync state (every session start syncs it first); a project never store-synced, or bound to the seed
// protocol, gets nothing here — its files go out with the next ordinary push (shutdown, a person's write).

export async function requestAuthoredTeamPush(
  deps: HandlerDeps,
  payload: z.infer<typeof projectRef> & { sessionId?: string },
  changedFiles: readonly string[],
  author: string,
): Promise<boolean> {
  const sync = deps.config.teamSync;
  if (!sync || !deps.producer) return false;
  const paths = pathsForJob(deps.config, payload);
  const teamRel = relative(paths.memoryDir, paths.teamDir).split(sep).join('/');
  const keys = changedFiles
    .filter((rel) => rel.startsWith(`${teamRel}/`))
    .map((rel) => rel.slice(teamRel.length + 1))
    .filter((key) => key.length > 0 && key.length <= 1024);
  if (keys.length === 0) return false;
  const file = new StoreSyncStateFile(join(paths.projectDir, STORE_SYNC_STATE_FILENAME));
  const saved = await file.loadAny();
  if (!saved?.repo) return false;
  const { protocol } = await teamProtocolForJob(deps.config, { tenant: payload.tenant, repo: saved.repo });
  if (protocol.kind !== 'memory-store') return false;
  await deps.producer.enqueue('team-sync', {
    ...(payload.tenant ? { tenant: payload.tenant } : {}),
    projectDir: payload.projectDir,
    transcriptDir: payload.transcriptDir,
    repo: saved.repo,
    action: 'push',
    reason: 'write',
    debounceMs: 0,
    ...(payload.sessionId ? { sessionId: payload.sessionId } : {}),
    requestedAt: new Date().toISOString(),
    author,
    // More than the payload holds: the rest go out unauthored (never under another job's name).
    authoredKeys: [...new Set(keys)].sort().slice(0, MAX_AUTHORED_KEYS),
  });
  return true;
}
