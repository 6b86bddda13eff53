import { basename, dirname } from 'node:path';
import type { ModelClient } from '@engram/agent-runtime/model/client';
import { tokenCountWithEstimation } from '@engram/agent-runtime/model/tokens';
import { buildChain } from '@engram/agent-runtime/transcript/chain';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
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
import { runForkPipeline } from '@engram/memory-work/pipeline';
import { fileTransaction } from '@engram/memory-work/transactions';
import type { SessionMemoryPayload, SessionMemoryResult } from '@engram/queue/jobs/session-memory';
import { sessionMemoryQueueConfig } from '@engram/queue/queues/session-memory.config';
import { type SessionMemoryMarkers, SessionState } from '@engram/queue/state/session-state';
import type { HandlerContext } from '@engram/queue/worker';
import { PermanentJobError } from '@engram/queue/worker';
import type { HandlerDeps } from '../service.js';
import { jobBoundary, pathsForJob } from './job-paths.js';

// session-memory: keep the session's rolling notes (`summary.md`) current with a fork that may only Edit
// that one file, as configuration over the one fork pipeline (@engram/memory-work). Jobs of one session run
// one at a time, in arrival order (the session's lease, taken in turn; a waiting job parks until handed it)
// and each is re-gated against the markers the previous one left, so a burst of
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
    const state = new SessionState(engine.state, payload, { ttlMs: config.sessionStateTtlMs });
    const pipelineDeps = {
      client: deps.client,
      state: engine.state,
      metrics,
      ...(deps.waker ? { waker: deps.waker } : {}),
    };
    const transcriptPath = paths.transcriptPath(payload.sessionId);
    let contextTokens = 0;
    let pendingToolCalls = false;
    let started = false;
    let committed = false;
    try {
      const summaryPath = paths.sessionMemoryPath(payload.sessionId);
      const notesName = basename(summaryPath);
      const template = await loadSessionMemoryTemplate(templatePath);
      const notes = fileTransaction({
        path: summaryPath,
        prepare: async () => {
          await ensureSessionMemoryFile(summaryPath, template);
        },
        read: () => readSessionMemoryFile(summaryPath),
        write: (content) => restoreSessionMemoryFile(summaryPath, content),
        fallback: template,
      });
      const customPrompt = await loadSessionMemoryPrompt(promptPath);
      const result = await runForkPipeline<SessionMemoryResult>(pipelineDeps, {
        queue: 'session-memory',
        ctx,
        log,
        writer: { key: state.sessionMemoryLeaseKey, ttlMs: leaseTtlMs },
        // The notes file's directory is the fork's writable root; the policy narrows it to the one file.
        root: dirname(summaryPath),
        rootMode: SESSION_MEMORY_DIR_MODE,
        include: (rel) => rel === notesName,
        tempMaxAgeMs: leaseTtlMs,
        transaction: notes,
        // Serial per session, re-gated under the lease against the markers the previous update left, so a
        // burst of requests costs one fork, not one per request.
        admit: async () => {
          const markers: SessionMemoryMarkers = await state.sessionMemory();
          if (markers.lastUpdateSeq !== undefined && payload.leafSeq <= markers.lastUpdateSeq) {
            return { skip: emptyResult(payload.sessionId, 'skipped-stale') };
          }

          const { entries } = await new TranscriptStore(transcriptPath).readAll();
          if (entries.length === 0) {
            throw new PermanentJobError(
              'TRANSCRIPT_MISSING',
              `No transcript for session ${payload.sessionId}.`,
            );
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
            return { skip: emptyResult(payload.sessionId, 'skipped-stale') };
          }
          const chain = buildChain(entries, payload.leafUuid);
          const counted = originalEntries(chain.entries);
          contextTokens = payload.contextTokens ?? tokenCountWithEstimation(chain.live);
          pendingToolCalls = lastAssistantHasToolCalls(chain.live);
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
            return { skip: emptyResult(payload.sessionId, 'skipped-not-due', contextTokens) };
          }

          // From here on the foreground's compactor may wait for us (≤15 s): say when we started and finished.
          await state.updateSessionMemory({ initialized: true, startedAtMs: now() });
          started = true;
          return undefined;
        },
        plan: async () => ({
          source: {
            kind: 'session',
            transcriptPath,
            leafUuid: payload.leafUuid,
            sessionId: payload.sessionId,
          },
          instruction: buildSessionMemoryUpdatePrompt({
            notesPath: summaryPath,
            currentNotes: notes.beforeContent,
            customPrompt,
          }),
          canUseTool: sessionMemoryPolicy(summaryPath),
          // The instruction carries the notes: the fork has "read" them, which Edit requires.
          extraReadFiles: [summaryPath],
          maxTurns: SESSION_MEMORY_MAX_TURNS,
          cwd: dirname(summaryPath),
          toolResultsDir: paths.toolResultsDir(payload.sessionId),
          // The fork may change only the notes file's directory (Bash may not).
          boundary: await jobBoundary(
            config,
            payload,
            { root: dirname(summaryPath), bash: 'read-only' },
            dirname(summaryPath),
          ),
          fileModes: { file: SESSION_MEMORY_FILE_MODE, dir: SESSION_MEMORY_DIR_MODE },
        }),
        // Whatever happened in the fork (even a failure after its edits), never leave degenerate notes behind.
        guard: async () => {
          const after = (await readSessionMemoryFile(summaryPath)) ?? '';
          const before = notes.beforeContent;
          if (after === before) return { ok: true };
          const verdict = assessSessionMemoryUpdate({ before, after, template });
          return verdict.ok
            ? { ok: true }
            : { ok: false, code: `SUMMARY_${verdict.reason.toUpperCase()}`, message: verdict.message };
        },
        finish: async ({ fork }) => {
          const after = (await readSessionMemoryFile(summaryPath)) ?? '';
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
        },
      });
      return result;
    } finally {
      // A failed update must not keep the compactor waiting for it.
      if (started && !committed) await state.updateSessionMemory({ finishedAtMs: now() }).catch(() => {});
    }
  };
}
