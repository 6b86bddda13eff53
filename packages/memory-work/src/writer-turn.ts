import { EngramError } from '@engram/errors/engram-error';
import type { JobKind } from '@engram/queue/catalog';
import { type HeldTurnLease, holdLeaseInTurn } from '@engram/queue/state/held-lease';
import { RESERVED_HOLDER_PREFIX, type StateStore } from '@engram/queue/state/state-store';
import type { HandlerContext, JobWaker } from '@engram/queue/worker';

// One writer at a time per memory directory, in arrival order: a job that finds the writer lease busy joins the
// lease's line and parks (delayed, no attempt spent) until the holder hands the lease to it and wakes its job.
// No random back-off, so no retry storm: a parked job costs one delay and one wake. A holder that dies stops
// renewing; its short lease expires and the first waiter, parked until then, takes over.

/** Writer leases are short and renewed at a third of their life: a dead holder blocks its line this long. */
export const WRITER_LEASE_MAX_TTL_MS = 15_000;
/** How long a handed-over lease waits for its waiter to wake before anyone may take it. */
export const HANDOFF_RESERVE_MS = 5_000;
/** A waiter not woken within this stops holding its place (its job is gone or far behind). */
export const WAITER_TTL_MS = 10 * 60_000;

export interface WriterTurnOptions {
  /** The lease's key (one per memory directory or notes file). */
  key: string;
  kind: JobKind;
  ttlMs: number;
  /** Runs before the job parks (the dream frees its consolidation lock so others are not blocked by a waiter). */
  onBusy?: () => Promise<void>;
}

export function writerHolder(kind: JobKind, jobId: string | undefined): string {
  return `${kind}:${jobId ?? 'unknown'}`;
}

function parseHolder(holder: string): { kind: JobKind; jobId: string } | undefined {
  const at = holder.indexOf(':');
  if (at <= 0) return undefined;
  return { kind: holder.slice(0, at) as JobKind, jobId: holder.slice(at + 1) };
}

export interface WriterTurn {
  signal: AbortSignal;
  token: number;
  /** Releases the lease and wakes the job it was handed to. */
  release(): Promise<void>;
}

/**
 * Takes the writer lease in turn, or parks the job: throws the value `ctx.defer` returns, which the worker
 * understands as "delayed, not failed".
 */
export async function takeWriterTurn(
  store: StateStore,
  ctx: HandlerContext,
  waker: JobWaker | undefined,
  opts: WriterTurnOptions,
): Promise<WriterTurn> {
  const holder = writerHolder(opts.kind, ctx.job.id);
  const ttlMs = Math.min(opts.ttlMs, WRITER_LEASE_MAX_TTL_MS);
  const turn = await takeTurn(store, opts.key, holder, ttlMs);
  if (turn.held) return wrap(turn.held, waker);
  await opts.onBusy?.();
  // First in line: wake up when the holder's lease would run out (it is woken earlier by the hand-off; this
  // is the takeover from a holder that died). Further back: the hand-offs wake it; the fallback is long.
  const untilExpiry = Math.min(Math.max(turn.expiresAtMs - Date.now(), 0) + 100, ttlMs + 1_000);
  const delayMs = turn.position === 0 ? Math.max(100, untilExpiry) : 3 * ttlMs;
  const parked = await ctx.defer(delayMs);
  // The lease may have been handed to us between our look and the park (the wake found us still active).
  const now = await store.getLease(opts.key).catch(() => undefined);
  if (now?.holder === `${RESERVED_HOLDER_PREFIX}${holder}` && ctx.job.id) {
    await waker?.wake(opts.kind, ctx.job.id).catch(() => false);
  }
  throw parked;
}

/** One try for the writer lease in FIFO turn, with the writer line's hand-off reserve and waiter TTL. */
function takeTurn(store: StateStore, key: string, holder: string, ttlMs: number) {
  return holdLeaseInTurn(store, key, {
    ttlMs,
    holder,
    reserveMs: HANDOFF_RESERVE_MS,
    waiterTtlMs: WAITER_TTL_MS,
  });
}

function wrap(held: HeldTurnLease, waker: JobWaker | undefined): WriterTurn {
  return {
    signal: held.signal,
    token: held.lease.token,
    release: async () => {
      const { next } = await held.release();
      const target = next ? parseHolder(next) : undefined;
      if (target) await waker?.wake(target.kind, target.jobId).catch(() => false);
    },
  };
}

/** How long a staged commit waits in-process for its turn before giving up (the job is retried). */
export const COMMIT_TURN_MAX_WAIT_MS = 120_000;

/**
 * A commit's look at the writer lease while it waits its turn: the lease handed to a job waiting in process is
 * reserved for it and idle until its next look, so looks are frequent (each is one short script call).
 */
const COMMIT_TURN_POLL_FIRST_MS = 10;
const COMMIT_TURN_POLL_MAX_MS = 50;

/**
 * Takes the writer lease in turn without parking the job: a staged commit holds the lease for milliseconds, so
 * the job keeps its place in the line and polls (10 ms doubling to 50 ms) until the lease is free or handed
 * to it. Throws a retryable EngramError when the wait exceeds `maxWaitMs` (a consolidation holding the lease for
 * its whole run) or `signal` aborts.
 */
export async function waitWriterTurn(
  store: StateStore,
  holderKind: JobKind,
  jobId: string | undefined,
  waker: JobWaker | undefined,
  opts: { key: string; ttlMs: number; signal?: AbortSignal; maxWaitMs?: number },
): Promise<WriterTurn> {
  const holder = writerHolder(holderKind, jobId);
  const ttlMs = Math.min(opts.ttlMs, WRITER_LEASE_MAX_TTL_MS);
  const deadline = Date.now() + (opts.maxWaitMs ?? COMMIT_TURN_MAX_WAIT_MS);
  let pause = COMMIT_TURN_POLL_FIRST_MS;
  for (;;) {
    if (opts.signal?.aborted) throw new WriterBusyError(opts.key, 'the job was stopped');
    const turn = await takeTurn(store, opts.key, holder, ttlMs);
    if (turn.held) return wrap(turn.held, waker);
    if (Date.now() >= deadline) throw new WriterBusyError(opts.key, 'the wait for the commit turn ran out');
    await new Promise((r) => setTimeout(r, pause));
    pause = Math.min(pause * 2, COMMIT_TURN_POLL_MAX_MS);
  }
}

export class WriterBusyError extends EngramError {
  constructor(key: string, why: string) {
    super(
      'WRITER_BUSY',
      `The memory writer lease ${key} could not be taken (${why}); the job will be retried`,
      {
        retryable: true,
      },
    );
  }
}
