import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import {
  drainOutbox,
  readExtractedMark,
  readSessionRecord,
} from '@engram/memory-core/extraction/session-record';
import { MEMORY_DIRNAME, PROJECTS_DIRNAME } from '@engram/memory-core/paths/memory-paths';
import type { PayloadOf } from '@engram/queue/catalog';
import type { ReconcilePayload, ReconcileResult } from '@engram/queue/jobs/reconcile';
import { SessionState } from '@engram/queue/state/session-state';
import type { HandlerContext } from '@engram/queue/worker';
import { memoryHomes, recordReconcileRun } from '../operations.js';
import type { HandlerDeps } from '../service.js';

// reconcile: one sweep over ENGRAM_HOME's sessions (those with a memory record, i.e. that asked for memory
// work). For each: hand its outbox (work its foreground could not enqueue) to the queue; then, if it has been
// idle for the quiet period and its transcript leaf is ahead of its extraction cursor, enqueue an extraction
// for that leaf. The extraction starts at the cursor, so a covered range is never extracted again; a session
// found covered is not read again until its transcript changes; a leaf enqueued MAX_TRIES times without the
// cursor reaching it (a job that fails for good) is left alone until the transcript changes.

/** Sessions idle longer than this are not looked at (their memory work is long settled or abandoned). */
export const RECONCILE_LOOKBACK_MS = 7 * 24 * 3600 * 1000;
/** At most this many sessions per sweep, newest transcripts first. */
export const RECONCILE_MAX_SESSIONS = 5_000;
const MAX_TRIES = 3;

interface SeenMark {
  size: number;
  mtimeMs: number;
  /** Covered: the cursor reached the leaf. Else how often this leaf was enqueued. */
  covered: boolean;
  tries: number;
}

export interface ReconcileDeps extends HandlerDeps {
  producer: NonNullable<HandlerDeps['producer']>;
  /** Sessions whose transcript changed more recently than this are still active (default from config). */
  quietMs?: number;
}

export function createReconcileHandler(deps: ReconcileDeps) {
  const { config, engine, logger } = deps;
  const quietMs = deps.quietMs ?? config.reconcileQuietMs;
  const { producer } = deps;
  // Each run is recorded (result or error) for `engram doctor`, /metrics and the memory browser.
  return async (payload: ReconcilePayload, ctx: HandlerContext): Promise<ReconcileResult> => {
    const startedAtMs = Date.now();
    const record = (run: { ok: true; result: ReconcileResult } | { ok: false; error: string }) =>
      recordReconcileRun(engine.state, {
        ...run,
        startedAtMs,
        finishedAtMs: Date.now(),
        intervalMs: config.reconcileIntervalMs,
      }).catch((error: Error) => logger.warn({ err: error.message }, 'reconcile run not recorded'));
    try {
      const result = await sweep(payload, ctx);
      await record({ ok: true, result });
      return result;
    } catch (error) {
      await record({ ok: false, error: (error as Error).message });
      throw error;
    }
  };

  async function sweep(_payload: ReconcilePayload, ctx: HandlerContext): Promise<ReconcileResult> {
    const log = logger.child({ queue: 'reconcile', jobId: ctx.job.id });
    const result: ReconcileResult = {
      sessions: 0,
      unchanged: 0,
      outboxHanded: 0,
      extractsEnqueued: 0,
      skipped: 0,
    };
    const now = Date.now();
    // The operator's home and every hosted tenant's own area (packages/tenants): a tenant's lost enqueue
    // converges like anyone's, and its extraction is enqueued with its tenant so it resolves in its area.
    const homes = await memoryHomes(config.engramHome);
    const candidates: Array<Candidate & { tenant?: string }> = [];
    for (const { home, tenant } of homes) {
      for (const c of await listSessionDirs(join(home, PROJECTS_DIRNAME), now)) {
        candidates.push(tenant ? { ...c, tenant } : c);
      }
    }
    for (const {
      sessionDir,
      transcriptDir,
      sessionId,
      transcriptPath,
      size,
      mtimeMs,
      tenant,
    } of candidates) {
      if (ctx.signal.aborted) break;
      const record = await readSessionRecord(sessionDir);
      if (!record || record.sessionId !== sessionId || record.transcriptDir !== transcriptDir) continue;
      result.sessions++;
      const outbox = await drainOutbox(sessionDir, async (item) => {
        await producer.enqueue(item.kind, item.payload as PayloadOf<typeof item.kind>);
        return true;
      });
      result.outboxHanded += outbox.handed;

      if (size === undefined || mtimeMs === undefined || now - mtimeMs < quietMs) {
        result.skipped++;
        continue;
      }
      const markKey = `reconcile-seen:${tenant ?? ''}:${transcriptDir}:${sessionId}`;
      const mark = await engine.state.getJson<SeenMark>(markKey);
      const same = mark && mark.size === size && mark.mtimeMs === mtimeMs;
      if (same && (mark.covered || mark.tries >= MAX_TRIES)) {
        result.unchanged++;
        continue;
      }
      const { entries } = await new TranscriptStore(transcriptPath).readAll().catch(() => ({ entries: [] }));
      const leaf = entries.at(-1);
      if (!leaf?.uuid) {
        result.skipped++;
        continue;
      }
      const leafSeq = entries.length;
      const state = new SessionState(
        engine.state,
        { tenant, transcriptDir, sessionId },
        { ttlMs: config.sessionStateTtlMs },
      );
      // A range another namespace's or engine's job finished (its mark beside the transcript) is covered too.
      const [stateCursor, diskCursor] = await Promise.all([
        state.extractCursor(),
        readExtractedMark(sessionDir),
      ]);
      const cursor =
        diskCursor && (!stateCursor || diskCursor.leafSeq > stateCursor.leafSeq) ? diskCursor : stateCursor;
      const setMark = (m: SeenMark) => engine.state.setJson(markKey, m, config.sessionStateTtlMs);
      if (cursor && cursor.leafSeq >= leafSeq) {
        await setMark({ size, mtimeMs, covered: true, tries: 0 });
        continue;
      }
      try {
        await producer.enqueue('extract', {
          sessionId,
          projectDir: record.projectDir,
          transcriptDir,
          leafUuid: leaf.uuid,
          leafSeq,
          requestedAt: new Date(now).toISOString(),
          ...(tenant ? { tenant } : {}),
        });
        result.extractsEnqueued++;
        await setMark({ size, mtimeMs, covered: false, tries: same ? mark.tries + 1 : 1 });
        log.info(
          { sessionId, fromSeq: cursor?.leafSeq ?? 0, leafSeq },
          'extraction behind the transcript; enqueued',
        );
      } catch (error) {
        result.skipped++;
        log.warn({ sessionId, err: (error as Error).message }, 'could not enqueue a missing extraction');
      }
    }
    if (result.outboxHanded || result.extractsEnqueued) log.info(result, 'reconciliation sweep');
    return result;
  }
}

interface Candidate {
  sessionDir: string;
  transcriptDir: string;
  sessionId: string;
  transcriptPath: string;
  size: number | undefined;
  mtimeMs: number | undefined;
}

/** Session directories under every transcript directory, with their transcript's size and mtime. */
async function listSessionDirs(projectsRoot: string, now: number): Promise<Candidate[]> {
  const out: Candidate[] = [];
  const dirs = await fs.readdir(projectsRoot, { withFileTypes: true }).catch(() => []);
  for (const dir of dirs) {
    if (!dir.isDirectory()) continue;
    const transcriptDir = dir.name;
    const base = join(projectsRoot, transcriptDir);
    const entries = await fs.readdir(base, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      if (!entry.isDirectory() || entry.name === MEMORY_DIRNAME || entry.name.startsWith('.')) continue;
      const transcriptPath = join(base, `${entry.name}.jsonl`);
      const stat = await fs.stat(transcriptPath).catch(() => undefined);
      // A session with an outbox but no transcript yet still gets its outbox drained.
      if (stat && now - stat.mtimeMs > RECONCILE_LOOKBACK_MS) continue;
      out.push({
        sessionDir: join(base, entry.name),
        transcriptDir,
        sessionId: entry.name,
        transcriptPath,
        size: stat?.size,
        mtimeMs: stat?.mtimeMs,
      });
    }
  }
  return out.sort((a, b) => (b.mtimeMs ?? now) - (a.mtimeMs ?? now)).slice(0, RECONCILE_MAX_SESSIONS);
}
