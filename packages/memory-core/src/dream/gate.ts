// The autoDream gate (docs/claude-code-memory.md §8.3–4): cheapest check first, so a turn whose project was
// consolidated recently pays for one timestamp read and nothing else.
//   1. time     — at least `minHours` since the project's last consolidation;
//   2. throttle — at most one session scan per project every SESSION_SCAN_INTERVAL_MS (shared across replicas
//                 by the caller, e.g. a StateStore setIfAbsent). Without it, once the time gate passes but the
//                 session gate fails, every turn would rescan, because the timestamp never moves;
//   3. sessions — at least `minSessions` other sessions whose transcripts changed since then.
// Only when all three pass is a dream enqueued (and the worker re-checks under the lock).

export const DREAM_MIN_HOURS = 24;
export const DREAM_MIN_SESSIONS = 5;
export const SESSION_SCAN_INTERVAL_MS = 10 * 60_000;

const HOUR_MS = 3_600_000;

export type DreamGateBlock = 'time' | 'throttle' | 'sessions';

export interface DreamGateResult {
  open: boolean;
  blockedBy?: DreamGateBlock;
  /** Hours since the last consolidation (since the epoch when there was none). */
  hoursSince: number;
  /** Sessions touched since then; 0 when the gate stopped before counting them. */
  sessionCount: number;
}

export interface DreamGateThresholds {
  /** Default DREAM_MIN_HOURS; a value that is not a finite positive number falls back to it. */
  minHours?: number;
  /** Default DREAM_MIN_SESSIONS; a value that is not a finite positive number falls back to it. */
  minSessions?: number;
}

export interface DreamGateInput extends DreamGateThresholds {
  nowMs: number;
  /** Start time of the last consolidation; undefined or 0 when the project was never consolidated. */
  lastConsolidatedAtMs: number | undefined;
  /** Whether this caller won the per-project scan throttle (only consulted once the time gate passed). */
  scanThrottleAcquired: boolean;
  /** Sessions touched since the last consolidation, excluding the current one. */
  sessionsTouched: number;
}

/** Thresholds as the reference validates them: each must be a finite positive number, else the default. */
export function resolveDreamThresholds(t: DreamGateThresholds = {}): {
  minHours: number;
  minSessions: number;
} {
  const valid = (v: number | undefined): v is number => typeof v === 'number' && Number.isFinite(v) && v > 0;
  return {
    minHours: valid(t.minHours) ? t.minHours : DREAM_MIN_HOURS,
    minSessions: valid(t.minSessions) ? t.minSessions : DREAM_MIN_SESSIONS,
  };
}

export function hoursSince(nowMs: number, lastConsolidatedAtMs: number | undefined): number {
  return Math.max(0, nowMs - (lastConsolidatedAtMs ?? 0)) / HOUR_MS;
}

/** Pure evaluation over precomputed inputs, in the reference's order. Later inputs are ignored once one blocks. */
export function evaluateDreamGate(input: DreamGateInput): DreamGateResult {
  const { minHours, minSessions } = resolveDreamThresholds(input);
  const hours = hoursSince(input.nowMs, input.lastConsolidatedAtMs);
  if (hours < minHours) return { open: false, blockedBy: 'time', hoursSince: hours, sessionCount: 0 };
  if (!input.scanThrottleAcquired) {
    return { open: false, blockedBy: 'throttle', hoursSince: hours, sessionCount: 0 };
  }
  const sessionCount = Math.max(0, Math.floor(input.sessionsTouched));
  if (sessionCount < minSessions) {
    return { open: false, blockedBy: 'sessions', hoursSince: hours, sessionCount };
  }
  return { open: true, hoursSince: hours, sessionCount };
}

export interface LazyDreamGateInput extends DreamGateThresholds {
  nowMs: number;
  lastConsolidatedAtMs: number | undefined;
  /** Claims the scan throttle; called only when the time gate passed. */
  acquireScanThrottle: () => Promise<boolean>;
  /** Counts sessions touched since the last consolidation; called only when the throttle was won. */
  countSessionsTouched: () => Promise<number>;
}

/**
 * The same gate with the costly steps supplied as functions and called only when the cheaper ones passed:
 * what the foreground runs at turn end (one timestamp read when the time gate blocks).
 */
export async function runDreamGate(input: LazyDreamGateInput): Promise<DreamGateResult> {
  const base = { ...input, scanThrottleAcquired: true, sessionsTouched: Number.POSITIVE_INFINITY };
  const timeOnly = evaluateDreamGate(base);
  if (timeOnly.blockedBy === 'time') return timeOnly;
  const scanThrottleAcquired = await input.acquireScanThrottle();
  if (!scanThrottleAcquired) return evaluateDreamGate({ ...base, scanThrottleAcquired });
  const sessionsTouched = await input.countSessionsTouched();
  return evaluateDreamGate({ ...base, scanThrottleAcquired, sessionsTouched });
}
