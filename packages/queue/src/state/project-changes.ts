import type { StateStore } from './state-store.js';
import { tenantKey } from './tenant-scope.js';

// Memory changes made for a whole project rather than for one session: a consolidation (dream) rewrites the
// project's memory directory, a team pull writes into its team/ folder. Every session of the project that is
// running — or resumes later — should hear of them on its next model call, as it hears of its own
// extraction's receipts. The worker that made the change records it here, one short feed per source; each
// session keeps the newest entry it has announced per source (its marks, in its SessionState) and announces
// only what is newer. The feed is not a log: it keeps the last few changes, each naming at most
// MAX_CHANGE_MEMORIES files (`more` counts the rest).

export const PROJECT_CHANGE_SOURCES = ['dream', 'team-pull'] as const;
export type ProjectChangeSource = (typeof PROJECT_CHANGE_SOURCES)[number];

export interface ProjectMemoryChange {
  /** Relative to the memory directory (team files as `team/<key>`). */
  path: string;
  action: 'created' | 'updated' | 'deleted';
}

export interface ProjectChange {
  source: ProjectChangeSource;
  /**
   * Strictly increasing per source and project, and never below the time of the change (epoch ms): the mark
   * sessions compare against stays meaningful even after an idle feed expired and starts over.
   */
  seq: number;
  atMs: number;
  memories: ProjectMemoryChange[];
  more?: number;
}

/** Newest `seq` announced per source. */
export type ProjectChangeMarks = Partial<Record<ProjectChangeSource, number>>;

export const MAX_PROJECT_CHANGES = 5;
export const MAX_CHANGE_MEMORIES = 20;
/** Kept as long as session state: a session resumed within the retention period still hears of them. */
export const PROJECT_CHANGES_TTL_MS = 30 * 24 * 3600 * 1000;

/**
 * The feed's scope: the project, under its tenant when there is one (from the job payload or the session),
 * in the same `tenant:<id>:` scheme as every other per-project key (tenant-scope.ts).
 */
export function projectChangesScope(ref: { tenant?: string | undefined; projectDir: string }): string {
  return tenantKey(ref.tenant, ref.projectDir);
}

export function projectChangesKey(scope: string, source: ProjectChangeSource): string {
  // The scope leads, so a tenant's feed key starts with `tenant:<id>:` like its other keys.
  return `${scope}:project-changes:${source}`;
}

export class ProjectChanges {
  constructor(
    private readonly store: StateStore,
    /** projectChangesScope(…) */
    private readonly scope: string,
    private readonly ttlMs = PROJECT_CHANGES_TTL_MS,
  ) {}

  private async feed(source: ProjectChangeSource): Promise<ProjectChange[]> {
    const value = await this.store.getJson<ProjectChange[]>(projectChangesKey(this.scope, source));
    return Array.isArray(value) ? value : [];
  }

  /**
   * Records one change (nothing when no file changed). Each source has one writer per project at a time (the
   * consolidation lock; one pending team pull per project), so the read-modify-write is safe.
   */
  async record(
    source: ProjectChangeSource,
    memories: readonly ProjectMemoryChange[],
    atMs = Date.now(),
  ): Promise<ProjectChange | undefined> {
    if (memories.length === 0) return undefined;
    const feed = await this.feed(source);
    const seq = Math.max((feed.at(-1)?.seq ?? 0) + 1, atMs);
    const change: ProjectChange = {
      source,
      seq,
      atMs,
      memories: memories.slice(0, MAX_CHANGE_MEMORIES).map((m) => ({ path: m.path, action: m.action })),
      ...(memories.length > MAX_CHANGE_MEMORIES ? { more: memories.length - MAX_CHANGE_MEMORIES } : {}),
    };
    const next = [...feed, change].slice(-MAX_PROJECT_CHANGES);
    await this.store.setJson(projectChangesKey(this.scope, source), next, this.ttlMs);
    return change;
  }

  /** The newest seq per source: a session that starts now has seen everything up to here. */
  async newest(): Promise<ProjectChangeMarks> {
    const marks: ProjectChangeMarks = {};
    for (const source of PROJECT_CHANGE_SOURCES) {
      const last = (await this.feed(source)).at(-1);
      marks[source] = last?.seq ?? 0;
    }
    return marks;
  }

  /** Changes newer than `marks` (oldest first, per source), and the marks that cover them. */
  async since(marks: ProjectChangeMarks): Promise<{ changes: ProjectChange[]; marks: ProjectChangeMarks }> {
    const changes: ProjectChange[] = [];
    const next: ProjectChangeMarks = { ...marks };
    for (const source of PROJECT_CHANGE_SOURCES) {
      const seen = marks[source] ?? 0;
      const feed = await this.feed(source);
      for (const change of feed) if (change.seq > seen) changes.push(change);
      const last = feed.at(-1);
      if (last) next[source] = Math.max(seen, last.seq);
    }
    return { changes, marks: next };
  }
}
