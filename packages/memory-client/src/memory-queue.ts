import { join } from 'node:path';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { EngramError } from '@engram/errors/engram-error';
import { hasMemoryWritesSince, isMemoryPathSync } from '@engram/memory-core/extraction/memory-writes';
import {
  addToOutbox,
  drainOutbox,
  type OutboxItem,
  readOutbox,
  writeSessionRecord,
} from '@engram/memory-core/extraction/session-record';
import { type EngramPaths, PROJECTS_DIRNAME } from '@engram/memory-core/paths/memory-paths';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import type { QueueBackendConfig } from '@engram/queue/backend-config';
import type { JobKind, PayloadOf } from '@engram/queue/catalog';
import { createQueueEngine, type QueueEngine } from '@engram/queue/engine';
import { type EnqueueReceipt, type JobOutcome, JobProducer } from '@engram/queue/producer';
import { ProjectChanges, projectChangesScope } from '@engram/queue/state/project-changes';
import { type ExtractReceipt, SessionState, sessionStateTtlMs } from '@engram/queue/state/session-state';
import type { StateStore } from '@engram/queue/state/state-store';
import { activeTelemetry } from '@engram/telemetry/setup';
import { tenantHomeDir } from '@engram/tenants/tenant-store';

// The foreground's side of memory work: decide and enqueue, never run a memory fork and never let a queue
// problem fail a turn. Every method reports what happened instead of throwing. Shared by apps/agent (its
// sessions and `engram hook`) and packages/agent-sdk (the Agent SDK's hook callbacks).

/** What the foreground's memory work reads from its configuration (apps/agent's AgentConfig has all of it). */
export interface MemoryQueueConfig {
  engramHome: string;
  /** The queue engine; `implicit` is the default URL nobody chose (nothing connects; work goes to the outbox). */
  backend: QueueBackendConfig;
  namespace: string;
  enqueueTimeoutMs: number;
  cleanupPeriodDays: number;
  /** Sessions whose record this process remembers writing (default RECORDED_SESSIONS_MAX). */
  recordedSessionsMax?: number;
}

/**
 * How many sessions a process remembers having written the record of; past it the least recently active is
 * forgotten, so a replica that serves sessions for months holds a bounded map. A forgotten session that takes
 * another turn writes its record again (the same bytes, atomically, off the turn's path).
 */
export const RECORDED_SESSIONS_MAX = 10_000;

/** No queue engine is configured for this home (thrown by state calls; durable work waits in the outbox). */
export class QueueNotConfiguredError extends EngramError {
  constructor(readonly engramHome: string) {
    super(
      'QUEUE_NOT_CONFIGURED',
      `no queue engine: no \`engram dev\` is running for ENGRAM_HOME ${engramHome}, and neither REDIS_URL nor ` +
        'ENGRAM_QUEUE_URL is set. Start the stack with `npm run dev` (or `npx engram dev`) in another terminal, ' +
        'or set REDIS_URL (REDIS_URL=redis://127.0.0.1:6379 to use a Redis there on purpose).',
      { retryable: true },
    );
  }
}

export type MemoryWorkStatus =
  | { status: 'queued'; jobId: string }
  | { status: 'skipped'; reason: string }
  /** `kept`: the work waits in the session's outbox and is handed to the queue when the engine is back. */
  | { status: 'not-queued'; reason: string; kept?: boolean };

/** Memory work that is kept in the session's outbox when it cannot be enqueued (recall is too short-lived). */
const DURABLE_KINDS = new Set<JobKind>(['extract', 'session-memory', 'dream']);
const OUTBOX_RETRY_MIN_MS = 1_000;
const OUTBOX_RETRY_MAX_MS = 30_000;

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
  /** Session directories whose record this process wrote (or is writing): the write, once per session. */
  private readonly recorded = new Map<string, Promise<void>>();
  /** The record writes still in flight. */
  private readonly recording = new Set<Promise<void>>();
  /** Session directories whose outbox may hold work (this process kept some, or found some on disk). */
  private readonly pending = new Set<string>();
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelayMs = OUTBOX_RETRY_MIN_MS;
  private flushing: Promise<void> | undefined;

  constructor(private readonly config: MemoryQueueConfig) {}

  get engine(): QueueEngine {
    // An implicit backend is the default URL nobody chose: connecting to it would join whatever stack answers
    // there (another home's). Nothing connects; every state call rejects (the callers' queue-down paths) and
    // durable work goes to the session's outbox (enqueue).
    if (this.config.backend.implicit) {
      this.engineInstance ??= unconfiguredEngine(new QueueNotConfiguredError(this.config.engramHome));
      return this.engineInstance;
    }
    this.engineInstance ??= createQueueEngine({
      config: this.config.backend,
      profile: 'producer',
      namespace: this.config.namespace,
      telemetry: activeTelemetry().bullmq,
    });
    return this.engineInstance;
  }

  get producer(): JobProducer {
    if (this.config.backend.implicit) throw new QueueNotConfiguredError(this.config.engramHome);
    this.producerInstance ??= new JobProducer(this.engine, { timeoutMs: this.config.enqueueTimeoutMs });
    return this.producerInstance;
  }

  sessionState(ref: SessionRef): SessionState {
    return new SessionState(
      this.engine.state,
      { ...this.projectRef(ref), sessionId: ref.sessionId },
      { ttlMs: sessionStateTtlMs(this.config.cleanupPeriodDays) },
    );
  }

  /** The project's feed of memory changes made for the whole project (consolidation, team pulls). */
  projectChanges(ref: SessionRef): ProjectChanges {
    return new ProjectChanges(this.engine.state, projectChangesScope(this.projectRef(ref)));
  }

  projectRef(ref: SessionRef) {
    return {
      ...(ref.tenant ? { tenant: ref.tenant } : {}),
      projectDir: sanitizePath(ref.paths.projectRoot),
      transcriptDir: sanitizePath(ref.paths.cwd),
    };
  }

  /**
   * Enqueues `payload`; work of a durable kind that cannot be enqueued is kept in the session's outbox. With
   * `session`, that session's record is written before its outbox (afterTurn starts it only after the enqueue).
   */
  async enqueue<K extends JobKind>(
    kind: K,
    payload: PayloadOf<K>,
    session?: SessionRef,
  ): Promise<MemoryWorkStatus> {
    try {
      const receipt: EnqueueReceipt = await this.producer.enqueue(kind, payload);
      // The engine answers again: hand over whatever waits in outboxes (in the background).
      if (this.pending.size > 0) void this.flushOutboxes();
      return { status: 'queued', jobId: receipt.jobId };
    } catch (error) {
      this.failures++;
      const reason = (error as Error).message;
      const dir = this.sessionDirOf(payload);
      const retryable = (error as { retryable?: boolean }).retryable !== false;
      if (!dir || !DURABLE_KINDS.has(kind) || !retryable) return { status: 'not-queued', reason };
      try {
        // Kept work is found through the session's record: it is on disk before the outbox is.
        await (session ? this.recordSession(session) : this.recorded.get(dir));
        await addToOutbox(dir, { kind: kind as OutboxItem['kind'], payload, atMs: Date.now() });
      } catch {
        return { status: 'not-queued', reason };
      }
      this.pending.add(dir);
      this.scheduleRetry();
      return {
        status: 'not-queued',
        reason: `${reason} Kept in the session's outbox; it is handed to the queue when the engine is back.`,
        kept: true,
      };
    }
  }

  /**
   * The session directory a payload's work belongs to: under this agent's ENGRAM_HOME, or, for a hosted
   * tenant's session, under that tenant's area of it — where its transcript is and the sweep looks.
   */
  private sessionDirOf(payload: unknown): string | undefined {
    const p = payload as { sessionId?: unknown; transcriptDir?: unknown; tenant?: unknown };
    if (typeof p.sessionId !== 'string' || typeof p.transcriptDir !== 'string') return undefined;
    if (!/^[A-Za-z0-9_-]+$/.test(p.sessionId) || p.transcriptDir.includes('/')) return undefined;
    if (p.tenant !== undefined && typeof p.tenant !== 'string') return undefined;
    let home = this.config.engramHome;
    try {
      if (p.tenant) home = tenantHomeDir(home, p.tenant);
    } catch {
      return undefined;
    }
    return join(home, PROJECTS_DIRNAME, p.transcriptDir, p.sessionId);
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.pending.size === 0) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.flushOutboxes().then(() => {
        if (this.pending.size === 0) {
          this.retryDelayMs = OUTBOX_RETRY_MIN_MS;
          return;
        }
        this.retryDelayMs = Math.min(this.retryDelayMs * 2, OUTBOX_RETRY_MAX_MS);
        this.scheduleRetry();
      });
    }, this.retryDelayMs);
    this.retryTimer.unref();
  }

  /** Hands every pending outbox item to the queue; what still fails stays for the next try (or the sweep). */
  flushOutboxes(): Promise<void> {
    this.flushing ??= (async () => {
      for (const dir of [...this.pending]) {
        const { left } = await drainOutbox(dir, async (item) => {
          await this.producer.enqueue(item.kind, item.payload as PayloadOf<typeof item.kind>);
          return true;
        }).catch(() => ({ left: 1 }));
        if (left === 0) this.pending.delete(dir);
      }
    })().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  /**
   * Writes the session's memory record once per process (the reconciliation sweep finds the session by it) and
   * picks up an outbox a previous process of this session left. Off the turn's path: `afterTurn` starts it once
   * its enqueue is answered and does not wait (the sweep looks only at sessions idle for
   * `ENGRAM_RECONCILE_QUIET_MS`, long after it lands; a queued job needs no record). What does need it waits for
   * it: an outbox write (kept work is found through the record) and `close()`, so a short-lived process never
   * exits before its record is on disk. A failed write is tried again at the session's next turn.
   */
  private recordSession(ref: SessionRef): Promise<void> {
    const dir = ref.paths.sessionDir(ref.sessionId);
    const running = this.recorded.get(dir);
    if (running) {
      // Most recently active last: a session that keeps taking turns is never the one forgotten.
      this.recorded.delete(dir);
      this.recorded.set(dir, running);
      return running;
    }
    const { projectDir, transcriptDir } = this.projectRef(ref);
    // Declared first: a failed write forgets itself only if it is still the session's entry.
    let write: Promise<void> | undefined;
    write = (async () => {
      // Started from the next turn of the event loop: the turn whose end asked for it has answered by then.
      await new Promise((resolve) => setImmediate(resolve));
      try {
        await writeSessionRecord(dir, { version: 1, sessionId: ref.sessionId, projectDir, transcriptDir });
      } catch {
        // Tried again at the session's next turn (unless a newer write for it already took this one's place).
        if (this.recorded.get(dir) === write) this.recorded.delete(dir);
      }
      if ((await readOutbox(dir).catch(() => [])).length > 0) {
        this.pending.add(dir);
        this.scheduleRetry();
      }
    })();
    this.recorded.set(dir, write);
    if (this.recorded.size > (this.config.recordedSessionsMax ?? RECORDED_SESSIONS_MAX)) {
      this.recorded.delete(this.recorded.keys().next().value as string);
    }
    this.recording.add(write);
    void write.finally(() => this.recording.delete(write));
    return write;
  }

  /** One non-blocking look at a job: finished or not, and its result or failure reason. */
  async jobOutcome<R>(kind: JobKind, jobId: string): Promise<JobOutcome<R>> {
    return (await this.producer.outcome(kind, jobId)) as JobOutcome<R>;
  }

  /**
   * Waits up to `timeoutMs` for a job's outcome: answered by the queue's completion event as soon as the job
   * finishes (JobProducer.waitFor), unfinished at the deadline or when no queue is configured.
   */
  async waitForJob<R>(kind: JobKind, jobId: string, timeoutMs: number): Promise<JobOutcome<R>> {
    try {
      return (await this.producer.waitFor(kind, jobId, timeoutMs)) as JobOutcome<R>;
    } catch {
      return { finished: false };
    }
  }

  /**
   * At turn end: if the agent itself wrote memory during this turn, that range is covered — move the cursor
   * and skip; otherwise enqueue an extraction for the new leaf (docs/design.md §5 `extract`). Only this turn's entries
   * need checking here (no cursor read on the hot path): the worker re-checks `hasMemoryWritesSince` from the
   * cursor before it forks, which covers writes from earlier turns whose own bookkeeping did not land.
   */
  async afterTurn(
    ref: SessionRef,
    turnEntries: readonly ChainEntry[],
    leaf: { leafUuid: string; leafSeq: number },
  ): Promise<MemoryWorkStatus> {
    const status = await this.decideAfterTurn(ref, turnEntries, leaf);
    // Not awaited, and started only now so its file I/O does not share the enqueue's moment (recordSession
    // says what waits for it; kept work wrote it already).
    void this.recordSession(ref);
    return status;
  }

  private async decideAfterTurn(
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
    return this.enqueue(
      'extract',
      { sessionId: ref.sessionId, ...this.projectRef(ref), ...leaf, requestedAt: new Date().toISOString() },
      ref,
    );
  }

  /** Resolves when the session records this process started are on disk (or failed). */
  async sessionRecordsWritten(): Promise<void> {
    while (this.recording.size > 0) await Promise.allSettled([...this.recording]);
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
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    // Session records still being written land before the process goes.
    await this.sessionRecordsWritten();
    // One last hand-over; what fails stays in the outbox for the next process or the reconciliation sweep.
    if (this.pending.size > 0 && this.producerInstance) await this.flushOutboxes().catch(() => {});
    await this.producerInstance?.close();
    await this.engineInstance?.close();
  }
}

export function queueDownReason(error: unknown): string {
  return `memory queue unavailable (${(error as Error).message})`;
}

/** An engine for a home with no queue: its state store rejects every call with `error`; closing is a no-op. */
function unconfiguredEngine(error: QueueNotConfiguredError): QueueEngine {
  const state = new Proxy({} as StateStore, {
    get: (_target, prop) => (prop === 'then' ? undefined : () => Promise.reject(error)),
  });
  return new Proxy({} as QueueEngine, {
    get: (_target, prop) => {
      if (prop === 'state') return state;
      if (prop === 'close') return async () => {};
      if (prop === 'then') return undefined;
      throw error;
    },
  });
}
