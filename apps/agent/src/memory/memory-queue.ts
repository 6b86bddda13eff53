import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { hasMemoryWritesSince, isMemoryPathSync } from '@engram/memory-core/extraction/memory-writes';
import type { EngramPaths } from '@engram/memory-core/paths/memory-paths';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import type { JobKind, PayloadOf } from '@engram/queue/catalog';
import { createQueueEngine, type QueueEngine } from '@engram/queue/engine';
import { type EnqueueReceipt, JobProducer } from '@engram/queue/producer';
import { type ExtractReceipt, SessionState } from '@engram/queue/state/session-state';
import type { AgentConfig } from '../config.js';

// The foreground's side of memory work: decide and enqueue, never run a memory fork and never let a queue
// problem fail a turn. Every method reports what happened instead of throwing.

export type MemoryWorkStatus =
  | { status: 'queued'; jobId: string }
  | { status: 'skipped'; reason: string }
  | { status: 'not-queued'; reason: string };

export interface DrainResult {
  /** True when the session's extraction caught up with `leafSeq` before the deadline. */
  done: boolean;
  receipts: ExtractReceipt[];
  waitedMs: number;
}

export interface SessionRef {
  sessionId: string;
  paths: EngramPaths;
  /** The hosted-service tenant that owns the session (from the authenticated request); absent for the CLI. */
  tenant?: string | undefined;
}

export class MemoryQueue {
  private engineInstance: QueueEngine | undefined;
  private producerInstance: JobProducer | undefined;
  /** Enqueue failures this process saw (reported by `engram doctor` and in JSON output). */
  failures = 0;

  constructor(private readonly config: AgentConfig) {}

  get engine(): QueueEngine {
    this.engineInstance ??= createQueueEngine({
      config: this.config.backend,
      profile: 'producer',
      namespace: this.config.namespace,
    });
    return this.engineInstance;
  }

  get producer(): JobProducer {
    this.producerInstance ??= new JobProducer(this.engine, { timeoutMs: this.config.enqueueTimeoutMs });
    return this.producerInstance;
  }

  sessionState(ref: SessionRef): SessionState {
    return new SessionState(this.engine.state, {
      transcriptDir: this.projectRef(ref).transcriptDir,
      sessionId: ref.sessionId,
    });
  }

  projectRef(ref: SessionRef) {
    return {
      ...(ref.tenant ? { tenant: ref.tenant } : {}),
      projectDir: sanitizePath(ref.paths.projectRoot),
      transcriptDir: sanitizePath(ref.paths.cwd),
    };
  }

  async enqueue<K extends JobKind>(kind: K, payload: PayloadOf<K>): Promise<MemoryWorkStatus> {
    try {
      const receipt: EnqueueReceipt = await this.producer.enqueue(kind, payload);
      return { status: 'queued', jobId: receipt.jobId };
    } catch (error) {
      this.failures++;
      return { status: 'not-queued', reason: (error as Error).message };
    }
  }

  /** One non-blocking look at a job: finished or not, and its result or failure reason. */
  async jobOutcome<R>(
    kind: JobKind,
    jobId: string,
  ): Promise<{ finished: boolean; result?: R; failedReason?: string }> {
    const job = await this.producer.queue(kind).getJob(jobId);
    if (!job?.finishedOn) return { finished: false };
    return job.failedReason
      ? { finished: true, failedReason: job.failedReason }
      : { finished: true, result: job.returnvalue as R };
  }

  /**
   * At turn end: if the agent itself wrote memory during this turn, that range is covered — move the cursor
   * and skip; otherwise enqueue an extraction for the new leaf (DESIGN §5 `extract`). Only this turn's entries
   * need checking here (no cursor read on the hot path): the worker re-checks `hasMemoryWritesSince` from the
   * cursor before it forks, which covers writes from earlier turns whose own bookkeeping did not land.
   */
  async afterTurn(
    ref: SessionRef,
    turnEntries: readonly ChainEntry[],
    leaf: { leafUuid: string; leafSeq: number },
  ): Promise<MemoryWorkStatus> {
    const isMemoryPath = (p: string) => isMemoryPathSync(p, ref.paths.memoryDir);
    if (hasMemoryWritesSince(turnEntries, undefined, isMemoryPath)) {
      try {
        await this.engine.state.ready();
        await this.sessionState(ref).advanceExtractCursor(leaf);
        return { status: 'skipped', reason: 'the agent wrote memory itself this turn' };
      } catch (error) {
        this.failures++;
        return { status: 'not-queued', reason: queueDownReason(error) };
      }
    }
    return this.enqueue('extract', {
      sessionId: ref.sessionId,
      ...this.projectRef(ref),
      ...leaf,
      requestedAt: new Date().toISOString(),
    });
  }

  /** Waits (bounded) until the session's extraction cursor covers `leafSeq`, then returns the receipts. */
  async drainExtraction(ref: SessionRef, leafSeq: number, timeoutMs: number): Promise<DrainResult> {
    const started = Date.now();
    const state = this.sessionState(ref);
    let delay = 50;
    while (true) {
      try {
        const cursor = await state.extractCursor();
        if (cursor && cursor.leafSeq >= leafSeq) {
          const receipts = (await state.extractReceipts()).filter(
            (r) => r.toSeq >= leafSeq && r.fromSeq < leafSeq,
          );
          return { done: true, receipts, waitedMs: Date.now() - started };
        }
      } catch {
        // transient: keep waiting until the deadline
      }
      if (Date.now() - started >= timeoutMs)
        return { done: false, receipts: [], waitedMs: Date.now() - started };
      await new Promise((r) =>
        setTimeout(r, Math.min(delay, Math.max(0, timeoutMs - (Date.now() - started)))),
      );
      delay = Math.min(delay * 2, 500);
    }
  }

  async close(): Promise<void> {
    await this.producerInstance?.close();
    await this.engineInstance?.close();
  }
}

export function queueDownReason(error: unknown): string {
  return `memory queue unavailable (${(error as Error).message})`;
}
