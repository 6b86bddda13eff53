import { dirname } from 'node:path';
import { cacheSafeParamsPathFor, loadCacheSafeParams } from '@engram/agent-runtime/fork/cache-safe-params';
import { type ForkResult, runForkedAgent } from '@engram/agent-runtime/fork/run-forked-agent';
import type { ModelClient } from '@engram/agent-runtime/model/client';
import { tokenCountWithEstimation } from '@engram/agent-runtime/model/tokens';
import { buildChain } from '@engram/agent-runtime/transcript/chain';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import { removeStaleTempFiles } from '@engram/fs-atomic/atomic-write';
import { sessionMemoryPolicy } from '@engram/memory-core/policy/memory-permissions';
import { assessSessionMemoryUpdate } from '@engram/memory-core/session-memory/guard';
import {
  buildSessionMemoryUpdatePrompt,
  loadSessionMemoryPrompt,
} from '@engram/memory-core/session-memory/prompt';
import {
  ensureSessionMemoryFile,
  readSessionMemoryFile,
  restoreSessionMemoryFile,
  SESSION_MEMORY_DIR_MODE,
  SESSION_MEMORY_FILE_MODE,
  sessionMemoryConfigPaths,
} from '@engram/memory-core/session-memory/summary-file';
import { loadSessionMemoryTemplate } from '@engram/memory-core/session-memory/template';
import {
  countToolCallsSince,
  lastAssistantHasToolCalls,
  shouldUpdateSessionMemory,
} from '@engram/memory-core/session-memory/trigger';
import type { SessionMemoryPayload, SessionMemoryResult } from '@engram/queue/jobs/session-memory';
import { sessionMemoryQueueConfig } from '@engram/queue/queues/session-memory.config';
import { tryHoldLease } from '@engram/queue/state/held-lease';
import { type SessionMemoryMarkers, SessionState } from '@engram/queue/state/session-state';
import type { HandlerContext } from '@engram/queue/worker';
import { PermanentJobError } from '@engram/queue/worker';
import type { HandlerDeps } from '../service.js';
import { pathsForJob } from './job-paths.js';

// session-memory: keep the session's rolling notes (`summary.md`) current with a fork that may only Edit
// that one file (DESIGN §5, §6; reference §7.8). Jobs of one session run one at a time (a lease; a busy
// session defers the job) and each is re-gated against the markers the previous one left, so a burst of
// requests costs one fork, not one per request. A result that would destroy the notes is never committed.

/** A well-behaved update edits in turn 1 and stops in turn 2; the rest is room for a failed Edit's retry. */
export const SESSION_MEMORY_MAX_TURNS = 5;

export interface SessionMemoryDeps extends HandlerDeps {
  client: ModelClient;
  /** Clock for markers (tests). */
  now?: () => number;
}

function emptyResult(sessionId: string, outcome: SessionMemoryResult['outcome'], contextTokens?: number) {
  return {
    outcome,
    sessionId,
    summaryChars: 0,
    turns: 0,
    ...(contextTokens !== undefined ? { contextTokens } : {}),
  } satisfies SessionMemoryResult;
}

/** Chain entries that count for the tool-call rule: not the re-emitted tail copies of a compaction. */
function originalEntries(chain: readonly ChainEntry[]): ChainEntry[] {
  return chain.filter((e) => typeof e.compactedFromUuid !== 'string');
}

/**
 * The uuid of the newest entry of `chain` at or before transcript line `seq` (the last update's position),
 * so tool calls are counted from there; undefined counts the whole chain.
 */
function cursorUuid(chain: readonly ChainEntry[], seqOf: Map<string, number>, seq: number | undefined) {
  if (seq === undefined) return undefined;
  let found: string | undefined;
  for (const entry of chain)
    if ((seqOf.get(entry.uuid) ?? Number.POSITIVE_INFINITY) <= seq) found = entry.uuid;
  return found;
}

export function createSessionMemoryHandler(deps: SessionMemoryDeps) {
  const { config, engine, metrics, logger } = deps;
  const now = deps.now ?? Date.now;
  const leaseTtlMs = config.lockDurationMs ?? sessionMemoryQueueConfig.lockDurationMs;
  const { templatePath, promptPath } = sessionMemoryConfigPaths(config.engramHome);

  return async (payload: SessionMemoryPayload, ctx: HandlerContext): Promise<SessionMemoryResult> => {
    const log = logger.child({ queue: 'session-memory', jobId: ctx.job.id, sessionId: payload.sessionId });
    const paths = pathsForJob(config, payload);
    const state = new SessionState(engine.state, payload);

    // Serial per session: whoever holds the lease runs; everyone else comes back shortly and re-gates then.
    const lease = await tryHoldLease(engine.state, state.sessionMemoryLeaseKey, {
      ttlMs: leaseTtlMs,
      holder: `session-memory:${ctx.job.id}`,
    });
    if (!lease) throw await ctx.defer(250 + Math.floor(Math.random() * 500));
    const signal = AbortSignal.any([ctx.signal, lease.signal]);
    try {
      const markers: SessionMemoryMarkers = await state.sessionMemory();
      if (markers.lastUpdateSeq !== undefined && payload.leafSeq <= markers.lastUpdateSeq) {
        return emptyResult(payload.sessionId, 'skipped-stale');
      }

      const transcriptPath = paths.transcriptPath(payload.sessionId);
      const { entries } = await new TranscriptStore(transcriptPath).readAll();
      if (entries.length === 0) {
        throw new PermanentJobError('TRANSCRIPT_MISSING', `No transcript for session ${payload.sessionId}.`);
      }
      const seqOf = new Map<string, number>();
      entries.forEach((e, i) => {
        if (typeof e.uuid === 'string' && !seqOf.has(e.uuid)) seqOf.set(e.uuid, i + 1);
      });
      if (!seqOf.has(payload.leafUuid)) {
        throw new PermanentJobError(
          'LEAF_NOT_FOUND',
          `Transcript of session ${payload.sessionId} has no entry ${payload.leafUuid}; the job cannot cover it.`,
        );
      }
      // A compaction (or a rewind) since the request moved the conversation off this leaf: the notes must
      // follow the conversation the foreground now has, and the next trigger will ask for that.
      if (!buildChain(entries).live.some((e) => e.uuid === payload.leafUuid)) {
        return emptyResult(payload.sessionId, 'skipped-stale');
      }
      const chain = buildChain(entries, payload.leafUuid);
      const counted = originalEntries(chain.entries);
      const contextTokens = payload.contextTokens ?? tokenCountWithEstimation(chain.live);
      const pendingToolCalls = lastAssistantHasToolCalls(chain.live);
      const decision = shouldUpdateSessionMemory({
        initialized: markers.initialized === true,
        contextTokens,
        tokensAtLastUpdate: markers.tokensAtLastUpdate,
        toolCallsSinceLastUpdate: countToolCallsSince(
          counted,
          cursorUuid(counted, seqOf, markers.lastUpdateSeq),
        ),
        lastReplyHadToolCalls: pendingToolCalls,
        thresholds: payload.thresholds,
      });
      if (!decision.update) {
        if (decision.initialize) await state.updateSessionMemory({ initialized: true });
        return emptyResult(payload.sessionId, 'skipped-not-due', contextTokens);
      }

      // From here on the foreground's compactor may wait for us (≤15 s): say when we started and finished.
      await state.updateSessionMemory({ initialized: true, startedAtMs: now() });
      let committed = false;
      try {
        const summaryPath = paths.sessionMemoryPath(payload.sessionId);
        const template = await loadSessionMemoryTemplate(templatePath);
        await ensureSessionMemoryFile(summaryPath, template);
        await removeStaleTempFiles(dirname(summaryPath), leaseTtlMs);
        const before = (await readSessionMemoryFile(summaryPath)) ?? template;
        const params = await loadCacheSafeParams(cacheSafeParamsPathFor(transcriptPath)).catch(
          (error: Error) => {
            throw new PermanentJobError(
              'NO_CACHE_SAFE_PARAMS',
              `Session ${payload.sessionId}: ${error.message}`,
            );
          },
        );

        let fork: ForkResult | undefined;
        let forkError: unknown;
        try {
          fork = await runForkedAgent({
            client: deps.client,
            params,
            transcriptPath,
            leafUuid: payload.leafUuid,
            instruction: buildSessionMemoryUpdatePrompt({
              notesPath: summaryPath,
              currentNotes: before,
              customPrompt: await loadSessionMemoryPrompt(promptPath),
            }),
            canUseTool: sessionMemoryPolicy(summaryPath),
            // The instruction carries the notes: the fork has "read" them, which Edit requires.
            extraReadFiles: [summaryPath],
            maxTurns: SESSION_MEMORY_MAX_TURNS,
            signal,
            cwd: dirname(summaryPath),
            toolResultsDir: paths.toolResultsDir(payload.sessionId),
            fileModes: { file: SESSION_MEMORY_FILE_MODE, dir: SESSION_MEMORY_DIR_MODE },
          });
        } catch (error) {
          forkError = error;
        }

        // Whatever happened in the fork (even a failure after its edits), never leave degenerate notes behind.
        const after = (await readSessionMemoryFile(summaryPath)) ?? '';
        const verdict =
          after === before ? ({ ok: true } as const) : assessSessionMemoryUpdate({ before, after, template });
        if (!verdict.ok) {
          await restoreSessionMemoryFile(summaryPath, before);
          log.warn({ reason: verdict.reason }, 'session-memory update rejected; previous notes restored');
          throw new PermanentJobError(`SUMMARY_${verdict.reason.toUpperCase()}`, verdict.message);
        }
        if (forkError !== undefined) throw forkError;
        if (!fork || fork.endReason === 'aborted') {
          throw new Error(
            'session-memory update aborted (lock or lease lost, or shutdown); it will be retried',
          );
        }

        for (const denied of fork.deniedCalls) {
          metrics.toolDenials.inc({ queue: 'session-memory', tool: denied.tool });
        }
        metrics.forkTokens.inc({ queue: 'session-memory', kind: 'input' }, fork.usage.inputTokens);
        metrics.forkTokens.inc({ queue: 'session-memory', kind: 'output' }, fork.usage.outputTokens);
        metrics.forkTokens.inc(
          { queue: 'session-memory', kind: 'cache_read' },
          fork.usage.cacheReadInputTokens,
        );
        metrics.forkTokens.inc(
          { queue: 'session-memory', kind: 'cache_creation' },
          fork.usage.cacheCreationInputTokens,
        );

        // Only a position with no tool call awaiting its result is safe to compact from (no orphaned results).
        const lastSummarizedUuid = pendingToolCalls ? undefined : payload.leafUuid;
        await state.updateSessionMemory({
          tokensAtLastUpdate: contextTokens,
          lastUpdateSeq: payload.leafSeq,
          finishedAtMs: now(),
          ...(lastSummarizedUuid ? { lastSummarizedUuid } : {}),
        });
        committed = true;
        log.info(
          { leafSeq: payload.leafSeq, contextTokens, chars: after.length, turns: fork.turns },
          'session memory updated',
        );
        return {
          outcome: 'updated',
          sessionId: payload.sessionId,
          summaryChars: after.length,
          turns: fork.turns,
          contextTokens,
          deniedToolCalls: fork.deniedCalls.length,
          usage: fork.usage,
          ...(lastSummarizedUuid ? { lastSummarizedUuid } : {}),
        };
      } finally {
        // A failed update must not keep the compactor waiting for it.
        if (!committed) await state.updateSessionMemory({ finishedAtMs: now() }).catch(() => {});
      }
    } finally {
      await lease.release();
    }
  };
}
