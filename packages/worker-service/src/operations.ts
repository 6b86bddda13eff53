import { type Dirent, promises as fs } from 'node:fs';
import { join } from 'node:path';
import { OUTBOX_FILENAME, type OutboxItem, readOutbox } from '@engram/memory-core/extraction/session-record';
import { MEMORY_DIRNAME, PROJECTS_DIRNAME } from '@engram/memory-core/paths/memory-paths';
import type { ReconcileResult } from '@engram/queue/jobs/reconcile';
import type { StateStore } from '@engram/queue/state/state-store';
import { TENANT_ID_PATTERN, tenantHomeDir, tenantsRoot } from '@engram/tenants/tenant-store';

// What an operator needs to see of the machinery that makes memory work converge: the outboxes (memory work a
// foreground could not enqueue, waiting in `<session>/memory-outbox.json` for the foreground or the reconcile
// sweep to hand it to the queue) and the reconcile sweep's last run. `engram doctor`, the workers' /metrics
// and the memory browser read the same report, so they cannot disagree.

/** An outbox item older than this means the reconcile sweep is not draining it (the sweep runs every minute). */
export const DEFAULT_OUTBOX_MAX_AGE_MS = 10 * 60_000;
/** A reconcile run older than this many intervals means no worker runs the sweep. */
export const RECONCILE_STALE_INTERVALS = 3;
/** The state key of the reconcile sweep's last run (one per namespace, like the scheduler). */
export const RECONCILE_RUN_KEY = 'reconcile:last-run';
const OUTBOX_KINDS = ['extract', 'session-memory', 'dream'] as const;

/** ENGRAM_HOME's own area and every hosted tenant's (packages/tenants), each with its tenant id. */
export async function memoryHomes(engramHome: string): Promise<Array<{ home: string; tenant?: string }>> {
  const homes: Array<{ home: string; tenant?: string }> = [{ home: engramHome }];
  const tenantDirs = await fs
    .readdir(tenantsRoot(engramHome), { withFileTypes: true })
    .catch(() => [] as Dirent[]);
  for (const d of tenantDirs.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (d.isDirectory() && TENANT_ID_PATTERN.test(d.name)) {
      homes.push({ home: tenantHomeDir(engramHome, d.name), tenant: d.name });
    }
  }
  return homes;
}

export interface OutboxInfo {
  tenant?: string;
  transcriptDir: string;
  sessionId: string;
  path: string;
  items: number;
  kinds: OutboxItem['kind'][];
  /** When the oldest item was put there. */
  oldestAtMs: number;
}

export interface OutboxBacklog {
  /** Every non-empty outbox, oldest item first. */
  outboxes: OutboxInfo[];
  items: number;
  oldestAtMs?: number;
  byKind: Record<OutboxItem['kind'], { items: number; oldestAtMs?: number }>;
}

/** Every outbox under ENGRAM_HOME (all sessions, whatever their age: a stuck one is what this is for). */
export async function scanOutboxes(engramHome: string): Promise<OutboxBacklog> {
  const outboxes: OutboxInfo[] = [];
  const byKind = Object.fromEntries(OUTBOX_KINDS.map((k) => [k, { items: 0 }])) as OutboxBacklog['byKind'];
  for (const { home, tenant } of await memoryHomes(engramHome)) {
    const root = join(home, PROJECTS_DIRNAME);
    const dirs = await fs.readdir(root, { withFileTypes: true }).catch(() => [] as Dirent[]);
    for (const dir of dirs) {
      if (!dir.isDirectory()) continue;
      const sessions = await fs.readdir(join(root, dir.name), { withFileTypes: true }).catch(() => []);
      for (const s of sessions) {
        if (!s.isDirectory() || s.name === MEMORY_DIRNAME || s.name.startsWith('.')) continue;
        const sessionDir = join(root, dir.name, s.name);
        const items = await readOutbox(sessionDir).catch(() => [] as OutboxItem[]);
        if (items.length === 0) continue;
        outboxes.push({
          ...(tenant ? { tenant } : {}),
          transcriptDir: dir.name,
          sessionId: s.name,
          path: join(sessionDir, OUTBOX_FILENAME),
          items: items.length,
          kinds: [...new Set(items.map((i) => i.kind))],
          oldestAtMs: Math.min(...items.map((i) => i.atMs)),
        });
        for (const item of items) {
          const k = byKind[item.kind];
          k.items++;
          k.oldestAtMs = Math.min(k.oldestAtMs ?? item.atMs, item.atMs);
        }
      }
    }
  }
  outboxes.sort((a, b) => a.oldestAtMs - b.oldestAtMs);
  const items = outboxes.reduce((n, o) => n + o.items, 0);
  return {
    outboxes,
    items,
    ...(outboxes.length ? { oldestAtMs: outboxes[0]!.oldestAtMs } : {}),
    byKind,
  };
}

/** The reconcile sweep's last run, as the handler records it. */
export interface ReconcileRun {
  startedAtMs: number;
  finishedAtMs: number;
  ok: boolean;
  result?: ReconcileResult;
  error?: string;
  /** The recording worker's sweep interval (ENGRAM_RECONCILE_INTERVAL_MS). */
  intervalMs: number;
  /** The last run that succeeded (this one, or an earlier one). */
  lastSuccessAtMs?: number;
}

export async function recordReconcileRun(
  state: StateStore,
  run: Omit<ReconcileRun, 'lastSuccessAtMs'>,
): Promise<void> {
  const previous = await readReconcileRun(state);
  const lastSuccessAtMs = run.ok ? run.finishedAtMs : previous?.lastSuccessAtMs;
  await state.setJson(RECONCILE_RUN_KEY, {
    ...run,
    ...(lastSuccessAtMs !== undefined ? { lastSuccessAtMs } : {}),
  });
}

export async function readReconcileRun(state: StateStore): Promise<ReconcileRun | undefined> {
  return state.getJson<ReconcileRun>(RECONCILE_RUN_KEY);
}

export const WORKERS_MODEL_KEY = 'workers:model';

/** Whether the most recently started worker service has a model (recorded at its start, read by doctor). */
export interface WorkersModel {
  configured: boolean;
  startedAtMs: number;
  queues: string[];
}

export async function recordWorkersModel(state: StateStore, model: WorkersModel): Promise<void> {
  await state.setJson(WORKERS_MODEL_KEY, model);
}

export async function readWorkersModel(state: StateStore): Promise<WorkersModel | undefined> {
  return state.getJson<WorkersModel>(WORKERS_MODEL_KEY);
}

export interface OperationsReport {
  atMs: number;
  outboxMaxAgeMs: number;
  backlog: OutboxBacklog;
  /** Undefined: no sweep recorded in this namespace yet. */
  reconcile?: ReconcileRun;
}

export async function operationsReport(opts: {
  engramHome: string;
  state: StateStore;
  outboxMaxAgeMs?: number;
  now?: number;
}): Promise<OperationsReport> {
  const [backlog, reconcile] = await Promise.all([
    scanOutboxes(opts.engramHome),
    readReconcileRun(opts.state),
  ]);
  return {
    atMs: opts.now ?? Date.now(),
    outboxMaxAgeMs: opts.outboxMaxAgeMs ?? DEFAULT_OUTBOX_MAX_AGE_MS,
    backlog,
    ...(reconcile ? { reconcile } : {}),
  };
}

/** One finding, as doctor prints it and the memory browser shows it. */
export interface OperationsCheck {
  ok: boolean;
  name: string;
  detail: string;
  fix?: string;
}

/** "42 s", "5 min", "3 h", "2 days". */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 90) return `${s} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 129_600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} days`;
}

/** Outboxes listed one by one, at most this many (the oldest); the summary line counts them all. */
const LISTED_OUTBOXES = 10;

/**
 * The report as checks: one line for the outboxes together, one per outbox (the oldest ten), one for the
 * reconcile sweep. An outbox whose oldest item is older than the threshold fails, and so does a sweep that
 * failed, never ran, or last ran more than RECONCILE_STALE_INTERVALS intervals ago.
 */
export function operationsChecks(report: OperationsReport): OperationsCheck[] {
  const { backlog, atMs, outboxMaxAgeMs } = report;
  const checks: OperationsCheck[] = [];
  const staleFix =
    'the reconcile sweep hands outboxes to the queue: check that workers consume the reconcile queue ' +
    '(`engram doctor` "workers: reconcile") and that the queue engine is reachable from them';
  if (backlog.outboxes.length === 0) {
    checks.push({ ok: true, name: 'outboxes', detail: 'empty (no memory work waiting to be queued)' });
  } else {
    const oldestAge = atMs - (backlog.oldestAtMs ?? atMs);
    const stale = backlog.outboxes.filter((o) => atMs - o.oldestAtMs > outboxMaxAgeMs).length;
    const kinds = Object.entries(backlog.byKind)
      .filter(([, v]) => v.items > 0)
      .map(([k, v]) => `${k} ${v.items}`)
      .join(', ');
    checks.push({
      ok: stale === 0,
      name: 'outboxes',
      detail:
        `${backlog.items} item${backlog.items === 1 ? '' : 's'} waiting in ${backlog.outboxes.length} ` +
        `outbox${backlog.outboxes.length === 1 ? '' : 'es'} (${kinds}), oldest ${formatAge(oldestAge)}` +
        (stale ? `; ${stale} older than ${formatAge(outboxMaxAgeMs)}` : ''),
      ...(stale ? { fix: staleFix } : {}),
    });
    for (const o of backlog.outboxes.slice(0, LISTED_OUTBOXES)) {
      const age = atMs - o.oldestAtMs;
      const old = age > outboxMaxAgeMs;
      checks.push({
        ok: !old,
        name: `outbox ${o.tenant ? `${o.tenant}/` : ''}${o.transcriptDir}/${o.sessionId}`,
        detail: `${o.items} item${o.items === 1 ? '' : 's'} (${o.kinds.join(', ')}), oldest ${formatAge(age)}${
          old ? ` (over ${formatAge(outboxMaxAgeMs)})` : ''
        }`,
      });
    }
    if (backlog.outboxes.length > LISTED_OUTBOXES) {
      checks.push({
        ok: true,
        name: 'outboxes (more)',
        detail: `${backlog.outboxes.length - LISTED_OUTBOXES} more, newer than those listed`,
      });
    }
  }
  checks.push(reconcileCheck(report));
  return checks;
}

function reconcileCheck(report: OperationsReport): OperationsCheck {
  const name = 'reconcile';
  const run = report.reconcile;
  if (!run) {
    return {
      ok: false,
      name,
      detail: 'no sweep recorded in this namespace',
      fix: 'start workers that consume the reconcile queue (`engram workers`, or ENGRAM_QUEUES including reconcile)',
    };
  }
  const ago = formatAge(report.atMs - run.finishedAtMs);
  if (!run.ok) {
    const success = run.lastSuccessAtMs
      ? `last success ${formatAge(report.atMs - run.lastSuccessAtMs)} ago`
      : 'no success recorded';
    return {
      ok: false,
      name,
      detail: `last sweep ${ago} ago failed: ${run.error ?? 'unknown error'} (${success})`,
      fix: "see the workers' log for the reconcile queue",
    };
  }
  const r = run.result;
  const summary = r
    ? `${r.sessions} sessions, ${r.outboxHanded} outbox items handed, ${r.extractsEnqueued} extractions enqueued, ` +
      `${r.unchanged} unchanged, ${r.skipped} skipped`
    : 'no result';
  const stale = report.atMs - run.finishedAtMs > RECONCILE_STALE_INTERVALS * run.intervalMs;
  return {
    ok: !stale,
    name,
    detail: `last sweep ${ago} ago ok (${summary}; every ${formatAge(run.intervalMs)})${
      stale ? `; more than ${RECONCILE_STALE_INTERVALS} intervals ago` : ''
    }`,
    ...(stale
      ? { fix: 'no worker has run the sweep lately: check that workers consume the reconcile queue' }
      : {}),
  };
}
