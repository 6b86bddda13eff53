import { promises as fs } from 'node:fs';
import { cacheSafeParamsPathFor, loadCacheSafeParams } from '@engram/agent-runtime/fork/cache-safe-params';
import { type ForkResult, runForkedAgent } from '@engram/agent-runtime/fork/run-forked-agent';
import { runQueryLoop } from '@engram/agent-runtime/loop/query-loop';
import type { ModelClient, Usage } from '@engram/agent-runtime/model/client';
import type { SystemBlock } from '@engram/agent-runtime/model/types';
import type { UnattendedBoundary } from '@engram/agent-runtime/sandbox/boundary';
import { prepareUnattended } from '@engram/agent-runtime/sandbox/unattended';
import { defaultTools } from '@engram/agent-runtime/tools/registry';
import type { CanUseTool } from '@engram/agent-runtime/tools/tool';
import {
  type ChainEntry,
  createUserEntry,
  type TranscriptEntry,
} from '@engram/agent-runtime/transcript/entry';
import { EngramError } from '@engram/errors/engram-error';
import { removeStaleTempFiles } from '@engram/fs-atomic/atomic-write';
import type { JobKind } from '@engram/queue/catalog';
import type { StateStore } from '@engram/queue/state/state-store';
import type { HandlerContext, JobWaker } from '@engram/queue/worker';
import { PermanentJobError } from '@engram/queue/worker';
import { inSpan } from '@engram/telemetry/spans';
import type { ForkTransaction } from './transactions.js';
import { diffTrees, type HashTreeOptions, hashTree, type TreeChange, type TreeState } from './tree-hash.js';
import { takeWriterTurn, type WriterTurn } from './writer-turn.js';

// The one fork pipeline every memory job runs (extract, session-memory, dream), each as configuration:
//
//   writer lease (FIFO per directory) → temp cleanup → before-state (content hashes) → transaction begin
//   (journal of an earlier attempt, or a snapshot) → fork (cache-safe parameters of the session, or a minimal
//   context) under the job's permission policy → token and denial metrics → abort check → guard (the job's
//   verdict on before/after) → commit, or restore → receipt from the bytes on disk → release (hand-off).
//
// Receipts are never computed from the fork's intentions: a Write the tool refused changes no hash, so it is
// in no receipt and in no `engram_memories_written_total`.

export type MemoryQueueKind = Extract<JobKind, 'extract' | 'session-memory' | 'dream'>;

export interface PipelineMetrics {
  forkTokens: { inc(labels: { queue: string; kind: string }, value?: number): void };
  toolDenials: { inc(labels: { queue: string; tool: string }, value?: number): void };
  memoriesWritten: { inc(labels: { queue: string; action: string }, value?: number): void };
}

export interface PipelineLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface PipelineDeps {
  client: ModelClient;
  state: StateStore;
  metrics: PipelineMetrics;
  /** Wakes the job a writer lease is handed to; without one, waiters wake on their fallback delay. */
  waker?: JobWaker;
}

/** Where the fork's conversation comes from. */
export type ForkSource =
  | {
      kind: 'session';
      transcriptPath: string;
      /** The transcript's entries, when the job has read them already (not read again by the fork). */
      entries?: readonly TranscriptEntry[];
      leafUuid: string;
      sessionId: string;
      /** When the session's cache-safe parameters are missing: fail (default) or fork from `minimal`. */
      fallback?: Extract<ForkSource, { kind: 'minimal' }>;
    }
  | {
      kind: 'minimal';
      model: string;
      system: SystemBlock[];
      maxTokens: number;
      sessionId: string;
      why?: string;
    };

export interface ForkPlan {
  source: ForkSource;
  instruction: string;
  canUseTool: CanUseTool;
  maxTurns: number;
  /** The fork's working directory. */
  cwd: string;
  toolResultsDir?: string;
  extraReadFiles?: readonly string[];
  fileModes?: { file: number; dir: number };
  /**
   * The fork's filesystem boundary (agent-runtime's `UnattendedBoundary`): the directory it may change and
   * whether Bash may (the jail), what its tools may open (a tenant's job: its workspace and ENGRAM_HOME area;
   * a CLI job: the `local` boundary), Bash's world, and an optional path alias. Required, and applied on both
   * fork paths (session and minimal context), so no job kind can run a fork without one.
   */
  boundary: UnattendedBoundary;
  /** Called with every message the fork produces (after the transaction has recorded its intents). */
  onMessage?: (entry: ChainEntry) => Promise<void>;
}

export interface ForkOutcome extends Pick<ForkResult, 'usage' | 'turns' | 'endReason' | 'deniedCalls'> {
  forkedFrom: 'session' | 'minimal';
  /** Why a session fork fell back to the minimal context. */
  minimalBecause?: string;
}

export type GuardVerdict = { ok: true } | { ok: false; code: string; message: string; keepRefused?: boolean };

export interface Receipt extends TreeChange {
  /** Files whose change is credited to this job, relative to the root. */
  files: string[];
}

export interface RunContext {
  before: TreeState;
  after: TreeState;
  /** After vs. this attempt's before-state. */
  change: TreeChange;
  fork: ForkOutcome;
}

export interface ForkPipelineSpec<R> {
  queue: MemoryQueueKind;
  ctx: HandlerContext;
  log: PipelineLogger;
  writer: { key: string; ttlMs: number; onBusy?: () => Promise<void> };
  /**
   * The only directory this fork may change. Hashed before and after, cleaned of stale temp files; the plan's
   * `boundary.jail.root` confines the fork's writes to it (or to a directory below it).
   */
  root: string;
  rootMode?: number;
  /** Which files under root make up the state (default: visible Markdown). */
  include?: HashTreeOptions['include'];
  /** Which changed files count as memories in `engram_memories_written_total` (default: none). */
  countsAsMemory?: (rel: string) => boolean;
  tempMaxAgeMs: number;
  /** Extra signals whose abort stops the fork (the dream's consolidation lock). */
  signals?: AbortSignal[];
  transaction: ForkTransaction;
  /**
   * Runs first under the lease: a re-check of whether the work is still due (another job may have done it
   * while this one waited its turn). `{ skip }` ends the job with that result, touching nothing.
   */
  admit?(): Promise<{ skip: R } | undefined>;
  /** Builds the fork once the lease is held and the transaction has begun. */
  plan(begin: { before: TreeState; recovered: string[] }): Promise<ForkPlan>;
  guard?(run: RunContext): Promise<GuardVerdict>;
  /**
   * Side effects on disk after a kept result (pointers, deleting emptied files). Resolving to `false` says it
   * changed nothing, so the tree is not hashed again for the receipt.
   */
  commit?(run: RunContext): Promise<unknown>;
  /** Builds the job's result from the receipt (and records cursors, receipts). */
  finish(run: RunContext & { receipt: Receipt }): Promise<R>;
  /** Runs after a failure, once the transaction decided (restored or kept) — e.g. a lock-file rollback. */
  onFailure?(info: { error: unknown; restored: boolean; owner: boolean }): Promise<void>;
}

/** The fork stopped because its lease or the job's lock was lost, or on shutdown; BullMQ retries it. */
export class ForkAbortedError extends EngramError {
  constructor(queue: string, why: string) {
    super('FORK_ABORTED', `${queue} fork aborted (${why}); it will be retried`, { retryable: true });
  }
}

export const NO_USAGE: Usage = {
  inputTokens: 0,
  outputTokens: 0,
  cacheReadInputTokens: 0,
  cacheCreationInputTokens: 0,
};

export function runForkPipeline<R>(deps: PipelineDeps, spec: ForkPipelineSpec<R>): Promise<R> {
  return inSpan(`engram.fork ${spec.queue}`, { attributes: { 'engram.queue': spec.queue } }, () =>
    runForkPipelineInSpan(deps, spec),
  );
}

async function runForkPipelineInSpan<R>(deps: PipelineDeps, spec: ForkPipelineSpec<R>): Promise<R> {
  const { ctx, log, queue } = spec;
  const writer: WriterTurn = await takeWriterTurn(deps.state, ctx, deps.waker, {
    key: spec.writer.key,
    kind: queue,
    ttlMs: spec.writer.ttlMs,
    ...(spec.writer.onBusy ? { onBusy: spec.writer.onBusy } : {}),
  });
  const signal = AbortSignal.any([ctx.signal, writer.signal, ...(spec.signals ?? [])]);
  const owner = () => !writer.signal.aborted && !(spec.signals ?? []).some((s) => s.aborted);
  const tx = spec.transaction;
  const include = spec.include;
  const hash = () => hashTree(spec.root, include ? { include } : {});
  let begun = false;
  try {
    const admitted = await spec.admit?.();
    if (admitted) return admitted.skip;
    await fs.mkdir(spec.root, { recursive: true, mode: spec.rootMode ?? 0o700 });
    await removeStaleTempFiles(spec.root, spec.tempMaxAgeMs);
    const before = await hash();
    const begin = await tx.begin(before);
    begun = true;
    const plan = await spec.plan({ before, recovered: begin.recovered });

    let fork: ForkOutcome | undefined;
    let forkError: unknown;
    // Whether the fork asked for any tool call: every call is in an assistant message handed to onMessage
    // before the tool runs, so a fork that asked for none changed nothing on disk (the usual "nothing to
    // save"), and its after-state is its before-state without walking and reading the tree again.
    let toolCalls = 0;
    const counted: ForkPlan = {
      ...plan,
      onMessage: async (entry) => {
        toolCalls += toolUseCount(entry);
        await plan.onMessage?.(entry);
      },
    };
    try {
      fork = await runFork(deps, counted, signal, tx, log);
    } catch (error) {
      forkError = error;
    }
    if (fork) recordForkMetrics(deps.metrics, queue, fork);
    const aborted = forkError === undefined && (fork?.endReason === 'aborted' || signal.aborted);
    if (forkError !== undefined || aborted) {
      const error =
        forkError ??
        new ForkAbortedError(queue, String((signal.reason as Error | undefined)?.message ?? 'aborted'));
      // The job may keep partial work for its retry (the journal) or put everything back (snapshot, notes);
      // a guard that refuses even the partial result (destroyed notes) restores and fails for good.
      if (!tx.restoreOnFailure && spec.guard && owner()) {
        const after = await hash();
        const verdict = await spec.guard({
          before,
          after,
          change: diffTrees(before, after),
          fork: fork ?? {
            forkedFrom: 'session',
            usage: NO_USAGE,
            turns: 0,
            endReason: 'aborted',
            deniedCalls: [],
          },
        });
        if (!verdict.ok) throw await refuse(spec, verdict, owner);
      }
      throw error;
    }
    const done = fork!;
    let after = toolCalls === 0 ? before : await hash();
    const run: RunContext = { before, after, change: diffTrees(before, after), fork: done };
    const verdict = spec.guard ? await spec.guard(run) : ({ ok: true } as const);
    if (!verdict.ok) throw await refuse(spec, verdict, owner);
    const committed = spec.commit
      ? await inSpan('engram.commit', {}, () => spec.commit!(run))
      : await inSpan('engram.commit', {}, async () => false as const);
    if (!owner()) throw new ForkAbortedError(queue, 'lease or lock lost while committing');
    if (committed !== false) after = await hash();
    const final: RunContext = { ...run, after, change: diffTrees(before, after) };
    const receipt = receiptFor(await tx.baseline(before), after, tx.credited(final.change));
    for (const rel of receipt.created)
      if (spec.countsAsMemory?.(rel)) deps.metrics.memoriesWritten.inc({ queue, action: 'created' });
    for (const rel of receipt.updated)
      if (spec.countsAsMemory?.(rel)) deps.metrics.memoriesWritten.inc({ queue, action: 'updated' });
    const result = await inSpan(
      'engram.receipt',
      {
        attributes: {
          'engram.receipt.created': receipt.created.length,
          'engram.receipt.updated': receipt.updated.length,
        },
      },
      async () => {
        const finished = await spec.finish({ ...final, receipt });
        await tx.commit();
        return finished;
      },
    );
    return result;
  } catch (error) {
    if (begun && !(error instanceof RefusedError)) {
      const isOwner = owner();
      let restored = false;
      if (tx.restoreOnFailure && isOwner) {
        restored = await tx.restore({ keepRefused: false, why: (error as Error).message }).then(
          () => true,
          (restoreError: unknown) => {
            log.error({ err: (restoreError as Error).message }, 'restore after a failed fork failed');
            return false;
          },
        );
      }
      await spec.onFailure?.({ error, restored, owner: isOwner });
    }
    if (error instanceof RefusedError) throw error.permanent;
    throw error;
  } finally {
    await writer.release();
  }
}

function toolUseCount(entry: ChainEntry): number {
  const content = entry.type === 'assistant' ? entry.message?.content : undefined;
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const block of content as Array<{ type: string }>) if (block.type === 'tool_use') n++;
  return n;
}

/** A guard's refusal, after the transaction restored the previous state. */
class RefusedError extends EngramError {
  constructor(readonly permanent: PermanentJobError) {
    super(permanent.code, permanent.message, { retryable: false });
  }
}

async function refuse(
  spec: ForkPipelineSpec<unknown>,
  verdict: Extract<GuardVerdict, { ok: false }>,
  owner: () => boolean,
): Promise<RefusedError> {
  const isOwner = owner();
  let note = '';
  if (isOwner) {
    const restored = await spec.transaction.restore({
      keepRefused: verdict.keepRefused === true,
      why: verdict.message,
    });
    note = restored.note ?? '';
  }
  spec.log.warn(
    { code: verdict.code, reason: verdict.message },
    `${spec.queue} result refused; previous state restored`,
  );
  await spec.onFailure?.({ error: verdict, restored: isOwner, owner: isOwner });
  return new RefusedError(new PermanentJobError(verdict.code, `${verdict.message}${note}`));
}

/**
 * The receipt: for every file the transaction credits to this job, its state now against its state before
 * the job first touched it (the baseline: this attempt's before-state, or what the journal recorded before an
 * earlier attempt's write).
 */
export function receiptFor(
  baseline: ReadonlyMap<string, string | null>,
  after: TreeState,
  credited: Set<string> | 'all',
): Receipt {
  const all = diffTrees(baseline, after);
  const keep = (rel: string) => credited === 'all' || credited.has(rel);
  const created = all.created.filter(keep);
  const updated = all.updated.filter(keep);
  const deleted = all.deleted.filter(keep);
  return { created, updated, deleted, files: [...created, ...updated, ...deleted].sort() };
}

export function recordForkMetrics(metrics: PipelineMetrics, queue: string, fork: ForkOutcome): void {
  for (const denied of fork.deniedCalls) metrics.toolDenials.inc({ queue, tool: denied.tool });
  metrics.forkTokens.inc({ queue, kind: 'input' }, fork.usage.inputTokens);
  metrics.forkTokens.inc({ queue, kind: 'output' }, fork.usage.outputTokens);
  metrics.forkTokens.inc({ queue, kind: 'cache_read' }, fork.usage.cacheReadInputTokens);
  metrics.forkTokens.inc({ queue, kind: 'cache_creation' }, fork.usage.cacheCreationInputTokens);
}

export async function runFork(
  deps: PipelineDeps,
  plan: ForkPlan,
  signal: AbortSignal,
  tx: Pick<ForkTransaction, 'noteMessage'>,
  log: PipelineLogger,
): Promise<ForkOutcome> {
  const onMessage = async (entry: ChainEntry) => {
    // Intents first: a write must be in the journal before the tool runs it (an attempt killed after the
    // write but before anything else still tells its retry what it may have written).
    await tx.noteMessage?.(entry, plan.cwd);
    await plan.onMessage?.(entry);
  };
  let source = plan.source;
  if (source.kind === 'session') {
    const params = await loadCacheSafeParams(cacheSafeParamsPathFor(source.transcriptPath)).catch(
      (error: Error) => error,
    );
    if (!(params instanceof Error)) {
      const fork = await runForkedAgent({
        client: deps.client,
        params,
        transcriptPath: source.transcriptPath,
        ...(source.entries ? { entries: source.entries } : {}),
        leafUuid: source.leafUuid,
        instruction: plan.instruction,
        canUseTool: plan.canUseTool,
        maxTurns: plan.maxTurns,
        signal,
        cwd: plan.cwd,
        ...(plan.toolResultsDir ? { toolResultsDir: plan.toolResultsDir } : {}),
        ...(plan.extraReadFiles ? { extraReadFiles: plan.extraReadFiles } : {}),
        ...(plan.fileModes ? { fileModes: plan.fileModes } : {}),
        boundary: plan.boundary,
        onMessage,
      });
      return { forkedFrom: 'session', ...fork };
    }
    if (!source.fallback) {
      throw new PermanentJobError('NO_CACHE_SAFE_PARAMS', `Session ${source.sessionId}: ${params.message}`);
    }
    log.info({ why: 'the session has no cache-safe parameters' }, 'forking from a minimal context');
    source = { ...source.fallback, why: 'the session has no cache-safe parameters' };
  }
  // Minimal context: no conversation to share a cache with, so the request is just the given system prompt
  // and the instruction.
  const first = createUserEntry(
    { sessionId: source.sessionId, cwd: plan.cwd, parentUuid: null },
    plan.instruction,
  );
  const result = await runQueryLoop({
    client: deps.client,
    model: source.model,
    system: source.system,
    tools: defaultTools(),
    maxTokens: source.maxTokens,
    messages: [first],
    canUseTool: plan.canUseTool,
    maxTurns: plan.maxTurns,
    signal,
    cwd: plan.cwd,
    sessionId: source.sessionId,
    ...(plan.fileModes ? { fileModes: plan.fileModes } : {}),
    boundary: await prepareUnattended(plan.boundary),
    onMessage,
  });
  return {
    forkedFrom: 'minimal',
    ...(source.why ? { minimalBecause: source.why } : {}),
    usage: result.usage,
    turns: result.turns,
    endReason: result.endReason,
    deniedCalls: result.deniedCalls,
  };
}
