import { join, relative, sep } from 'node:path';
import type { projectRef } from '@engram/queue/jobs/common';
import { teamProtocolFor } from '@engram/team-memory/client/protocol';
import { STORE_SYNC_STATE_FILENAME, StoreSyncStateFile } from '@engram/team-memory/client/store-sync';
import type { z } from 'zod';
import type { HandlerDeps } from '../service.js';
import { pathsForJob } from './job-paths.js';

// A worker job (extraction, consolidation) that wrote into a store-backed team/ asks for a push that names it:
// the memory store records `created_by.job` on each version that push makes (docs/memory-stores.md "Worker
// authorship"). The project's repository comes from its store-sync state (every session start syncs it first);
// a project never store-synced, or bound to the seed protocol, gets nothing here — its files go out with the
// next ordinary push (shutdown, a person's write).

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
  if (!changedFiles.some((rel) => rel.startsWith(`${teamRel}/`))) return false;
  const file = new StoreSyncStateFile(join(paths.projectDir, STORE_SYNC_STATE_FILENAME));
  const saved = await file.loadAny();
  if (!saved?.repo) return false;
  const protocol = teamProtocolFor(sync.stores, saved.repo);
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
  });
  return true;
}
