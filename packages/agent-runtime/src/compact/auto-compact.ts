import { EngramError } from '@engram/errors/engram-error';
import { PromptTooLongError, RequestTooLargeError } from '../model/errors.js';
import { type ChainEntry, isCompactBoundary } from '../transcript/entry.js';
import type { CompactionResult, CompactTrigger } from './compaction.js';
import {
  type SessionMemoryCompactionSkip,
  type SessionMemorySummary,
  trySessionMemoryCompaction,
} from './session-memory-compact.js';
import type { TailOptions } from './tail.js';
import { MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES } from './thresholds.js';

// The foreground's compaction policy (docs/design.md §7; docs/claude-code-memory.md §7.19–21, §10.12–17). Before each model call:
// at or over the threshold, compact from the session notes when they are usable (no model call), else with
// a model-written summary; stop trying after 3 failures in a row. On a "prompt is too long" reply: one
// reactive compaction and one retry, then an error the user can act on.

/** How long the compactor waits for a session-memory update in flight. */
export const SESSION_MEMORY_WAIT_TIMEOUT_MS = 15_000;
/** An update that started longer ago than this is presumed dead: nobody waits for it. */
export const SESSION_MEMORY_STALE_MS = 60_000;
export const SESSION_MEMORY_WAIT_POLL_MS = 1_000;

/** The markers the worker publishes (a subset of the queue's `SessionMemoryMarkers`). */
export interface SessionMemoryUpdateMarkers {
  startedAtMs?: number | undefined;
  finishedAtMs?: number | undefined;
}

export type SessionMemoryWaitPlan =
  | { wait: false; reason: 'idle' | 'stale' }
  | { wait: true; untilMs: number };

/**
 * Whether to wait for an update, and until when. An update is in flight when it started and has not
 * finished since; one that started over 60 s ago is stale. The wait ends 15 s after it began
 * (`waitStartedAtMs`, default now) or when the update turns stale, whichever is first.
 */
export function sessionMemoryWaitPlan(
  markers: SessionMemoryUpdateMarkers,
  nowMs: number,
  options: { waitStartedAtMs?: number; timeoutMs?: number; staleMs?: number } = {},
): SessionMemoryWaitPlan {
  const { startedAtMs, finishedAtMs } = markers;
  if (startedAtMs === undefined) return { wait: false, reason: 'idle' };
  if (finishedAtMs !== undefined && finishedAtMs >= startedAtMs) return { wait: false, reason: 'idle' };
  const staleMs = options.staleMs ?? SESSION_MEMORY_STALE_MS;
  if (nowMs - startedAtMs > staleMs) return { wait: false, reason: 'stale' };
  const timeoutMs = options.timeoutMs ?? SESSION_MEMORY_WAIT_TIMEOUT_MS;
  return {
    wait: true,
    untilMs: Math.min((options.waitStartedAtMs ?? nowMs) + timeoutMs, startedAtMs + staleMs),
  };
}

export interface WaitForSessionMemoryOptions {
  readMarkers: () => Promise<SessionMemoryUpdateMarkers>;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  pollMs?: number;
  timeoutMs?: number;
  staleMs?: number;
  signal?: AbortSignal;
}

export interface SessionMemoryWaitOutcome {
  outcome: 'idle' | 'stale' | 'finished' | 'timeout' | 'aborted';
  waitedMs: number;
}

/** Polls the markers (every second by default) until no update is in flight or the wait plan runs out. */
export async function waitForSessionMemoryUpdate(
  opts: WaitForSessionMemoryOptions,
): Promise<SessionMemoryWaitOutcome> {
  const now = opts.now ?? Date.now;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const pollMs = opts.pollMs ?? SESSION_MEMORY_WAIT_POLL_MS;
  const started = now();
  let polled = false;
  for (;;) {
    if (opts.signal?.aborted) return { outcome: 'aborted', waitedMs: now() - started };
    const plan = sessionMemoryWaitPlan(await opts.readMarkers(), now(), {
      waitStartedAtMs: started,
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      ...(opts.staleMs !== undefined ? { staleMs: opts.staleMs } : {}),
    });
    if (!plan.wait) {
      const outcome = plan.reason === 'stale' ? 'stale' : polled ? 'finished' : 'idle';
      return { outcome, waitedMs: now() - started };
    }
    const remaining = plan.untilMs - now();
    if (remaining <= 0) return { outcome: 'timeout', waitedMs: now() - started };
    polled = true;
    await sleep(Math.min(pollMs, remaining));
  }
}

/** What the foreground supplies about its session notes. */
export interface SessionMemorySource {
  /** Waits (bounded) for an update in flight, e.g. `waitForSessionMemoryUpdate` over the Redis markers. */
  waitForInFlight(): Promise<void>;
  /** The notes ready for compaction plus the last message they cover; undefined when not usable. */
  read(): Promise<(SessionMemorySummary & { lastSummarizedUuid?: string | undefined }) | undefined>;
}

export interface MaybeAutoCompactInput {
  /** The live chain. */
  entries: readonly ChainEntry[];
  /** Current context size (`tokenCountWithEstimation`). */
  contextTokens: number;
  /** `autoCompactThreshold(...)`. */
  threshold: number;
  sessionMemory?: SessionMemorySource;
  /** The model fallback, bound by the caller to its client and params (e.g. wrapping `compactWithModel`). */
  compactWithModel?: (
    entries: readonly ChainEntry[],
    context: { trigger: CompactTrigger; preTokens: number },
  ) => Promise<CompactionResult>;
  /** Failed auto-compactions in a row so far this session. */
  consecutiveFailures: number;
  transcriptPath?: string;
  /** Compact regardless of the threshold and the failure count (manual /compact, reactive compaction). */
  force?: boolean;
  trigger?: CompactTrigger;
  tail?: Omit<TailOptions, 'lastSummarizedUuid'>;
  overheadTokens?: number;
  onSessionMemorySkip?: (reason: SessionMemoryCompactionSkip | 'unavailable' | 'read_failed') => void;
  now?: () => Date;
  uuid?: () => string;
}

export type AutoCompactOutcome =
  | {
      compacted: false;
      reason: 'below_threshold' | 'circuit_open' | 'no_strategy' | 'failed';
      /** The count to keep for the next call. */
      consecutiveFailures: number;
      error?: unknown;
    }
  | {
      compacted: true;
      via: 'session-memory' | 'model';
      /** Append these to the transcript, in order; the live chain is then `result.live`. */
      newEntries: ChainEntry[];
      result: CompactionResult;
      consecutiveFailures: 0;
    };

export async function maybeAutoCompact(input: MaybeAutoCompactInput): Promise<AutoCompactOutcome> {
  const failures = input.consecutiveFailures;
  if (!input.force) {
    if (input.contextTokens < input.threshold) {
      return { compacted: false, reason: 'below_threshold', consecutiveFailures: failures };
    }
    if (failures >= MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES) {
      return { compacted: false, reason: 'circuit_open', consecutiveFailures: failures };
    }
  }
  const trigger = input.trigger ?? (input.force ? 'manual' : 'auto');

  if (input.sessionMemory) {
    let notes: Awaited<ReturnType<SessionMemorySource['read']>>;
    let readFailed = false;
    try {
      await input.sessionMemory.waitForInFlight();
      notes = await input.sessionMemory.read();
    } catch {
      notes = undefined;
      readFailed = true;
    }
    if (notes) {
      const result = trySessionMemoryCompaction({
        entries: input.entries,
        summary: notes,
        lastSummarizedUuid: notes.lastSummarizedUuid,
        threshold: input.threshold,
        preTokens: input.contextTokens,
        trigger,
        ...(input.transcriptPath !== undefined ? { transcriptPathForPointer: input.transcriptPath } : {}),
        ...(input.tail ? { tail: input.tail } : {}),
        ...(input.overheadTokens !== undefined ? { overheadTokens: input.overheadTokens } : {}),
        ...(input.onSessionMemorySkip ? { onSkip: input.onSessionMemorySkip } : {}),
        ...(input.now ? { now: input.now } : {}),
        ...(input.uuid ? { uuid: input.uuid } : {}),
      });
      if (result) {
        return {
          compacted: true,
          via: 'session-memory',
          newEntries: result.newEntries,
          result,
          consecutiveFailures: 0,
        };
      }
    } else {
      input.onSessionMemorySkip?.(readFailed ? 'read_failed' : 'unavailable');
    }
  }

  if (!input.compactWithModel) {
    return { compacted: false, reason: 'no_strategy', consecutiveFailures: failures };
  }
  try {
    const result = await input.compactWithModel(input.entries, { trigger, preTokens: input.contextTokens });
    return { compacted: true, via: 'model', newEntries: result.newEntries, result, consecutiveFailures: 0 };
  } catch (error) {
    return { compacted: false, reason: 'failed', consecutiveFailures: failures + 1, error };
  }
}

/** The conversation does not fit the context window even after compacting it once. */
export class ContextTooLongError extends EngramError {
  constructor(
    detail: string,
    readonly compacted: boolean,
    options?: { cause?: unknown },
  ) {
    super(
      'CONTEXT_TOO_LONG',
      `The conversation is too long for the model's context window (${detail}). ` +
        (compacted ? 'It was compacted once and is still too long: ' : 'It could not be compacted: ') +
        'start a new session, or run /compact with instructions to keep less, or drop large pasted content or attachments.',
      { retryable: false, ...options },
    );
  }
}

function overflowDetail(error: PromptTooLongError | RequestTooLargeError): string {
  if (
    error instanceof PromptTooLongError &&
    error.actualTokens !== undefined &&
    error.maxTokens !== undefined
  ) {
    return `${error.actualTokens.toLocaleString('en-US')} tokens, the maximum is ${error.maxTokens.toLocaleString('en-US')}`;
  }
  return error instanceof RequestTooLargeError
    ? 'the request body is over the size limit'
    : 'the prompt is too long';
}

/** A reply that compaction can cure: the prompt (or the request body) is over the model's limit. */
export function isContextOverflow(error: unknown): error is PromptTooLongError | RequestTooLargeError {
  return error instanceof PromptTooLongError || error instanceof RequestTooLargeError;
}

export interface ReactiveCompactOptions<T> {
  /** The live chain the failing request was built from. */
  entries: readonly ChainEntry[];
  /** Sends the normal request for a live chain (the query loop, a single call, …). */
  attempt: (entries: readonly ChainEntry[]) => Promise<T>;
  /** Compacts once; returns the entries to append (boundary first), or null when it could not. */
  compact: (
    entries: readonly ChainEntry[],
    error: PromptTooLongError | RequestTooLargeError,
  ) => Promise<readonly ChainEntry[] | null>;
  /** Persist the compaction (append to the transcript) before the retry. */
  onCompacted?: (newEntries: readonly ChainEntry[]) => void | Promise<void>;
}

export interface ReactiveCompactResult<T> {
  value: T;
  /** The live chain the successful attempt used. */
  entries: readonly ChainEntry[];
  compacted: boolean;
}

/**
 * Runs `attempt`; on a prompt-too-long (or 413) reply compacts exactly once and retries exactly once. A
 * second overflow, or a compaction that fails, ends in a `ContextTooLongError`.
 */
export async function reactiveCompact<T>(opts: ReactiveCompactOptions<T>): Promise<ReactiveCompactResult<T>> {
  let overflow: PromptTooLongError | RequestTooLargeError;
  try {
    return { value: await opts.attempt(opts.entries), entries: opts.entries, compacted: false };
  } catch (error) {
    if (!isContextOverflow(error)) throw error;
    overflow = error;
  }
  let newEntries: readonly ChainEntry[] | null;
  try {
    newEntries = await opts.compact(opts.entries, overflow);
  } catch (error) {
    throw new ContextTooLongError(
      `${overflowDetail(overflow)}; compaction failed: ${(error as Error).message}`,
      false,
      {
        cause: error,
      },
    );
  }
  if (!newEntries || newEntries.length === 0)
    throw new ContextTooLongError(overflowDetail(overflow), false, { cause: overflow });
  await opts.onCompacted?.(newEntries);
  const live = newEntries.filter((e) => !isCompactBoundary(e));
  try {
    return { value: await opts.attempt(live), entries: live, compacted: true };
  } catch (error) {
    if (isContextOverflow(error))
      throw new ContextTooLongError(overflowDetail(error), true, { cause: error });
    throw error;
  }
}
