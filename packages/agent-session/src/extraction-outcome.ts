import type { MemoryQueue, MemoryWorkStatus, SessionRef } from '@engram/memory-client/memory-queue';
import type { ExtractReceipt } from '@engram/queue/state/session-state';

// What became of one turn's memory work, told truthfully: `engram run` follows its extraction job until the
// session's cursor covers the turn (done), the job fails for good (failed), or the wait ends (pending, or
// retrying when attempts have failed and BullMQ will try again). It never says "pending" about a failed job.

export type ExtractionOutcome =
  | { status: 'done'; receipts: ExtractReceipt[]; waitedMs: number }
  | { status: 'failed'; reason: string; attempts: number; waitedMs: number }
  | { status: 'retrying'; lastError: string; attempts: number; waitedMs: number }
  | { status: 'pending'; waitedMs: number }
  /** `kept`: the work waits in the session's outbox (durable) and is handed to the queue once it answers. */
  | { status: 'not-queued'; reason: string; kept?: boolean }
  | { status: 'skipped'; reason: string }
  | { status: 'disabled' };

/**
 * True when the memory work of the turn was lost: it could not be queued and was not kept in the session's
 * outbox either, or its job failed for good. Work kept in the outbox is not lost (the next agent or the
 * workers' sweep hands it over), so it is no failure.
 */
export function memoryWorkFailed(outcome: ExtractionOutcome): boolean {
  return outcome.status === 'failed' || (outcome.status === 'not-queued' && !outcome.kept);
}

export async function followExtraction(
  memory: MemoryQueue | undefined,
  ref: SessionRef,
  extract: MemoryWorkStatus,
  leafSeq: number,
  timeoutMs: number,
): Promise<ExtractionOutcome> {
  if (!memory) return { status: 'disabled' };
  if (extract.status === 'not-queued')
    return { status: 'not-queued', reason: extract.reason, ...(extract.kept ? { kept: true } : {}) };
  if (extract.status === 'skipped') return { status: 'skipped', reason: extract.reason };
  const started = Date.now();
  const queue = memory.producer.queue('extract');
  let delay = 50;
  let last: ExtractionOutcome = { status: 'pending', waitedMs: 0 };
  while (true) {
    const drained = await memory.drainExtraction(ref, leafSeq, 0);
    if (drained.done) return { status: 'done', receipts: drained.receipts, waitedMs: Date.now() - started };
    // The state first, then the job: a job read before its failure landed carries no reason or attempts yet,
    // while a state read after it would already say "failed" (failed for good is final, so the later read of
    // the job holds the reason).
    const state = await queue.getJobState(extract.jobId).catch(() => 'unknown');
    const job = await queue.getJob(extract.jobId).catch(() => undefined);
    const waitedMs = Date.now() - started;
    if (job) {
      if (state === 'failed') {
        // The cursor may still have moved past the turn through a later job of the same session.
        const again = await memory.drainExtraction(ref, leafSeq, 0);
        if (again.done) return { status: 'done', receipts: again.receipts, waitedMs };
        return {
          status: 'failed',
          reason: job.failedReason || 'the extraction job failed',
          attempts: job.attemptsMade,
          waitedMs,
        };
      }
      last =
        job.attemptsMade > 0 && job.failedReason
          ? { status: 'retrying', lastError: job.failedReason, attempts: job.attemptsMade, waitedMs }
          : { status: 'pending', waitedMs };
    } else last = { status: 'pending', waitedMs };
    if (waitedMs >= timeoutMs) return last;
    await new Promise((r) => setTimeout(r, Math.min(delay, Math.max(0, timeoutMs - waitedMs))));
    delay = Math.min(delay * 2, 500);
  }
}
