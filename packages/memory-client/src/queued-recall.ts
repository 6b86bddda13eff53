import { createHash } from 'node:crypto';
import { redactSecrets } from '@engram/memory-core/security/secret-scanner';
import type { RecallSelector } from '@engram/memory-mcp/memory-server';
import { capRecallQuery, type RecallResult } from '@engram/queue/jobs/recall';
import type { MemoryQueue, SessionRef } from './memory-queue.js';

// The recall selector through the job producer, for callers outside a turn loop: Claude Code's
// UserPromptSubmit hook and the MCP server's search_memories (stdio and /mcp). One recall job, waited for at
// most `waitMs`; the caller decides what "no answer" means (the hook adds nothing, search ranks lexically).

export type QueuedRecall =
  | {
      status: 'answered';
      result: RecallResult;
      jobId: string /** Another caller's job for the same prompt. */;
      reused: boolean;
    }
  | { status: 'not-queued' | 'timeout'; reason: string };

/** A state-store call of the reuse bookkeeping gives up after this (the store may be down: never hang a hook). */
const REUSE_STATE_TIMEOUT_MS = 2_000;

function bounded<T>(call: Promise<T>, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), REUSE_STATE_TIMEOUT_MS);
  });
  return Promise.race([call.catch(() => fallback), timeout]).finally(() => clearTimeout(timer));
}

/** How long a started recall stays reusable for the same session and prompt. */
export const RECALL_REUSE_TTL_MS = 60_000;

interface ReuseRecord {
  jobId?: string;
}

/**
 * The state key of a session's recall for one prompt: a second hook for the same prompt (the plugin and
 * `engram setup claude-code` both installed, or Claude Code re-running the hook) waits on the first's job.
 */
export function recallReuseKey(ref: SessionRef, query: string): string {
  const digest = createHash('sha256').update(query).digest('hex').slice(0, 32);
  return `recall-reuse:${ref.tenant ?? '-'}:${ref.sessionId}:${digest}`;
}

async function enqueueRecall(
  memory: MemoryQueue,
  ref: SessionRef,
  request: { query: string; alreadySurfaced?: readonly string[] },
) {
  return memory.enqueue('recall', {
    sessionId: ref.sessionId,
    ...memory.projectRef(ref),
    query: capRecallQuery(redactSecrets(request.query)),
    alreadySurfaced: [...(request.alreadySurfaced ?? [])].slice(-400),
    alreadyRead: [],
    recentTools: [],
    requestedAt: new Date().toISOString(),
  });
}

/**
 * One recall for `request.query`, waited for at most `waitMs`. With `reuse`, a recall already started for the
 * same session and prompt (within RECALL_REUSE_TTL_MS) is waited on instead of starting another.
 */
export async function awaitRecall(
  memory: MemoryQueue,
  ref: SessionRef,
  request: { query: string; alreadySurfaced?: readonly string[]; waitMs: number; reuse?: boolean },
): Promise<QueuedRecall> {
  const started = Date.now();
  let jobId: string | undefined;
  let reused = false;
  let recorded: Promise<unknown> = Promise.resolve();
  if (request.reuse) {
    const key = recallReuseKey(ref, request.query);
    const state = memory.engine.state;
    // A store that is not there (or not ready in time) means no reuse: this caller starts its own recall.
    const ready = await bounded(
      state.ready().then(() => true),
      false,
    );
    const claimed =
      !ready || (await bounded(state.setIfAbsent(key, {} satisfies ReuseRecord, RECALL_REUSE_TTL_MS), true));
    if (claimed) {
      const queued = await enqueueRecall(memory, ref, request);
      if (queued.status !== 'queued') {
        await bounded(state.delete(key), undefined);
        return {
          status: 'not-queued',
          reason: `${queued.status}${queued.reason ? `: ${queued.reason}` : ''}`,
        };
      }
      jobId = queued.jobId;
      // Written while this caller waits: the other caller polls for it.
      recorded = bounded(state.setJson(key, { jobId } satisfies ReuseRecord, RECALL_REUSE_TTL_MS), undefined);
    } else {
      // The other hook is enqueueing: its job id lands in the record in a moment.
      while (!jobId && Date.now() - started < request.waitMs) {
        jobId = (await bounded(state.getJson<ReuseRecord>(key), undefined))?.jobId;
        if (!jobId) await new Promise((r) => setTimeout(r, 20));
      }
      if (!jobId)
        return {
          status: 'timeout',
          reason: `the recall started for this prompt did not appear within ${request.waitMs} ms`,
        };
      reused = true;
    }
  } else {
    const queued = await enqueueRecall(memory, ref, request);
    if (queued.status !== 'queued') {
      return { status: 'not-queued', reason: `${queued.status}${queued.reason ? `: ${queued.reason}` : ''}` };
    }
    jobId = queued.jobId;
  }
  // Answered by the queue's completion event as soon as the job finishes (no poll interval to wait out).
  const outcome = await memory.waitForJob<RecallResult>(
    'recall',
    jobId,
    Math.max(0, request.waitMs - (Date.now() - started)),
  );
  await recorded;
  if (!outcome.finished) {
    return { status: 'timeout', reason: `recall did not answer within ${request.waitMs} ms` };
  }
  if (!outcome.result) return { status: 'not-queued', reason: `recall job ${jobId} failed` };
  return { status: 'answered', result: outcome.result, jobId, reused };
}

/**
 * A `RecallSelector` for the MCP server: the workers' recall selector through a recall job. Throws when the
 * queue is not configured, down, or slow, so search falls back to the lexical ranking.
 */
export function queuedRecallSelector(memory: MemoryQueue, ref: SessionRef, waitMs: number): RecallSelector {
  return async (query) => {
    const recall = await awaitRecall(memory, ref, { query, waitMs });
    if (recall.status !== 'answered') throw new Error(recall.reason);
    if (recall.result.outcome === 'fallback') {
      throw new Error(`the selector fell back (${recall.result.fallbackReason ?? 'no reason'})`);
    }
    return recall.result.attachments.map((a) => a.path);
  };
}
