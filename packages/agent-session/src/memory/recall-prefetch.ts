import type { AttachmentInput } from '@engram/agent-runtime/loop/query-loop';
import type { ChainEntry, TranscriptEntry } from '@engram/agent-runtime/transcript/entry';
import type { MemoryQueue, SessionRef } from '@engram/memory-client/memory-queue';
import {
  collectReadMemoryPaths,
  collectRecentSuccessfulTools,
  collectSurfacedMemories,
  filterAgainstRead,
  prefetchSkipReason,
  relevantMemoriesAttachment,
} from '@engram/memory-core/recall/prefetch';
import { redactSecrets } from '@engram/memory-core/security/secret-scanner';
import type { RecallResult } from '@engram/queue/jobs/recall';
import { capRecallQuery } from '@engram/queue/jobs/recall';

// Prefetch recall for one user turn (docs/design.md §5 `recall`): enqueued at the start of the turn, never awaited;
// before each later model call the job is checked once, and a finished result is injected after the tool
// results; if the turn ends first, the result is dropped.

export type RecallStatus =
  | { status: 'skipped'; reason: string }
  | { status: 'not-queued'; reason: string }
  | { status: 'pending' | 'dropped'; jobId: string }
  | { status: 'injected'; jobId: string; outcome: RecallResult['outcome']; paths: string[] }
  | { status: 'failed'; jobId: string; reason: string };

export class RecallPrefetch {
  status: RecallStatus;
  private consumed = false;

  private constructor(
    private readonly memory: MemoryQueue,
    private readonly ref: SessionRef,
    status: RecallStatus,
  ) {
    this.status = status;
  }

  /** Starts the side query for `prompt` if it is multi-word and the session is under its injection budget. */
  static async start(memory: MemoryQueue, ref: SessionRef, chain: readonly ChainEntry[], prompt: string) {
    const surfaced = collectSurfacedMemories(chain);
    const skip = prefetchSkipReason(prompt, surfaced.bytes);
    if (skip) return new RecallPrefetch(memory, ref, { status: 'skipped', reason: skip });
    const queued = await memory.enqueue('recall', {
      sessionId: ref.sessionId,
      ...memory.projectRef(ref),
      // The one payload field that carries text: capped, and never carrying a secret into the queue.
      query: capRecallQuery(redactSecrets(prompt)),
      alreadySurfaced: newest([...surfaced.paths], 400),
      alreadyRead: newest([...collectReadMemoryPaths(chain, ref.paths.memoryDir)], 400),
      recentTools: collectRecentSuccessfulTools(chain).slice(0, 32),
      requestedAt: new Date().toISOString(),
    });
    if (queued.status !== 'queued') {
      return new RecallPrefetch(memory, ref, {
        status: 'not-queued',
        reason: 'reason' in queued ? queued.reason : '',
      });
    }
    return new RecallPrefetch(memory, ref, { status: 'pending', jobId: queued.jobId });
  }

  /**
   * Called before each model call after the first: one non-blocking look at the job. Returns the attachment
   * to inject (re-filtered against what the conversation has read or surfaced since), at most once.
   */
  async poll(messages: readonly TranscriptEntry[]): Promise<AttachmentInput[] | undefined> {
    if (this.consumed || this.status.status !== 'pending') return undefined;
    const jobId = this.status.jobId;
    // Queue unreachable right now: try again at the next model call.
    const outcome = await this.memory.jobOutcome<RecallResult>('recall', jobId).catch(() => undefined);
    if (!outcome?.finished) return undefined;
    this.consumed = true;
    if (outcome.failedReason !== undefined || !outcome.result) {
      this.status = { status: 'failed', jobId, reason: outcome.failedReason ?? 'no result' };
      return undefined;
    }
    const result = outcome.result;
    const seen = collectReadMemoryPaths(messages, this.ref.paths.memoryDir);
    for (const path of collectSurfacedMemories(messages, this.ref.paths.memoryDir).paths) seen.add(path);
    const fresh = filterAgainstRead(result.attachments, seen);
    this.status = { status: 'injected', jobId, outcome: result.outcome, paths: fresh.map((m) => m.path) };
    return fresh.length ? [relevantMemoriesAttachment(fresh, this.ref.paths.memoryDir)] : undefined;
  }

  /** At turn end: an unconsumed result is dropped (never injected into a later turn). */
  finish(): RecallStatus {
    if (this.status.status === 'pending') this.status = { status: 'dropped', jobId: this.status.jobId };
    return this.status;
  }
}

function newest<T>(items: T[], n: number): T[] {
  return items.length > n ? items.slice(items.length - n) : items;
}

export function describeRecall(status: RecallStatus): string | undefined {
  if (status.status !== 'injected' || status.paths.length === 0) return undefined;
  const n = status.paths.length;
  return `Recalled ${n} ${n === 1 ? 'memory' : 'memories'} (${status.paths.join(', ')})${
    status.outcome === 'fallback' ? ' [lexical fallback]' : ''
  }`;
}
