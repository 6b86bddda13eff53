import type { MemoryQueue, MemoryWorkStatus, SessionRef } from '@engram/memory-client/memory-queue';
import {
  DREAM_MIN_HOURS,
  DREAM_MIN_SESSIONS,
  runDreamGate,
  SESSION_SCAN_INTERVAL_MS,
} from '@engram/memory-core/dream/gate';
import { listSessionsTouchedSince } from '@engram/memory-core/dream/sessions';
import { DREAM_RECEIPT_TTL_MS, type DreamResult, dreamReceiptKey } from '@engram/queue/jobs/dream';
import { lastConsolidatedAt, tryClaimSessionScan } from '@engram/queue/state/consolidation-lock';

// autoDream's gate at turn end (docs/design.md §5 `dream`), cheapest check first: ≥24 h since the project's last
// consolidation (shared through the queue's store), a 10-minute scan throttle shared by every replica, ≥5 other
// sessions touched since; then one dream per project is enqueued (deduplicated per project).

export interface DreamThresholds {
  minHours: number;
  minSessions: number;
  scanIntervalMs: number;
}

export const DEFAULT_DREAM_THRESHOLDS: DreamThresholds = {
  minHours: DREAM_MIN_HOURS,
  minSessions: DREAM_MIN_SESSIONS,
  scanIntervalMs: SESSION_SCAN_INTERVAL_MS,
};

export async function maybeEnqueueDream(
  memory: MemoryQueue,
  ref: SessionRef,
  leafUuid: string,
  thresholds: DreamThresholds,
  nowMs = Date.now(),
): Promise<MemoryWorkStatus> {
  const scope = memory.projectRef(ref);
  try {
    const store = memory.engine.state;
    await store.ready();
    const last = await lastConsolidatedAt(store, scope);
    let sessionIds: string[] = [];
    const gate = await runDreamGate({
      nowMs,
      lastConsolidatedAtMs: last,
      minHours: thresholds.minHours,
      minSessions: thresholds.minSessions,
      acquireScanThrottle: () => tryClaimSessionScan(store, scope, thresholds.scanIntervalMs),
      countSessionsTouched: async () => {
        sessionIds = await listSessionsTouchedSince(ref.paths.transcriptDir, last ?? 0, {
          excludeSessionId: ref.sessionId,
        });
        return sessionIds.length;
      },
    });
    if (!gate.open) return { status: 'skipped', reason: `dream gate: ${gate.blockedBy}` };
    return memory.enqueue('dream', {
      ...scope,
      triggeredBy: ref.sessionId,
      sessionIds: sessionIds.slice(0, 50),
      force: false,
      requestedAt: new Date(nowMs).toISOString(),
      sessionId: ref.sessionId,
      leafUuid,
      minHours: thresholds.minHours,
      minSessions: thresholds.minSessions,
    });
  } catch (error) {
    memory.failures++;
    return { status: 'not-queued', reason: (error as Error).message };
  }
}

export type DreamReceipt = DreamResult & { atMs: number };

/** The last consolidation's receipt for the project, once: later calls return undefined until a new one. */
export async function takeNewDreamReceipt(
  memory: MemoryQueue,
  ref: SessionRef,
): Promise<DreamReceipt | undefined> {
  const scope = memory.projectRef(ref);
  const store = memory.engine.state;
  const receipt = await store.getJson<DreamReceipt>(dreamReceiptKey(scope));
  if (!receipt) return undefined;
  const shownKey = `${dreamReceiptKey(scope)}:shown`;
  const shown = await store.getJson<number>(shownKey);
  if (shown !== undefined && shown >= receipt.atMs) return undefined;
  await store.setJson(shownKey, receipt.atMs, DREAM_RECEIPT_TTL_MS);
  return receipt;
}

export function describeDreamReceipt(r: DreamResult): string {
  if (r.outcome !== 'consolidated') return `Consolidation ${r.outcome}${r.reason ? `: ${r.reason}` : ''}`;
  const f = r.files;
  return (
    `Consolidated memory: ${f.created.length} created, ${f.updated.length} updated, ${f.deleted.length} deleted; ` +
    `MEMORY.md ${r.indexLines.before} → ${r.indexLines.after} lines` +
    (r.snapshotId ? ` (snapshot ${r.snapshotId}; \`engram memory restore ${r.snapshotId}\` undoes it)` : '')
  );
}
