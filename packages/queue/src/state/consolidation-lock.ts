import { EngramError } from '@engram/errors/engram-error';
import type { StateStore } from './state-store.js';
import { type ProjectScope, projectDirOf, projectKey } from './tenant-scope.js';

// The per-project consolidation lock (docs/design.md §5 dream; docs/claude-code-memory.md §8.5–9), rebuilt for many
// machines on the StateStore primitives only, so it holds on every engine (Redis, PostgreSQL):
//
// - a lease `consolidation:<projectDir>` with a fencing token: one holder at a time; a holder that stops
//   renewing (heartbeat) is dead after `ttlMs` and the lease is free again;
// - a versioned record `consolidation:<projectDir>:last` whose timestamp IS "last consolidated at" — the
//   start time of the last consolidation, as the reference's lock-file mtime is. Its seq is derived from the
//   fencing token (2·token when a run starts, 2·token+1 when it ends), so a holder that lost its lease can
//   never overwrite the record of a newer one.
//
// A run that fails — or whose holder dies (its lease expires while the record still says `running`) — rolls
// the timestamp back to what it was before the run, so the gate opens again after the scan throttle instead
// of waiting out a whole minHours. Times come from the store's clock (the lease expiry), not a worker's.

export interface ConsolidationRecord {
  status: 'running' | 'done' | 'rolled-back' | 'recorded';
  /** running: the run's start; done/recorded: last consolidated at; rolled-back: the restored time (0 = never). */
  atMs: number;
  /** The time to restore if this run fails or its holder dies (0 = never). */
  priorAtMs: number;
  holder: string;
  token: number;
}

export interface ConsolidationState {
  /** Start of the last consolidation that counts (undefined = never). */
  lastConsolidatedAtMs: number | undefined;
  /** Whether the store has any record for the project (false: never run or recorded through Engram). */
  recorded: boolean;
  /** The run holding the lock right now, if any. */
  running?: { holder: string; token: number; startedAtMs: number; expiresAtMs: number };
}

export interface ConsolidationLease {
  holder: string;
  /** Fencing token of this run; strictly increasing per project. */
  token: number;
  /** This run's start — the new "last consolidated at" while it runs and after it succeeds. */
  startedAtMs: number;
  /** "Last consolidated at" before this run (undefined = never): what a failure restores. */
  priorConsolidatedAtMs: number | undefined;
  /** Extends the lease by its TTL. False when it was lost (expired and taken, or broken): stop writing. */
  heartbeat(): Promise<boolean>;
  /**
   * Ends the run and frees the lock. success: the start time stays as "last consolidated at"; failure: the
   * prior time is restored. Returns false when a newer holder's record made this one stale (nothing written).
   * Idempotent.
   */
  release(outcome: { success: boolean }): Promise<boolean>;
}

export class ConsolidationLockError extends EngramError {
  constructor(projectDir: string) {
    super(
      'FENCE_REGRESSED',
      `The consolidation record of ${projectDir} is ahead of its fencing counter (the state store was partly ` +
        'reset?). Delete the consolidation keys of this project in the state store, then retry.',
      { retryable: false },
    );
  }
}

export function consolidationLeaseKey(project: ProjectScope): string {
  return projectKey(project, (dir) => `consolidation:${dir}`);
}

function recordKey(project: ProjectScope): string {
  return projectKey(project, (dir) => `consolidation:${dir}:last`);
}

function scanKey(project: ProjectScope): string {
  return projectKey(project, (dir) => `consolidation:${dir}:scan`);
}

/** The time a record stands for once its run is over (or, for a dead running holder, the rolled-back time). */
function settledTime(record: ConsolidationRecord): number {
  return record.status === 'running' ? record.priorAtMs : record.atMs;
}

const orUndefined = (ms: number): number | undefined => (ms > 0 ? ms : undefined);

/** "Last consolidated at" and the running holder, as every replica sees them. */
export async function readConsolidationState(
  store: StateStore,
  projectDir: ProjectScope,
): Promise<ConsolidationState> {
  const [versioned, lease] = await Promise.all([
    store.getVersioned<ConsolidationRecord>(recordKey(projectDir)),
    store.getLease(consolidationLeaseKey(projectDir)),
  ]);
  const record = versioned?.value;
  if (!record) return { lastConsolidatedAtMs: undefined, recorded: false };
  if (record.status === 'running' && lease && lease.token === record.token) {
    return {
      lastConsolidatedAtMs: record.atMs,
      recorded: true,
      running: {
        holder: lease.holder,
        token: lease.token,
        startedAtMs: record.atMs,
        expiresAtMs: lease.expiresAtMs,
      },
    };
  }
  // A `running` record without its lease: the holder died; the run counts as rolled back.
  return { lastConsolidatedAtMs: orUndefined(settledTime(record)), recorded: true };
}

/** Start of the project's last consolidation (a running one counts), or undefined when there was none. */
export async function lastConsolidatedAt(
  store: StateStore,
  projectDir: ProjectScope,
): Promise<number | undefined> {
  return (await readConsolidationState(store, projectDir)).lastConsolidatedAtMs;
}

/**
 * Takes the project's consolidation lock if nobody holds a live one, recording this run's start as "last
 * consolidated at". Returns undefined when another holder is alive.
 */
export async function tryAcquireConsolidation(
  store: StateStore,
  projectDir: ProjectScope,
  holder: string,
  options: { ttlMs: number },
): Promise<ConsolidationLease | undefined> {
  const leaseKey = consolidationLeaseKey(projectDir);
  const lease = await store.acquireLease(leaseKey, holder, options.ttlMs);
  if (!lease) return undefined;
  const { token } = lease;
  const startedAtMs = lease.expiresAtMs - options.ttlMs;
  let prior = 0;
  try {
    const previous = (await store.getVersioned<ConsolidationRecord>(recordKey(projectDir)))?.value;
    // We hold the lease, so a `running` record belongs to a dead holder: restore what it would have.
    prior = previous ? settledTime(previous) : 0;
    const running: ConsolidationRecord = {
      status: 'running',
      atMs: startedAtMs,
      priorAtMs: prior,
      holder,
      token,
    };
    if (!(await store.setIfNewer(recordKey(projectDir), 2 * token, running))) {
      throw new ConsolidationLockError(projectDirOf(projectDir));
    }
  } catch (error) {
    await store.releaseLease(leaseKey, holder, token).catch(() => false);
    throw error;
  }

  let released: Promise<boolean> | undefined;
  return {
    holder,
    token,
    startedAtMs,
    priorConsolidatedAtMs: orUndefined(prior),
    heartbeat: () => store.renewLease(leaseKey, holder, token, options.ttlMs),
    release: ({ success }) => {
      released ??= (async () => {
        const final: ConsolidationRecord = success
          ? { status: 'done', atMs: startedAtMs, priorAtMs: prior, holder, token }
          : { status: 'rolled-back', atMs: prior, priorAtMs: prior, holder, token };
        try {
          return await store.setIfNewer(recordKey(projectDir), 2 * token + 1, final);
        } finally {
          await store.releaseLease(leaseKey, holder, token).catch(() => false);
        }
      })();
      return released;
    },
  };
}

/**
 * Records a consolidation that happened elsewhere (e.g. imported from a Claude Code `.consolidate-lock`
 * mtime, or a manual run): takes the lock briefly and sets "last consolidated at" to `atMs`. Returns false
 * when a consolidation is running.
 */
export async function recordConsolidatedAt(
  store: StateStore,
  projectDir: ProjectScope,
  atMs: number,
  holder = `record:${process.pid}`,
): Promise<boolean> {
  const lease = await tryAcquireConsolidation(store, projectDir, holder, { ttlMs: 30_000 });
  if (!lease) return false;
  const record: ConsolidationRecord = {
    status: 'recorded',
    atMs,
    priorAtMs: lease.priorConsolidatedAtMs ?? 0,
    holder,
    token: lease.token,
  };
  try {
    return await store.setIfNewer(recordKey(projectDir), 2 * lease.token + 1, record);
  } finally {
    await store.releaseLease(consolidationLeaseKey(projectDir), holder, lease.token).catch(() => false);
  }
}

/**
 * The gate's per-project scan throttle, shared by every replica: true for at most one caller per
 * `intervalMs` (the reference's SESSION_SCAN_INTERVAL_MS is 10 minutes).
 */
export function tryClaimSessionScan(
  store: StateStore,
  projectDir: ProjectScope,
  intervalMs: number,
): Promise<boolean> {
  return store.setIfAbsent(scanKey(projectDir), { atMs: Date.now() }, intervalMs);
}
