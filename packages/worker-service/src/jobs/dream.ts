import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import type { ModelClient, Usage } from '@engram/agent-runtime/model/client';
import type { ToolUseBlock } from '@engram/agent-runtime/model/types';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import { buildConsolidationPrompt } from '@engram/memory-core/dream/consolidation-prompt';
import { finalizeConsolidation } from '@engram/memory-core/dream/finalize';
import { evaluateDreamGate } from '@engram/memory-core/dream/gate';
import {
  readConsolidateLockFile,
  rollbackConsolidateLockFile,
  stampConsolidateLockFile,
} from '@engram/memory-core/dream/lock-file';
import { type DreamManifest, readDreamManifest } from '@engram/memory-core/dream/manifest';
import { consolidationPolicy } from '@engram/memory-core/dream/policy';
import {
  advanceDreamProgress,
  type DreamProgressState,
  initialDreamProgress,
} from '@engram/memory-core/dream/progress';
import { assessConsolidation, type ConsolidationAssessment } from '@engram/memory-core/dream/safety';
import { listSessionsTouchedSince } from '@engram/memory-core/dream/sessions';
import { ENTRYPOINT_NAME, type EngramPaths } from '@engram/memory-core/paths/memory-paths';
import { buildMemoryPrompt } from '@engram/memory-core/prompts/memory-prompt';
import { type ForkSource, runForkPipeline } from '@engram/memory-work/pipeline';
import { snapshotTransaction } from '@engram/memory-work/transactions';
import {
  DREAM_RECEIPT_TTL_MS,
  type DreamPayload,
  type DreamProgress,
  type DreamResult,
  dreamReceiptKey,
} from '@engram/queue/jobs/dream';
import { dreamQueueConfig } from '@engram/queue/queues/dream.config';
import {
  type ConsolidationLease,
  readConsolidationState,
  recordConsolidatedAt,
  tryAcquireConsolidation,
} from '@engram/queue/state/consolidation-lock';
import { keepRenewing } from '@engram/queue/state/held-lease';
import { ProjectChanges, projectChangesScope } from '@engram/queue/state/project-changes';
import type { HandlerContext } from '@engram/queue/worker';
import type { HandlerDeps } from '../service.js';
import { projectWriterLeaseKey } from './extract.js';
import { jobBoundary, pathsForJob } from './job-paths.js';
import { assertModelReachable } from './model-preflight.js';
import { requestAuthoredTeamPush } from './team-authored-push.js';

// dream: consolidate a project's memories with a forked agent (docs/design.md §5, §6; docs/claude-code-memory.md §8).
//
//   1. Gate re-check (unless forced): time since the last consolidation, then sessions touched since.
//   2. The project's consolidation lock (queue state store, fenced; its record IS "last consolidated at"):
//      busy → `skipped-locked` (no retry storm), except when the holder is this same job's dead earlier
//      attempt, whose lease is waited out. Then, from step 2 on, the one fork pipeline (@engram/memory-work):
//      the project-writer lease in turn (the one extraction takes; while the dream waits for it, it frees the
//      consolidation lock), so no extraction writes while the dream rewrites files. Both are renewed while
//      running; losing either aborts.
//   3. `.consolidate-lock` stamped as Claude Code does (body = pid, mtime = start).
//   4. The pipeline's snapshot transaction (every Markdown file under memory/.history), then the fork: the
//      consolidation prompt with memoryWritePolicy (minus hidden entries: .history, .consolidate-lock),
//      ≤30 turns. It forks from the payload's session + leaf (sharing that turn's prompt cache); without one — or when that session's transcript or parameters are gone — it runs from a
//      minimal context: the memory prompt as the system prompt and the consolidation prompt as the only
//      message. Progress (phase, files touched, turns) goes onto the job.
//   5. The guard: safety assessment of before/after; refused → snapshot restored, lock rolled back, job
//      failed permanently with the reason. Kept → emptied files deleted, pointers ensured, old snapshots
//      pruned; the receipt's file lists come from content hashes against the job's baseline.
// Any other failure while this worker still owns the project restores the snapshot and rolls the lock back
// (the gate then re-opens after the scan throttle), and the error goes to BullMQ's retry policy.

/** The consolidation fork's turn cap: generous (the reference has none) but bounded. */
export const DREAM_MAX_TURNS = 30;
/** max_tokens of the minimal-context fork (a session fork repeats its parent's). */
export const DREAM_MAX_TOKENS = 16_384;
/** Snapshots kept per project. */
export const DREAM_SNAPSHOT_KEEP = 10;

export interface DreamDeps extends HandlerDeps {
  client: ModelClient;
}

const NO_USAGE: Usage = {
  inputTokens: 0,
  outputTokens: 0,
  cacheReadInputTokens: 0,
  cacheCreationInputTokens: 0,
};

function iso(ms: number | undefined): string | undefined {
  return ms ? new Date(ms).toISOString() : undefined;
}

async function readText(path: string): Promise<string> {
  return fs.readFile(path, 'utf8').catch(() => '');
}

export function createDreamHandler(deps: DreamDeps) {
  const { config, engine, logger } = deps;
  // A killed worker frees the project on the same schedule BullMQ re-delivers its job.
  const ttlMs = config.dreamLockTtlMs ?? config.lockDurationMs ?? dreamQueueConfig.lockDurationMs;
  const store = engine.state;

  return async (payload: DreamPayload, ctx: HandlerContext): Promise<DreamResult> => {
    const log = logger.child({ queue: 'dream', jobId: ctx.job.id, project: payload.projectDir });
    const paths = pathsForJob(config, payload);
    const { memoryDir } = paths;
    const excludeSessionId = payload.triggeredBy ?? payload.sessionId;
    const skipped = (
      outcome: 'skipped-locked' | 'skipped-not-due',
      reason: string,
      previous?: number,
    ): DreamResult => {
      const prev = iso(previous);
      return {
        outcome,
        projectDir: payload.projectDir,
        reason,
        ...(prev ? { previousConsolidatedAt: prev } : {}),
        sessionsReviewed: 0,
        files: { created: [], updated: [], deleted: [] },
        indexLines: { before: 0, after: 0 },
        turns: 0,
        usage: { ...NO_USAGE },
        deniedToolCalls: 0,
      };
    };
    const gate = async (lastMs: number | undefined) => {
      const sessions = await listSessionsTouchedSince(paths.transcriptDir, lastMs ?? 0, {
        ...(excludeSessionId ? { excludeSessionId } : {}),
      });
      const result = evaluateDreamGate({
        nowMs: Date.now(),
        lastConsolidatedAtMs: lastMs,
        ...(payload.minHours !== undefined ? { minHours: payload.minHours } : {}),
        ...(payload.minSessions !== undefined ? { minSessions: payload.minSessions } : {}),
        scanThrottleAcquired: true,
        sessionsTouched: sessions.length,
      });
      return { result, sessions };
    };
    const notDueReason = (r: ReturnType<typeof evaluateDreamGate>) =>
      r.blockedBy === 'time'
        ? `last consolidation was ${r.hoursSince.toFixed(1)} h ago`
        : `only ${r.sessionCount} session(s) touched since the last consolidation`;

    // A Claude Code user's `.consolidate-lock` seeds "last consolidated at" once, when Engram has no record.
    const state = await readConsolidationState(store, payload);
    if (!state.recorded && !state.running) {
      const file = await readConsolidateLockFile(memoryDir).catch(() => undefined);
      if (file) await recordConsolidatedAt(store, payload, file.mtimeMs, `import:${ctx.job.id}`);
    }

    // 1. Cheap gate re-check before touching the lock.
    if (!payload.force && !state.running) {
      const last = state.recorded
        ? state.lastConsolidatedAtMs
        : (await readConsolidateLockFile(memoryDir).catch(() => undefined))?.mtimeMs;
      const pre = await gate(last);
      if (!pre.result.open) return skipped('skipped-not-due', notDueReason(pre.result), last);
    }

    // A model that cannot answer fails the job now, before the lock and the snapshot.
    await assertModelReachable(config.anthropic);

    // 2. The consolidation lock.
    const holder = `dream:${ctx.job.id}:${process.pid}:${randomUUID().slice(0, 8)}`;
    const lock = await tryAcquireConsolidation(store, payload, holder, { ttlMs });
    if (!lock) {
      const now = await readConsolidationState(store, payload);
      if (now.running?.holder.startsWith(`dream:${ctx.job.id}:`)) {
        // This job's own earlier attempt died holding the lock (its worker was killed): wait its lease out.
        const waitMs = Math.max(250, now.running.expiresAtMs - Date.now() + 100);
        log.info({ waitMs }, 'previous attempt of this job still holds the lock; waiting for it to expire');
        throw await ctx.defer(waitMs);
      }
      log.info({ holder: now.running?.holder }, 'another consolidation of this project is running');
      return skipped(
        'skipped-locked',
        'another consolidation of this project is running',
        now.lastConsolidatedAtMs,
      );
    }
    const prior = lock.priorConsolidatedAtMs;

    let sessionIds: string[];
    if (!payload.force) {
      const post = await gate(prior);
      if (!post.result.open) {
        await lock.release({ success: false });
        return skipped('skipped-not-due', notDueReason(post.result), prior);
      }
      sessionIds = post.sessions;
    } else {
      sessionIds = (await gate(prior)).sessions;
    }
    if (sessionIds.length === 0) sessionIds = [...payload.sessionIds];

    // The project-writer lease (the one extraction takes), in turn: extraction of any session of this project
    // waits while the dream runs. While the dream waits for it, it frees the consolidation lock.
    return runLocked({ deps, payload, ctx, paths, lock, sessionIds, ttlMs, log });
  };
}

interface LockedRun {
  deps: DreamDeps;
  payload: DreamPayload;
  ctx: HandlerContext;
  paths: EngramPaths;
  lock: ConsolidationLease;
  sessionIds: string[];
  ttlMs: number;
  log: DreamDeps['logger'];
}

async function runLocked(run: LockedRun): Promise<DreamResult> {
  const { deps, payload, ctx, paths, lock, sessionIds, ttlMs, log } = run;
  const { config, metrics } = deps;
  const { memoryDir } = paths;

  const lockLost = keepRenewing(() => lock.heartbeat(), ttlMs, 'consolidation lock lost');

  const snapshot = snapshotTransaction({
    memoryDir,
    label: `before dream (job ${ctx.job.id})`,
    refusedLabel: (why) => `refused dream (job ${ctx.job.id}): ${why}`,
    keep: DREAM_SNAPSHOT_KEEP,
  });
  const state = new DreamRunState(lock);
  const report = (p: DreamProgressState) =>
    ctx.progress({ ...p, snapshotId: snapshot.snapshotId } satisfies DreamProgress).catch(() => undefined);

  try {
    return await runForkPipeline<DreamResult>(
      {
        client: deps.client,
        state: deps.engine.state,
        metrics,
        ...(deps.waker ? { waker: deps.waker } : {}),
      },
      {
        queue: 'dream',
        ctx,
        log,
        writer: {
          key: projectWriterLeaseKey(payload),
          ttlMs,
          onBusy: () => state.releaseLock(false),
        },
        root: memoryDir,
        tempMaxAgeMs: ttlMs,
        countsAsMemory: (rel) => rel !== ENTRYPOINT_NAME && !rel.endsWith(`/${ENTRYPOINT_NAME}`),
        signals: [lockLost.signal],
        transaction: snapshot,
        plan: async () => {
          await stampConsolidateLockFile(memoryDir, process.pid, lock.startedAtMs);
          state.stamped = true;
          if (snapshot.resumedFrom) {
            log.info({ baseline: snapshot.resumedFrom }, 'resuming after an interrupted attempt of this job');
          }
          state.before = await readDreamManifest(snapshot.baselineDir);
          state.indexBefore = await readText(join(snapshot.baselineDir, ENTRYPOINT_NAME));
          await report(state.progress);
          const instruction = buildConsolidationPrompt({
            memoryDir,
            transcriptDir: paths.transcriptDir,
            sessionIds,
            ...(lock.priorConsolidatedAtMs ? { lastConsolidatedAt: lock.priorConsolidatedAtMs } : {}),
            maxDeletedShare: config.dreamMaxDeletedShare,
          });
          return {
            source: await dreamForkSource(deps, payload, paths, ctx, log),
            instruction,
            canUseTool: consolidationPolicy(memoryDir, { teamDir: paths.teamDir }),
            maxTurns: DREAM_MAX_TURNS,
            cwd: memoryDir,
            ...(payload.sessionId ? { toolResultsDir: paths.toolResultsDir(payload.sessionId) } : {}),
            // The fork may change only the memory directory (Bash may not).
            boundary: await jobBoundary(config, payload, { root: memoryDir, bash: 'read-only' }, memoryDir),
            onMessage: async (entry: ChainEntry) => {
              if (entry.type !== 'assistant' || !Array.isArray(entry.message?.content)) return;
              const calls = (entry.message.content as Array<{ type: string }>).filter(
                (b): b is ToolUseBlock => b.type === 'tool_use',
              );
              const previous = state.progress;
              const next = advanceDreamProgress(previous, calls, {
                memoryDir,
                transcriptDir: paths.transcriptDir,
              });
              const changed =
                next.phase !== previous.phase || next.filesTouched.length !== previous.filesTouched.length;
              state.progress = next;
              if (changed || next.turns % 5 === 0) await report(next);
            },
          };
        },
        // 5. Judge the result against the job's baseline.
        guard: async () => {
          const after = await readDreamManifest(memoryDir);
          const assessment = assessConsolidation({
            before: state.before,
            after,
            indexContent: await readText(paths.memoryIndexPath),
            indexBefore: state.indexBefore,
            maxDeletedShare: config.dreamMaxDeletedShare,
          });
          state.assessment = assessment;
          if (assessment.ok) return { ok: true };
          return {
            ok: false,
            code: `DREAM_${assessment.code ?? 'REFUSED'}`,
            message: `Consolidation refused: ${assessment.reason}. "Last consolidated at" was rolled back.`,
            keepRefused: true,
          };
        },
        commit: async () => {
          const kept = state.assessment!;
          const after = await readDreamManifest(memoryDir);
          const survivors = after.filter((e) => !e.empty).map((e) => e.file);
          // Links follow merges and renames ([[old]] → [[new]]); a deleted memory's links become plain text.
          const finalized = await finalizeConsolidation(memoryDir, kept, {
            survivors,
            before: state.before,
            after,
          });
          state.finalized = finalized;
          if (finalized.indexOverflow) {
            metrics.indexOverflows.inc({ queue: 'dream', cap: finalized.indexOverflow });
            log.warn(
              { cap: finalized.indexOverflow },
              'MEMORY.md still exceeds its load cap after consolidation',
            );
          }
        },
        finish: async ({ receipt, fork }) => {
          const memoryFile = (rel: string) => rel !== ENTRYPOINT_NAME && !rel.endsWith(`/${ENTRYPOINT_NAME}`);
          await state.releaseLock(true);
          await report({ ...state.progress, phase: 'done' });
          const { indexLinesAfter, indexOverflow } = state.finalized!;
          const result: DreamResult = {
            outcome: 'consolidated',
            projectDir: payload.projectDir,
            consolidatedAt: new Date(lock.startedAtMs).toISOString(),
            ...(lock.priorConsolidatedAtMs
              ? { previousConsolidatedAt: new Date(lock.priorConsolidatedAtMs).toISOString() }
              : {}),
            forkedFrom: fork.forkedFrom,
            sessionsReviewed: sessionIds.length,
            // What changed on disk against the job's baseline (content hashes), not what the fork meant to do.
            files: {
              created: receipt.created.filter(memoryFile),
              updated: receipt.updated.filter(memoryFile),
              deleted: receipt.deleted.filter(memoryFile),
            },
            indexLines: { before: state.assessment!.indexLinesBefore, after: indexLinesAfter },
            ...(indexOverflow ? { indexOverflow } : {}),
            snapshotId: snapshot.snapshotId,
            turns: fork.turns,
            usage: fork.usage,
            deniedToolCalls: fork.deniedCalls.length,
          };
          log.info(
            {
              created: result.files.created.length,
              updated: result.files.updated.length,
              deleted: result.files.deleted.length,
              indexLines: result.indexLines,
              turns: result.turns,
              forkedFrom: result.forkedFrom,
            },
            'consolidation done',
          );
          // The receipt the next foreground session of this project shows once ("Consolidated memory: …").
          await deps.engine.state.setJson(
            dreamReceiptKey(payload),
            { ...result, atMs: Date.now() },
            DREAM_RECEIPT_TTL_MS,
          );
          // Every session of the project hears of the files on its next model call (ProjectChanges).
          await new ProjectChanges(deps.engine.state, projectChangesScope(payload)).record('dream', [
            ...result.files.created.map((path) => ({ path, action: 'created' as const })),
            ...result.files.updated.map((path) => ({ path, action: 'updated' as const })),
            ...result.files.deleted.map((path) => ({ path, action: 'deleted' as const })),
          ]);
          // Changed a store-backed team/: a push that names this consolidation as the author of the versions.
          await requestAuthoredTeamPush(
            deps,
            payload,
            [...receipt.created, ...receipt.updated, ...receipt.deleted],
            `dream:${ctx.job.id}`,
          ).catch((error) =>
            log.warn({ err: (error as Error).message }, 'could not request the authored team push'),
          );
          return result;
        },
        // Any failure while this worker still owns the project rolls `.consolidate-lock` back (the snapshot
        // was restored by the pipeline), and the consolidation lock goes back to "not consolidated".
        onFailure: async ({ owner }) => {
          if (owner && state.stamped)
            await rollbackConsolidateLockFile(memoryDir, lock.priorConsolidatedAtMs ?? 0);
          await state.releaseLock(false);
        },
      },
    );
  } catch (error) {
    // Failures before the pipeline's transaction began (the lease step, a store error) still free the lock.
    if (!isDelayed(error)) await state.releaseLock(false).catch(() => undefined);
    throw error;
  } finally {
    lockLost.stop();
  }
}

/**
 * What one consolidation's pipeline hooks learn and hand on (plan → guard → commit → finish / onFailure), in
 * one typed place instead of loose variables shared between closures, and the consolidation lock freed exactly
 * once whichever path gets there first (the writer lease was busy, success, failure, an error before the
 * pipeline began).
 */
class DreamRunState {
  /** `.consolidate-lock` was stamped with this run (a failure must roll it back). */
  stamped = false;
  /** The memory files and the index of the job's baseline, read when the fork is planned. */
  before: DreamManifest = [];
  indexBefore = '';
  /** The guard's verdict on the fork's result. */
  assessment: ConsolidationAssessment | undefined;
  /** The index after the commit's link and pointer upkeep. */
  finalized: { indexLinesAfter: number; indexOverflow?: DreamResult['indexOverflow'] } | undefined;
  progress: DreamProgressState = initialDreamProgress();
  private released = false;

  constructor(private readonly lock: ConsolidationLease) {}

  async releaseLock(success: boolean): Promise<void> {
    if (this.released) return;
    this.released = true;
    await this.lock.release({ success });
  }
}

function isDelayed(error: unknown): boolean {
  return (error as Error | undefined)?.name === 'DelayedError';
}

/**
 * The payload's session and leaf when its transcript still has them (sharing that turn's prompt cache); else
 * — or when the session has no cache-safe parameters — a minimal context: the memory conventions as the system
 * prompt and the consolidation instruction as the only message.
 */
async function dreamForkSource(
  deps: DreamDeps,
  payload: DreamPayload,
  paths: EngramPaths,
  ctx: HandlerContext,
  log: DreamDeps['logger'],
): Promise<ForkSource> {
  const sessionId = `dream-${String(ctx.job.id ?? randomUUID()).replace(/[^A-Za-z0-9_-]/g, '-')}`;
  const minimal = (why: string): Extract<ForkSource, { kind: 'minimal' }> => ({
    kind: 'minimal',
    model: deps.config.model,
    system: [{ type: 'text', text: buildMemoryPrompt({ memoryDir: paths.memoryDir }) }],
    maxTokens: DREAM_MAX_TOKENS,
    sessionId,
    why,
  });
  const fallback = (why: string) => {
    if (payload.sessionId) log.info({ why }, 'forking the consolidation from a minimal context');
    return minimal(why);
  };
  if (!payload.sessionId || !payload.leafUuid) return minimal('no session in the payload');
  const transcriptPath = paths.transcriptPath(payload.sessionId);
  const entries = await new TranscriptStore(transcriptPath)
    .readAll()
    .then((r) => r.entries)
    .catch(() => undefined);
  if (!entries) return fallback('the session transcript is missing');
  if (!entries.some((e) => e.uuid === payload.leafUuid))
    return fallback('the leaf is not in the session transcript');
  return {
    kind: 'session',
    transcriptPath,
    leafUuid: payload.leafUuid,
    sessionId: payload.sessionId,
    fallback: minimal('the session has no cache-safe parameters'),
  };
}
