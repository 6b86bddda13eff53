import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import {
  type CacheSafeParams,
  cacheSafeParamsPathFor,
  loadCacheSafeParams,
} from '@engram/agent-runtime/fork/cache-safe-params';
import { runForkedAgent } from '@engram/agent-runtime/fork/run-forked-agent';
import { runQueryLoop } from '@engram/agent-runtime/loop/query-loop';
import type { ModelClient, Usage } from '@engram/agent-runtime/model/client';
import type { ToolUseBlock } from '@engram/agent-runtime/model/types';
import { defaultTools } from '@engram/agent-runtime/tools/registry';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { createUserEntry } from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import { removeStaleTempFiles } from '@engram/fs-atomic/atomic-write';
import { buildConsolidationPrompt } from '@engram/memory-core/dream/consolidation-prompt';
import { finalizeConsolidation } from '@engram/memory-core/dream/finalize';
import { evaluateDreamGate } from '@engram/memory-core/dream/gate';
import {
  readConsolidateLockFile,
  rollbackConsolidateLockFile,
  stampConsolidateLockFile,
} from '@engram/memory-core/dream/lock-file';
import { readDreamManifest } from '@engram/memory-core/dream/manifest';
import { consolidationPolicy } from '@engram/memory-core/dream/policy';
import {
  advanceDreamProgress,
  type DreamProgressState,
  initialDreamProgress,
} from '@engram/memory-core/dream/progress';
import { assessConsolidation } from '@engram/memory-core/dream/safety';
import { listSessionsTouchedSince } from '@engram/memory-core/dream/sessions';
import {
  createSnapshot,
  listSnapshots,
  pruneSnapshots,
  restoreSnapshot,
  snapshotDir,
} from '@engram/memory-core/dream/snapshot';
import { ENTRYPOINT_NAME, type EngramPaths } from '@engram/memory-core/paths/memory-paths';
import { buildMemoryPrompt } from '@engram/memory-core/prompts/memory-prompt';
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
import { tryHoldLease } from '@engram/queue/state/held-lease';
import type { HandlerContext } from '@engram/queue/worker';
import { PermanentJobError } from '@engram/queue/worker';
import type { HandlerDeps } from '../service.js';
import { projectWriterLeaseKey } from './extract.js';
import { pathsForJob } from './job-paths.js';
import { assertModelReachable } from './model-preflight.js';

// dream: consolidate a project's memories with a forked agent (DESIGN §5, §6; claude-code-memory.md §8).
//
//   1. Gate re-check (unless forced): time since the last consolidation, then sessions touched since.
//   2. The project's consolidation lock (queue state store, fenced; its record IS "last consolidated at"):
//      busy → `skipped-locked` (no retry storm), except when the holder is this same job's dead earlier
//      attempt, whose lease is waited out. Then the project-writer lease (the one extraction takes), so no
//      extraction writes while the dream rewrites files. Both are renewed while running; losing either aborts.
//   3. `.consolidate-lock` stamped as Claude Code does (body = pid, mtime = start).
//   4. Snapshot of every Markdown file under memory/.history, then the fork: the consolidation prompt with
//      memoryWritePolicy (minus hidden entries: .history, .consolidate-lock), ≤30 turns. It forks from the payload's session + leaf (sharing that turn's prompt
//      cache); without one — or when that session's transcript or parameters are gone — it runs from a
//      minimal context: the memory prompt as the system prompt and the consolidation prompt as the only
//      message. Progress (phase, files touched, turns) goes onto the job.
//   5. Safety assessment of before/after; refused → snapshot restored, lock rolled back, job failed
//      permanently with the reason. Kept → emptied files deleted, pointers ensured, old snapshots pruned.
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

interface ForkOutcome {
  forkedFrom: 'session' | 'minimal';
  usage: Usage;
  turns: number;
  endReason: string;
  deniedCalls: Array<{ tool: string }>;
}

class DreamAbortedError extends Error {
  constructor(why: string) {
    super(`consolidation aborted: ${why}`);
    this.name = 'DreamAbortedError';
  }
}

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
    const state = await readConsolidationState(store, payload.projectDir);
    if (!state.recorded && !state.running) {
      const file = await readConsolidateLockFile(memoryDir).catch(() => undefined);
      if (file) await recordConsolidatedAt(store, payload.projectDir, file.mtimeMs, `import:${ctx.job.id}`);
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
    const lock = await tryAcquireConsolidation(store, payload.projectDir, holder, { ttlMs });
    if (!lock) {
      const now = await readConsolidationState(store, payload.projectDir);
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

    // The project-writer lease: extraction of any session of this project waits while the dream runs.
    const writer = await tryHoldLease(store, projectWriterLeaseKey(payload.projectDir), {
      ttlMs,
      holder: `dream:${ctx.job.id}`,
    }).catch(async (error: unknown) => {
      await lock.release({ success: false });
      throw error;
    });
    if (!writer) {
      await lock.release({ success: false });
      throw await ctx.defer(1_000 + Math.floor(Math.random() * 1_000));
    }

    return runLocked({ deps, payload, ctx, paths, lock, writer, sessionIds, ttlMs, log });
  };
}

interface LockedRun {
  deps: DreamDeps;
  payload: DreamPayload;
  ctx: HandlerContext;
  paths: EngramPaths;
  lock: ConsolidationLease;
  writer: NonNullable<Awaited<ReturnType<typeof tryHoldLease>>>;
  sessionIds: string[];
  ttlMs: number;
  log: DreamDeps['logger'];
}

async function runLocked(run: LockedRun): Promise<DreamResult> {
  const { deps, payload, ctx, paths, lock, writer, sessionIds, ttlMs, log } = run;
  const { config, metrics } = deps;
  const { memoryDir } = paths;

  const lockLost = new AbortController();
  const heartbeat = setInterval(
    () => {
      lock.heartbeat().then(
        (ok) => {
          if (!ok) lockLost.abort(new Error('consolidation lock lost'));
        },
        () => {
          // A transient store error: the next tick retries; the TTL covers two missed renewals.
        },
      );
    },
    Math.max(50, Math.floor(ttlMs / 3)),
  );
  heartbeat.unref();
  const signal = AbortSignal.any([ctx.signal, writer.signal, lockLost.signal]);
  const stillOwner = () => !writer.signal.aborted && !lockLost.signal.aborted;

  let stamped = false;
  let snapshotId: string | undefined;
  let settled = false;
  const fail = async (why: string, opts: { keepRefused?: boolean; restoreId?: string } = {}) => {
    if (settled) return undefined;
    settled = true;
    let backupId: string | undefined;
    // Only the owner may touch the files: after losing the lock or lease someone else may be writing.
    if (stillOwner()) {
      const target = opts.restoreId ?? snapshotId;
      if (target) {
        const restored = await restoreSnapshot(memoryDir, target, {
          backupCurrent: opts.keepRefused === true,
          backupLabel: `refused dream (job ${ctx.job.id}): ${why}`.slice(0, 200),
        });
        backupId = restored.backupId;
        log.warn(
          { snapshotId: target, restored: restored.restored.length, removed: restored.removed.length },
          'snapshot restored',
        );
      }
      if (stamped) await rollbackConsolidateLockFile(memoryDir, lock.priorConsolidatedAtMs ?? 0);
    }
    await lock.release({ success: false });
    return backupId;
  };

  try {
    await fs.mkdir(memoryDir, { recursive: true, mode: 0o700 });
    await removeStaleTempFiles(memoryDir, ttlMs);
    await stampConsolidateLockFile(memoryDir, process.pid, lock.startedAtMs);
    stamped = true;

    // A killed earlier attempt of this job left its pre-run snapshot: judge this run against that baseline,
    // so its partial writes count too (and a refusal restores it), instead of against a half-done state.
    const label = `before dream (job ${ctx.job.id})`;
    const baseline = (await listSnapshots(memoryDir)).filter((s) => s.label === label).at(-1);
    const baselineDir = baseline ? snapshotDir(memoryDir, baseline.id) : memoryDir;
    const before = await readDreamManifest(baselineDir);
    const indexBefore = await readText(join(baselineDir, ENTRYPOINT_NAME));
    const snapshot = await createSnapshot(memoryDir, { label });
    snapshotId = snapshot.id;
    if (baseline) log.info({ baseline: baseline.id }, 'resuming after an interrupted attempt of this job');

    let progress: DreamProgressState = initialDreamProgress();
    const report = (p: DreamProgressState) =>
      ctx.progress({ ...p, snapshotId: snapshot.id } satisfies DreamProgress).catch(() => undefined);
    await report(progress);

    const instruction = buildConsolidationPrompt({
      memoryDir,
      transcriptDir: paths.transcriptDir,
      sessionIds,
      ...(lock.priorConsolidatedAtMs ? { lastConsolidatedAt: lock.priorConsolidatedAtMs } : {}),
      maxDeletedShare: config.dreamMaxDeletedShare,
    });
    const onMessage = async (entry: ChainEntry) => {
      if (entry.type !== 'assistant' || !Array.isArray(entry.message?.content)) return;
      const calls = (entry.message.content as Array<{ type: string }>).filter(
        (b): b is ToolUseBlock => b.type === 'tool_use',
      );
      const next = advanceDreamProgress(progress, calls, {
        memoryDir,
        transcriptDir: paths.transcriptDir,
      });
      const changed =
        next.phase !== progress.phase || next.filesTouched.length !== progress.filesTouched.length;
      progress = next;
      if (changed || next.turns % 5 === 0) await report(next);
    };

    const fork = await runDreamFork({ deps, payload, ctx, paths, instruction, signal, onMessage, log });
    for (const denied of fork.deniedCalls) metrics.toolDenials.inc({ queue: 'dream', tool: denied.tool });
    metrics.forkTokens.inc({ queue: 'dream', kind: 'input' }, fork.usage.inputTokens);
    metrics.forkTokens.inc({ queue: 'dream', kind: 'output' }, fork.usage.outputTokens);
    metrics.forkTokens.inc({ queue: 'dream', kind: 'cache_read' }, fork.usage.cacheReadInputTokens);
    metrics.forkTokens.inc({ queue: 'dream', kind: 'cache_creation' }, fork.usage.cacheCreationInputTokens);
    if (fork.endReason === 'aborted' || signal.aborted) {
      throw new DreamAbortedError(String((signal.reason as Error | undefined)?.message ?? 'aborted'));
    }

    // 5. Judge the result.
    const after = await readDreamManifest(memoryDir);
    const indexAfter = await readText(paths.memoryIndexPath);
    const assessment = assessConsolidation({
      before,
      after,
      indexContent: indexAfter,
      indexBefore,
      maxDeletedShare: config.dreamMaxDeletedShare,
    });
    if (!assessment.ok) {
      const restoreId = baseline?.id ?? snapshot.id;
      const backupId = await fail(assessment.reason ?? 'refused', { keepRefused: true, restoreId });
      log.warn({ code: assessment.code, reason: assessment.reason }, 'consolidation refused and rolled back');
      throw new PermanentJobError(
        `DREAM_${assessment.code ?? 'REFUSED'}`,
        `Consolidation refused: ${assessment.reason}. The memory directory was restored from snapshot ` +
          `${restoreId}${backupId ? ` (the refused result is kept as snapshot ${backupId})` : ''}; ` +
          '"last consolidated at" was rolled back.',
      );
    }
    const survivors = after.filter((e) => !e.empty).map((e) => e.file);
    const finalized = await finalizeConsolidation(memoryDir, assessment, { survivors });
    if (finalized.indexOverflow) {
      metrics.indexOverflows.inc({ queue: 'dream', cap: finalized.indexOverflow });
      log.warn({ cap: finalized.indexOverflow }, 'MEMORY.md still exceeds its load cap after consolidation');
    }
    await pruneSnapshots(memoryDir, { keep: DREAM_SNAPSHOT_KEEP });
    metrics.memoriesWritten.inc({ queue: 'dream', action: 'created' }, assessment.created.length);
    metrics.memoriesWritten.inc({ queue: 'dream', action: 'updated' }, assessment.updated.length);

    if (!stillOwner()) throw new DreamAbortedError('lock or lease lost while finishing');
    settled = true;
    await lock.release({ success: true });
    await report({ ...progress, phase: 'done' });
    const result: DreamResult = {
      outcome: 'consolidated',
      projectDir: payload.projectDir,
      consolidatedAt: new Date(lock.startedAtMs).toISOString(),
      ...(lock.priorConsolidatedAtMs
        ? { previousConsolidatedAt: new Date(lock.priorConsolidatedAtMs).toISOString() }
        : {}),
      forkedFrom: fork.forkedFrom,
      sessionsReviewed: sessionIds.length,
      files: { created: assessment.created, updated: assessment.updated, deleted: assessment.deleted },
      indexLines: { before: assessment.indexLinesBefore, after: finalized.indexLinesAfter },
      ...(finalized.indexOverflow ? { indexOverflow: finalized.indexOverflow } : {}),
      snapshotId: baseline?.id ?? snapshot.id,
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
      dreamReceiptKey(payload.projectDir),
      { ...result, atMs: Date.now() },
      DREAM_RECEIPT_TTL_MS,
    );
    return result;
  } catch (error) {
    if (!settled) {
      await fail((error as Error).message).catch((rollbackError: unknown) => {
        log.error({ err: (rollbackError as Error).message }, 'rollback after a failed consolidation failed');
      });
    }
    throw error;
  } finally {
    clearInterval(heartbeat);
    await writer.release();
  }
}

interface ForkRun {
  deps: DreamDeps;
  payload: DreamPayload;
  ctx: HandlerContext;
  paths: EngramPaths;
  instruction: string;
  signal: AbortSignal;
  onMessage: (entry: ChainEntry) => Promise<void>;
  log: DreamDeps['logger'];
}

type ForkSource =
  | { kind: 'session'; transcriptPath: string; params: CacheSafeParams; sessionId: string; leafUuid: string }
  | { kind: 'minimal'; why: string };

/** Loads the session fork source, or explains why the minimal context is used instead. */
async function sessionForkSource(payload: DreamPayload, paths: EngramPaths): Promise<ForkSource> {
  const minimal = (why: string): ForkSource => ({ kind: 'minimal', why });
  if (!payload.sessionId || !payload.leafUuid) return minimal('no session in the payload');
  const transcriptPath = paths.transcriptPath(payload.sessionId);
  const entries = await new TranscriptStore(transcriptPath)
    .readAll()
    .then((r) => r.entries)
    .catch(() => undefined);
  if (!entries) return minimal('the session transcript is missing');
  if (!entries.some((e) => e.uuid === payload.leafUuid)) {
    return minimal('the leaf is not in the session transcript');
  }
  const params = await loadCacheSafeParams(cacheSafeParamsPathFor(transcriptPath)).catch(() => undefined);
  if (!params) return minimal('the session has no cache-safe parameters');
  return {
    kind: 'session',
    transcriptPath,
    params,
    sessionId: payload.sessionId,
    leafUuid: payload.leafUuid,
  };
}

async function runDreamFork(run: ForkRun): Promise<ForkOutcome> {
  const { deps, payload, ctx, paths, instruction, signal, onMessage, log } = run;
  const canUseTool = consolidationPolicy(paths.memoryDir, { teamDir: paths.teamDir });
  const source = await sessionForkSource(payload, paths);
  if (source.kind === 'session') {
    const fork = await runForkedAgent({
      client: deps.client,
      params: source.params,
      transcriptPath: source.transcriptPath,
      leafUuid: source.leafUuid,
      instruction,
      canUseTool,
      maxTurns: DREAM_MAX_TURNS,
      signal,
      cwd: paths.memoryDir,
      toolResultsDir: paths.toolResultsDir(source.sessionId),
      onMessage,
    });
    return { forkedFrom: 'session', ...fork };
  }
  if (payload.sessionId) log.info({ why: source.why }, 'forking the consolidation from a minimal context');
  // Minimal context: no conversation to share a cache with, so the request is just the memory conventions
  // (as the system prompt) and the consolidation instruction.
  const sessionId = `dream-${String(ctx.job.id ?? randomUUID()).replace(/[^A-Za-z0-9_-]/g, '-')}`;
  const first = createUserEntry({ sessionId, cwd: paths.memoryDir, parentUuid: null }, instruction);
  const result = await runQueryLoop({
    client: deps.client,
    model: deps.config.model,
    system: [{ type: 'text', text: buildMemoryPrompt({ memoryDir: paths.memoryDir }) }],
    tools: defaultTools(),
    maxTokens: DREAM_MAX_TOKENS,
    messages: [first],
    canUseTool,
    maxTurns: DREAM_MAX_TURNS,
    signal,
    cwd: paths.memoryDir,
    sessionId,
    onMessage,
  });
  return {
    forkedFrom: 'minimal',
    usage: result.usage,
    turns: result.turns,
    endReason: result.endReason,
    deniedCalls: result.deniedCalls,
  };
}
