import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { hasMemoryWritesSince, isMemoryPathSync } from '@engram/memory-core/extraction/memory-writes';
import type { EngramPaths } from '@engram/memory-core/paths/memory-paths';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import type { TeamSyncPayload, TeamSyncResult } from '@engram/queue/jobs/team-sync';
import { tenantKey } from '@engram/queue/state/tenant-scope';
import { repoIdentityOf } from '@engram/team-memory/client/repo-identity';
import type { MemoryQueue } from './memory-queue.js';

// The foreground's side of team memory sync: enqueue a pull when a session opens and wait for it a short,
// bounded time (so the index loads what the team has, or what is already on disk); enqueue a debounced push
// after a turn that wrote into team/; enqueue a push for every project it saw when the process shuts down.
// It never fails a session: every problem becomes a status line.

export type TeamSyncStatus =
  | { status: 'pulled'; repo: string; result: TeamSyncResult }
  | { status: 'pending'; repo: string; jobId: string; waitedMs: number }
  | { status: 'queued'; repo: string; jobId: string }
  | { status: 'failed'; repo: string; reason: string }
  | { status: 'skipped'; reason: string };

/** Team memory sync as the foreground sees it (apps/agent's `AgentConfig['teamSync']`). */
export interface TeamSyncConfig {
  url: string;
  apiKey: string | undefined;
  /** How long a session-start pull is waited for before the session goes on with what is on disk. */
  sessionStartWaitMs: number;
  debounceMs: number;
}

interface Project {
  /** The hosted tenant whose session this is (workers sync its own area with its own credential). */
  tenant?: string;
  repo: string;
  projectDir: string;
  transcriptDir: string;
}

export class TeamSyncTrigger {
  private readonly projects = new Map<string, Project>();

  constructor(
    private readonly memory: MemoryQueue,
    private readonly config: TeamSyncConfig,
  ) {}

  async atSessionStart(paths: EngramPaths, sessionId?: string, tenant?: string): Promise<TeamSyncStatus> {
    const project = await this.project(paths, tenant);
    if ('reason' in project) return { status: 'skipped', reason: project.reason };
    const queued = await this.memory.enqueue(
      'team-sync',
      this.payload(project, 'pull', 'session-start', 0, sessionId),
    );
    if (queued.status !== 'queued') return { status: 'failed', repo: project.repo, reason: queued.reason };
    const started = Date.now();
    let delay = 25;
    for (;;) {
      const outcome = await this.memory
        .jobOutcome<TeamSyncResult>('team-sync', queued.jobId)
        .catch(
          () =>
            ({ finished: false }) as { finished: boolean; result?: TeamSyncResult; failedReason?: string },
        );
      if (outcome.finished) {
        return outcome.failedReason !== undefined || !outcome.result
          ? { status: 'failed', repo: project.repo, reason: outcome.failedReason ?? 'no result' }
          : { status: 'pulled', repo: project.repo, result: outcome.result };
      }
      const waited = Date.now() - started;
      if (waited >= this.config.sessionStartWaitMs) {
        return { status: 'pending', repo: project.repo, jobId: queued.jobId, waitedMs: waited };
      }
      await new Promise((r) => setTimeout(r, Math.min(delay, this.config.sessionStartWaitMs - waited)));
      delay = Math.min(delay * 2, 250);
    }
  }

  /** After a turn: a debounced push when the turn wrote into team/ (the push reads the disk when it runs). */
  async afterTurn(
    paths: EngramPaths,
    turnEntries: readonly ChainEntry[],
    sessionId?: string,
    tenant?: string,
  ): Promise<TeamSyncStatus> {
    if (!hasMemoryWritesSince(turnEntries, undefined, (p) => isMemoryPathSync(p, paths.teamDir))) {
      return { status: 'skipped', reason: 'this turn did not write team memory' };
    }
    return this.push(paths, 'write', this.config.debounceMs, sessionId, tenant);
  }

  async push(
    paths: EngramPaths,
    reason: TeamSyncPayload['reason'],
    debounceMs = 0,
    sessionId?: string,
    tenant?: string,
  ): Promise<TeamSyncStatus> {
    const project = await this.project(paths, tenant);
    if ('reason' in project) return { status: 'skipped', reason: project.reason };
    const queued = await this.memory.enqueue(
      'team-sync',
      this.payload(project, 'push', reason, debounceMs, sessionId),
    );
    return queued.status === 'queued'
      ? { status: 'queued', repo: project.repo, jobId: queued.jobId }
      : { status: 'failed', repo: project.repo, reason: queued.reason };
  }

  /**
   * At shutdown: one push per project this process opened, so what this session (or its extraction) wrote
   * into team/ is not left behind. It is not held back by a debounced push that is still waiting.
   */
  async flush(): Promise<TeamSyncStatus[]> {
    return Promise.all(
      [...this.projects.values()].map(async (project) => {
        const queued = await this.memory.enqueue('team-sync', this.payload(project, 'push', 'shutdown', 0));
        return queued.status === 'queued'
          ? ({ status: 'queued', repo: project.repo, jobId: queued.jobId } as const)
          : ({ status: 'failed', repo: project.repo, reason: queued.reason } as const);
      }),
    );
  }

  private async project(paths: EngramPaths, tenant?: string): Promise<Project | { reason: string }> {
    const projectDir = sanitizePath(paths.projectRoot);
    // Per tenant: two tenants' projects at one path string are two projects (two areas, two credentials).
    const id = tenantKey(tenant, projectDir);
    const known = this.projects.get(id);
    if (known) return known;
    const identity = await repoIdentityOf(paths.projectRoot);
    if (!identity.ok) return { reason: `team sync is off for this project: ${identity.reason}` };
    const project: Project = {
      ...(tenant ? { tenant } : {}),
      repo: identity.repo,
      projectDir,
      transcriptDir: sanitizePath(paths.cwd),
    };
    this.projects.set(id, project);
    return project;
  }

  private payload(
    project: Project,
    action: 'pull' | 'push',
    reason: TeamSyncPayload['reason'],
    debounceMs: number,
    sessionId?: string,
  ): TeamSyncPayload {
    return {
      ...(project.tenant ? { tenant: project.tenant } : {}),
      projectDir: project.projectDir,
      transcriptDir: project.transcriptDir,
      repo: project.repo,
      action,
      reason,
      debounceMs,
      ...(sessionId ? { sessionId } : {}),
      requestedAt: new Date().toISOString(),
    };
  }
}

/** One line for the user about the session-start pull, or undefined when there is nothing to say. */
export function describeTeamSync(status: TeamSyncStatus): string | undefined {
  switch (status.status) {
    case 'pulled': {
      const r = status.result;
      if (r.written.length === 0) return undefined;
      return `Team memory (${status.repo}): pulled ${r.written.length} file${r.written.length === 1 ? '' : 's'} (${r.written
        .map((w) => w.key)
        .join(', ')})`;
    }
    case 'pending':
      return `Team memory (${status.repo}): pull still running after ${status.waitedMs} ms; this session uses what is on disk.`;
    case 'failed':
      return `Team memory (${status.repo}): pull failed: ${status.reason}`;
    default:
      return undefined;
  }
}
