import { join, relative, sep } from 'node:path';
import { takeWriterTurn } from '@engram/memory-work/writer-turn';
import type { TeamSyncResult } from '@engram/queue/jobs/team-sync';
import { teamSyncQueueConfig } from '@engram/queue/queues/team-sync.config';
import { ProjectChanges, projectChangesScope } from '@engram/queue/state/project-changes';
import { type JobHandler, PermanentJobError } from '@engram/queue/worker';
import { TeamMemoryHttpClient } from '@engram/team-memory/client/http-client';
import {
  memoryStoreClient,
  STORE_SYNC_STATE_FILENAME,
  type StoreSyncReport,
  StoreSyncStateFile,
  syncTeamStore,
} from '@engram/team-memory/client/store-sync';
import {
  type PullReport,
  type PushReport,
  pullTeamMemory,
  pushTeamMemory,
} from '@engram/team-memory/client/sync';
import { TEAM_SYNC_STATE_FILENAME, TeamSyncStateFile } from '@engram/team-memory/client/sync-state';
import { TenantError, TenantStore } from '@engram/tenants/tenant-store';
import { Counter, type Registry } from 'prom-client';
import type { HandlerDeps } from '../service.js';
import { projectWriterLeaseKey } from './extract.js';
import { pathsForJob } from './job-paths.js';
import { teamProtocolForJob } from './team-protocol.js';

// team-sync: one pull or push of a project's team/ directory against the team memory service. The rules live
// in packages/team-memory; this is the wiring: paths from the payload, the service and key from the worker's
// configuration, the debounce, metrics, and logs that name a skipped secret's rule, never its value.

export interface TeamSyncMetrics {
  entries: Counter<'direction' | 'outcome'>;
  skipped: Counter<'direction' | 'reason'>;
  conflicts: Counter<'direction'>;
  bytes: Counter<'direction'>;
  runs: Counter<'action' | 'outcome'>;
}

export function createTeamSyncMetrics(registry: Registry): TeamSyncMetrics {
  const registers = [registry];
  return {
    entries: new Counter({
      name: 'engram_team_sync_entries_total',
      help: 'Team memory entries synced, by direction (pull, push) and outcome (written, pushed, unchanged, kept_local).',
      labelNames: ['direction', 'outcome'],
      registers,
    }),
    skipped: new Counter({
      name: 'engram_team_sync_skipped_total',
      help: 'Team memory entries not synced, by direction and reason (secret, too-large, invalid-key, …).',
      labelNames: ['direction', 'reason'],
      registers,
    }),
    conflicts: new Counter({
      name: 'engram_team_sync_conflicts_total',
      help: 'Team memory conflicts: 412s on push (each refreshed and retried), keys both sides changed on pull.',
      labelNames: ['direction'],
      registers,
    }),
    bytes: new Counter({
      name: 'engram_team_sync_bytes_total',
      help: 'Bytes of team memory content written on pull or sent on push.',
      labelNames: ['direction'],
      registers,
    }),
    runs: new Counter({
      name: 'engram_team_sync_runs_total',
      help: 'Team sync jobs by action and outcome (pulled, not-modified, no-data, pushed, up-to-date, suppressed, failed).',
      labelNames: ['action', 'outcome'],
      registers,
    }),
  };
}

export interface TeamSyncDeps extends HandlerDeps {
  /** Override the HTTP client's retry pacing (tests). */
  http?: { maxRetries?: number; retryBaseMs?: number; timeoutMs?: number };
}

export function createTeamSyncHandler(deps: TeamSyncDeps): JobHandler<'team-sync'> {
  const metrics = createTeamSyncMetrics(deps.metrics.registry);
  const { logger } = deps;
  return async (payload, ctx) => {
    const sync = deps.config.teamSync;
    if (!sync) {
      throw new PermanentJobError(
        'TEAM_SYNC_NOT_CONFIGURED',
        'Team sync is not configured on this worker: set ENGRAM_TEAM_SYNC_URL (and ENGRAM_TEAM_SYNC_KEY for the operator’s own sessions).',
      );
    }
    // Whose credential: a hosted tenant's job syncs with that tenant's own key (from the job's scope, which the
    // hosted service took from the authenticated request); only the operator's jobs use the worker's key.
    let apiKey: string;
    if (payload.tenant) {
      try {
        apiKey = await new TenantStore(deps.config.engramHome).teamSyncKey(payload.tenant);
      } catch (error) {
        if (error instanceof TenantError) throw new PermanentJobError(error.code, error.message);
        throw error;
      }
    } else if (sync.apiKey) {
      apiKey = sync.apiKey;
    } else {
      throw new PermanentJobError(
        'TEAM_SYNC_NOT_CONFIGURED',
        'This job has no tenant and the worker has no ENGRAM_TEAM_SYNC_KEY: set it to the operator’s tenant key.',
      );
    }
    if (payload.debounceMs > 0) {
      const wait = Date.parse(payload.requestedAt) + payload.debounceMs - Date.now();
      if (wait > 0) throw await ctx.defer(wait);
    }
    const paths = pathsForJob(deps.config, payload);
    const { protocol, source, binding } = await teamProtocolForJob(deps.config, payload);
    if (protocol.kind === 'memory-store') {
      // Through a memory store, one pass moves both ways and may write into team/ (a download, a conflict copy):
      // pull or push, it is one of the project's memory writers and takes the writer lease.
      const log = {
        queue: 'team-sync',
        jobId: ctx.job.id,
        project: payload.projectDir,
        storeId: protocol.storeId,
        binding: `${source}:${binding}`,
      };
      const writer = await takeWriterTurn(deps.engine.state, ctx, deps.waker, {
        key: projectWriterLeaseKey(payload),
        kind: 'team-sync',
        ttlMs: deps.config.lockDurationMs ?? teamSyncQueueConfig.lockDurationMs,
      });
      let report: StoreSyncReport;
      try {
        report = await syncTeamStore({
          teamDir: paths.teamDir,
          storeId: protocol.storeId,
          repo: payload.repo,
          client: memoryStoreClient({
            baseUrl: sync.url,
            apiKey,
            ...(deps.http?.maxRetries !== undefined ? { maxRetries: deps.http.maxRetries } : {}),
            ...(deps.http?.timeoutMs !== undefined ? { timeoutMs: deps.http.timeoutMs } : {}),
          }),
          state: new StoreSyncStateFile(join(paths.projectDir, STORE_SYNC_STATE_FILENAME)),
          ...(payload.author
            ? { authored: { author: payload.author, keys: payload.authoredKeys ?? [] } }
            : {}),
        });
      } catch (error) {
        const status = (error as { status?: number }).status;
        if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429)
          throw new PermanentJobError(
            'TEAM_STORE_REFUSED',
            `The memory store refused the sync: ${(error as Error).message}`,
          );
        throw error;
      } finally {
        await writer.release();
      }
      recordStore(metrics, report);
      for (const s of report.skipped) {
        if (s.reason === 'secret')
          logger.warn(
            { ...log, key: s.key, rule: s.detail },
            'team memory file not uploaded: it contains a secret',
          );
        else logger.info({ ...log, key: s.key, reason: s.reason }, 'team memory file not synced');
      }
      if (report.conflicts.length)
        logger.warn(
          { ...log, conflicts: report.conflicts },
          'team memory changed here and in the store; the store won, the local version is kept in the conflict copy',
        );
      const teamRel = relative(paths.memoryDir, paths.teamDir).split(sep).join('/');
      await new ProjectChanges(deps.engine.state, projectChangesScope(payload)).record(
        'team-pull',
        report.downloaded.map((w) => ({
          path: `${teamRel}/${w.key}`,
          action: w.change === 'updated' ? ('updated' as const) : ('created' as const),
        })),
      );
      // A local delete waits for its corroboration (a second pass, 30 s on): this pass looks again when the first
      // is due — a push by moving itself back in line, a pull (a session may be waiting for it) by asking for a
      // debounced push.
      const due = report.pendingDeletes.reduce((t, p) => Math.min(t, Date.parse(p.dueAt)), Infinity);
      if (due !== Infinity) {
        const wait = Math.max(1_000, due - Date.now() + 500);
        logger.info(
          { ...log, pendingDeletes: report.pendingDeletes.length, waitMs: wait },
          'local deletes wait for a second pass',
        );
        if (payload.action === 'push') throw await ctx.defer(wait);
        await deps.producer?.enqueue('team-sync', {
          ...(payload.tenant ? { tenant: payload.tenant } : {}),
          projectDir: payload.projectDir,
          transcriptDir: payload.transcriptDir,
          repo: payload.repo,
          action: 'push',
          reason: 'write',
          debounceMs: Math.min(wait, 60_000),
          ...(payload.sessionId ? { sessionId: payload.sessionId } : {}),
          requestedAt: new Date().toISOString(),
        });
      }
      return storeResult(payload.action, payload.repo, report);
    }
    const target = {
      teamDir: paths.teamDir,
      repo: payload.repo,
      http: new TeamMemoryHttpClient({ baseUrl: sync.url, apiKey, ...deps.http }),
      state: new TeamSyncStateFile(join(paths.projectDir, TEAM_SYNC_STATE_FILENAME)),
    };
    const log = { queue: 'team-sync', jobId: ctx.job.id, project: payload.projectDir, repo: payload.repo };
    if (payload.action === 'pull') {
      // A pull writes into the memory directory, so it is one of the project's memory writers: it takes the
      // same FIFO writer lease as extraction and consolidation (a consolidation restoring its snapshot can then
      // never undo files a concurrent pull wrote). Busy: the job parks in line, spending no attempt.
      const writer = await takeWriterTurn(deps.engine.state, ctx, deps.waker, {
        key: projectWriterLeaseKey(payload),
        kind: 'team-sync',
        ttlMs: deps.config.lockDurationMs ?? teamSyncQueueConfig.lockDurationMs,
      });
      let report: PullReport;
      try {
        report = await pullTeamMemory(target);
      } finally {
        await writer.release();
      }
      recordPull(metrics, report);
      for (const s of report.skipped)
        logger.warn({ ...log, key: s.key, reason: s.reason }, 'team memory entry not pulled');
      if (report.conflicts.length)
        logger.warn(
          { ...log, conflicts: report.conflicts },
          'team memory changed here and on the service; the service won, the local version is kept in the conflict copy',
        );
      // Every session of the project hears of the files the pull wrote on its next model call.
      const teamRel = relative(paths.memoryDir, paths.teamDir).split(sep).join('/');
      await new ProjectChanges(deps.engine.state, projectChangesScope(payload)).record(
        'team-pull',
        report.written.map((w) => ({
          path: `${teamRel}/${w.key}`,
          action: w.change === 'updated' ? ('updated' as const) : ('created' as const),
        })),
      );
      return pullResult(report);
    }
    const report = await pushTeamMemory(target);
    recordPush(metrics, report);
    for (const s of report.skipped) {
      // The rule id and the file's key, never the matched text.
      if (s.reason === 'secret')
        logger.warn(
          { ...log, key: s.key, ruleId: s.ruleId },
          'team memory file not uploaded: it contains a secret',
        );
      else logger.info({ ...log, key: s.key, reason: s.reason }, 'team memory file not uploaded');
    }
    if (report.outcome === 'failed') {
      const error = report.error!;
      if (error.permanent) {
        logger.warn(
          { ...log, code: error.code, status: error.status },
          'team memory push refused; suppressed until a file changes',
        );
        throw new PermanentJobError(error.code, error.message);
      }
      throw new Error(error.message);
    }
    if (report.outcome === 'suppressed')
      logger.info({ ...log, code: report.error?.code }, 'team memory push suppressed');
    return pushResult(report);
  };
}

function recordPull(m: TeamSyncMetrics, r: PullReport): void {
  m.runs.inc({ action: 'pull', outcome: r.outcome });
  if (r.written.length) m.entries.inc({ direction: 'pull', outcome: 'written' }, r.written.length);
  if (r.unchanged) m.entries.inc({ direction: 'pull', outcome: 'unchanged' }, r.unchanged);
  if (r.keptLocal.length) m.entries.inc({ direction: 'pull', outcome: 'kept_local' }, r.keptLocal.length);
  for (const s of r.skipped) m.skipped.inc({ direction: 'pull', reason: s.reason });
  if (r.conflicts.length) m.conflicts.inc({ direction: 'pull' }, r.conflicts.length);
  if (r.bytes) m.bytes.inc({ direction: 'pull' }, r.bytes);
}

function recordPush(m: TeamSyncMetrics, r: PushReport): void {
  m.runs.inc({ action: 'push', outcome: r.outcome });
  if (r.pushed.length) m.entries.inc({ direction: 'push', outcome: 'pushed' }, r.pushed.length);
  for (const s of r.skipped) m.skipped.inc({ direction: 'push', reason: s.reason });
  if (r.conflicts) m.conflicts.inc({ direction: 'push' }, r.conflicts);
  if (r.bytes) m.bytes.inc({ direction: 'push' }, r.bytes);
}

function recordStore(m: TeamSyncMetrics, r: StoreSyncReport): void {
  const outcome = r.uploaded.length ? 'pushed' : r.downloaded.length ? 'pulled' : 'up-to-date';
  m.runs.inc({ action: 'store-sync', outcome });
  if (r.uploaded.length) m.entries.inc({ direction: 'push', outcome: 'pushed' }, r.uploaded.length);
  if (r.downloaded.length) m.entries.inc({ direction: 'pull', outcome: 'written' }, r.downloaded.length);
  if (r.unchanged) m.entries.inc({ direction: 'pull', outcome: 'unchanged' }, r.unchanged);
  for (const s of r.skipped) m.skipped.inc({ direction: 'push', reason: s.reason });
  if (r.conflicts.length) m.conflicts.inc({ direction: 'pull' }, r.conflicts.length);
  const up = r.uploaded.reduce((n, u) => n + u.bytes, 0);
  const down = r.downloaded.reduce((n, d) => n + d.bytes, 0);
  if (up) m.bytes.inc({ direction: 'push' }, up);
  if (down) m.bytes.inc({ direction: 'pull' }, down);
}

function storeResult(action: 'pull' | 'push', repo: string, r: StoreSyncReport): TeamSyncResult {
  return {
    action,
    protocol: 'memory-store',
    repo,
    outcome: r.uploaded.length ? 'pushed' : r.downloaded.length ? 'pulled' : 'up-to-date',
    written: r.downloaded.map((d) => ({ key: d.key, change: d.change })),
    pushed: r.uploaded.map((u) => u.key),
    skipped: r.skipped.map((s) => ({ key: s.key, reason: s.reason })),
    keptLocal: [],
    conflicts: r.conflicts.length,
    bytes: r.uploaded.reduce((n, u) => n + u.bytes, 0) + r.downloaded.reduce((n, d) => n + d.bytes, 0),
    checksum: null,
  };
}

function pullResult(r: PullReport): TeamSyncResult {
  return {
    action: 'pull',
    repo: r.repo,
    outcome: r.outcome,
    written: r.written.map((w) => ({ key: w.key, change: w.change })),
    pushed: [],
    skipped: r.skipped.map((s) => ({ key: s.key, reason: s.reason })),
    keptLocal: r.keptLocal,
    conflicts: r.conflicts.length,
    bytes: r.bytes,
    checksum: r.checksum,
  };
}

function pushResult(r: PushReport): TeamSyncResult {
  return {
    action: 'push',
    repo: r.repo,
    outcome: r.outcome as 'pushed' | 'up-to-date' | 'suppressed',
    written: [],
    pushed: r.pushed.map((p) => p.key),
    skipped: r.skipped.map((s) => ({
      key: s.key,
      reason: s.reason,
      ...(s.ruleId ? { ruleId: s.ruleId } : {}),
    })),
    keptLocal: [],
    conflicts: r.conflicts,
    bytes: r.bytes,
    checksum: r.checksum,
  };
}
