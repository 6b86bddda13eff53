import { redactSecrets } from '@engram/memory-core/security/secret-scanner';
import type { RecallSelector } from '@engram/memory-mcp/memory-server';
import { capRecallQuery, type RecallResult } from '@engram/queue/jobs/recall';
import type { MemoryQueue, SessionRef } from './memory-queue.js';

// The recall selector through the job producer, for callers outside a turn loop: Claude Code's
// UserPromptSubmit hook and the MCP server's search_memories (stdio and /mcp). One recall job, waited for at
// most `waitMs`; the caller decides what "no answer" means (the hook adds nothing, search ranks lexically).

export type QueuedRecall =
  | { status: 'answered'; result: RecallResult; jobId: string }
  | { status: 'not-queued' | 'timeout'; reason: string };

export async function awaitRecall(
  memory: MemoryQueue,
  ref: SessionRef,
  request: { query: string; alreadySurfaced?: readonly string[]; waitMs: number },
): Promise<QueuedRecall> {
  const queued = await memory.enqueue('recall', {
    sessionId: ref.sessionId,
    ...memory.projectRef(ref),
    query: capRecallQuery(redactSecrets(request.query)),
    alreadySurfaced: [...(request.alreadySurfaced ?? [])].slice(-400),
    alreadyRead: [],
    recentTools: [],
    requestedAt: new Date().toISOString(),
  });
  if (queued.status !== 'queued') {
    return { status: 'not-queued', reason: `${queued.status}${queued.reason ? `: ${queued.reason}` : ''}` };
  }
  const started = Date.now();
  let delay = 20;
  while (Date.now() - started < request.waitMs) {
    const outcome = await memory.jobOutcome<RecallResult>('recall', queued.jobId).catch(() => undefined);
    if (outcome?.finished) {
      if (!outcome.result) return { status: 'not-queued', reason: `recall job ${queued.jobId} failed` };
      return { status: 'answered', result: outcome.result, jobId: queued.jobId };
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 200);
  }
  return { status: 'timeout', reason: `recall did not answer within ${request.waitMs} ms` };
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
