import type { ProjectChangeMarks } from './project-changes.js';
import type { StateStore, Versioned } from './state-store.js';
import { tenantKey } from './tenant-scope.js';

// Per-session coordination state shared by every agent replica and worker (docs/design.md §5): the extraction cursor,
// the newest extraction request, and the session-memory markers the compactor reads.

/**
 * Session state outlives a session by the transcript retention period (30 days by default): every write
 * renews its key's TTL, so it expires that long after the session's last activity, with its transcript.
 */
export const SESSION_STATE_TTL_MS = 30 * 24 * 3600 * 1000;

/** The TTL for a retention of `days` (ENGRAM_CLEANUP_PERIOD_DAYS); 0 or less keeps the default. */
export function sessionStateTtlMs(days: number | undefined): number {
  return days !== undefined && days > 0 ? days * 24 * 3600 * 1000 : SESSION_STATE_TTL_MS;
}

export interface TranscriptCursor {
  leafUuid: string;
  /** 1-based line number of the leaf in the transcript; cursors only ever move to a larger seq. */
  leafSeq: number;
}

export interface SessionMemoryMarkers {
  /** When the current (or last) update started, for the compactor's wait (≤15 s, stale after 60 s). */
  startedAtMs?: number;
  finishedAtMs?: number;
  /** Context tokens at the last successful update: the baseline for the ≥5,000-token growth rule. */
  tokensAtLastUpdate?: number;
  /** Transcript seq up to which tool calls have been counted for the ≥3-tool-calls rule. */
  lastUpdateSeq?: number;
  /** Last message the summary covers, set only when that turn had no pending tool calls. */
  lastSummarizedUuid?: string;
  /** Set once the session crossed the 10,000-token initialisation threshold. */
  initialized?: boolean;
}

export interface ExtractReceipt {
  fromSeq: number;
  toSeq: number;
  /** Memory files written, relative to the memory directory. */
  memories: Array<{ path: string; type?: string; action: 'created' | 'updated' }>;
  /** Memories written beyond the MAX_RECEIPT_MEMORIES named ones. */
  more?: number;
  atMs: number;
}

/**
 * The foreground reads only the receipts covering the leaf it waits for (the newest); a handful covers a
 * burst of coalesced turns. Each receipt names at most MAX_RECEIPT_MEMORIES files (`more` counts the rest), so
 * a session's receipts stay under a few KiB whatever a fork wrote.
 */
export const MAX_RECEIPTS = 5;
export const MAX_RECEIPT_MEMORIES = 20;

export interface SessionKey {
  /** The hosted tenant whose session this is (from the authenticated envelope); undefined for the operator. */
  tenant?: string | undefined;
  transcriptDir: string;
  sessionId: string;
}

export class SessionState {
  private readonly scope: string;

  /**
   * Where a hosted tenant's session state lived before keys carried the tenant (undefined for the operator,
   * whose keys never changed). Hosted session ids are random UUIDs made by the server, so an unprefixed key
   * of such a session can only have been written for that one tenant: read as a fallback (and the cursor
   * adopted into the tenant's key), so an upgrade never loses a cursor.
   */
  private readonly legacyScope: string | undefined;

  private readonly ttlMs: number;

  constructor(
    private readonly store: StateStore,
    key: SessionKey,
    options: { ttlMs?: number } = {},
  ) {
    const local = `session:${key.transcriptDir}:${key.sessionId}`;
    this.scope = tenantKey(key.tenant, local);
    this.legacyScope = key.tenant ? local : undefined;
    this.ttlMs = options.ttlMs ?? SESSION_STATE_TTL_MS;
  }

  /** A versioned record of this session, falling back to (and adopting) its pre-tenant-key copy. */
  private async versioned<T>(name: string): Promise<Versioned<T> | undefined> {
    const current = await this.store.getVersioned<T>(`${this.scope}:${name}`);
    if (current || !this.legacyScope) return current;
    const legacy = await this.store.getVersioned<T>(`${this.legacyScope}:${name}`);
    if (legacy) {
      // Monotonic, so a concurrent newer write in the tenant's key wins over the adopted copy.
      await this.store.setIfNewer(`${this.scope}:${name}`, legacy.seq, legacy.value, this.ttlMs);
    }
    return legacy;
  }

  private async json<T>(name: string): Promise<T | undefined> {
    const current = await this.store.getJson<T>(`${this.scope}:${name}`);
    if (current !== undefined || !this.legacyScope) return current;
    return this.store.getJson<T>(`${this.legacyScope}:${name}`);
  }

  async extractCursor(): Promise<TranscriptCursor | undefined> {
    return (await this.versioned<TranscriptCursor>('extract-cursor'))?.value;
  }

  /** Moves the extraction cursor forward to `cursor`; a stale or repeated advance is a no-op (false). */
  async advanceExtractCursor(cursor: TranscriptCursor): Promise<boolean> {
    // A cursor still only in its pre-tenant key is adopted first, so a stale advance cannot move it back.
    if (this.legacyScope) await this.versioned<TranscriptCursor>('extract-cursor');
    return this.store.setIfNewer(`${this.scope}:extract-cursor`, cursor.leafSeq, cursor, this.ttlMs);
  }

  /** Records the newest leaf an extraction was requested for, so a waiting job covers it (newest wins). */
  noteExtractRequested(cursor: TranscriptCursor): Promise<boolean> {
    return this.store.setIfNewer(`${this.scope}:extract-requested`, cursor.leafSeq, cursor, this.ttlMs);
  }

  async latestExtractRequest(): Promise<TranscriptCursor | undefined> {
    return (await this.versioned<TranscriptCursor>('extract-requested'))?.value;
  }

  async sessionMemory(): Promise<SessionMemoryMarkers> {
    return (await this.json<SessionMemoryMarkers>('session-memory')) ?? {};
  }

  async updateSessionMemory(patch: Partial<SessionMemoryMarkers>): Promise<SessionMemoryMarkers> {
    // Markers are written only by the single session-memory worker holding the session's lease, or by the
    // foreground for `initialized`; read-modify-write is safe under that discipline.
    const next = { ...(await this.sessionMemory()), ...patch };
    await this.store.setJson(`${this.scope}:session-memory`, next, this.ttlMs);
    return next;
  }

  /** Receipts of the last extractions (newest last, at most MAX_RECEIPTS), for the foreground to show. */
  async extractReceipts(): Promise<ExtractReceipt[]> {
    return (await this.json<ExtractReceipt[]>('extract-receipts')) ?? [];
  }

  /**
   * Records what one extraction of `fromSeq..toSeq` saved. Written before the cursor moves, so a retry of a run
   * that crashed in between records the same range again: that receipt merges into the first (each memory once,
   * its first action kept) instead of standing beside it.
   */
  async recordExtractReceipt(receipt: ExtractReceipt): Promise<void> {
    // Written only by the session's single active extraction (one per session), so read-modify-write is safe.
    const current = await this.extractReceipts();
    const same = current.findIndex((r) => r.fromSeq === receipt.fromSeq && r.toSeq === receipt.toSeq);
    const earlier = same >= 0 ? current[same] : undefined;
    const merged: ExtractReceipt = earlier
      ? {
          ...receipt,
          memories: [
            ...earlier.memories,
            ...receipt.memories.filter((m) => !earlier.memories.some((e) => e.path === m.path)),
          ],
          ...(earlier.more || receipt.more ? { more: Math.max(earlier.more ?? 0, receipt.more ?? 0) } : {}),
        }
      : receipt;
    const capped: ExtractReceipt =
      merged.memories.length > MAX_RECEIPT_MEMORIES
        ? {
            ...merged,
            memories: merged.memories.slice(0, MAX_RECEIPT_MEMORIES),
            more: (merged.more ?? 0) + merged.memories.length - MAX_RECEIPT_MEMORIES,
          }
        : merged;
    const next = (earlier ? current.map((r, i) => (i === same ? capped : r)) : [...current, capped]).slice(
      -MAX_RECEIPTS,
    );
    await this.store.setJson(`${this.scope}:extract-receipts`, next, this.ttlMs);
  }

  /** The newest project-wide memory change (per source) this session has announced (ProjectChanges). */
  async projectChangeMarks(): Promise<ProjectChangeMarks | undefined> {
    return this.store.getJson<ProjectChangeMarks>(`${this.scope}:project-changes-seen`);
  }

  async setProjectChangeMarks(marks: ProjectChangeMarks): Promise<void> {
    await this.store.setJson(`${this.scope}:project-changes-seen`, marks, this.ttlMs);
  }

  /** Every key this session's state may occupy (for its cost, and for tests). */
  get keys(): string[] {
    return [
      'extract-cursor',
      'extract-requested',
      'session-memory',
      'extract-receipts',
      'project-changes-seen',
    ].map((k) => `${this.scope}:${k}`);
  }

  /** The lease key serialising session-memory updates for this session. */
  get sessionMemoryLeaseKey(): string {
    return `${this.scope}:session-memory-lease`;
  }
}
