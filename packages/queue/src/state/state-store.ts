// The small set of atomic primitives Engram's coordination needs (cursors, markers, throttles, leases). The
// typed APIs (session-state.ts, project-lock.ts) are written once on top of this interface, so they hold on
// every engine that implements it (Redis now; the PostgreSQL backend implements the same contract).

export interface Versioned<T> {
  seq: number;
  value: T;
}

export interface Lease {
  holder: string;
  /** Fencing token: strictly increasing per key across all holders, ever. */
  token: number;
  expiresAtMs: number;
}

/** What `acquireLeaseInTurn` found: the lease, or the caller's place in the line behind its holder. */
export type LeaseTurn =
  | { acquired: true; lease: Lease }
  | {
      acquired: false;
      /** 0-based position among the waiters (0: the lease is handed to this holder next). */
      position: number;
      holder: string;
      expiresAtMs: number;
    };

/** Prefix of a lease's holder while it is reserved for the waiter it was handed to. */
export const RESERVED_HOLDER_PREFIX = 'reserved:';

export interface StateStore {
  readonly engine: 'redis' | 'postgres';
  getJson<T>(key: string): Promise<T | undefined>;
  setJson(key: string, value: unknown, ttlMs?: number): Promise<void>;
  delete(key: string): Promise<void>;
  /** Stores `value` only if `seq` is greater than the stored seq (monotonic cursors). Returns whether it did. */
  setIfNewer(key: string, seq: number, value: unknown, ttlMs?: number): Promise<boolean>;
  getVersioned<T>(key: string): Promise<Versioned<T> | undefined>;
  /**
   * Adds each delta to its named integer counter under `key` (a missing counter starts at 0), atomically and in
   * one round trip whatever the number of concurrent writers. Counters have no TTL.
   */
  addCounters(key: string, deltas: Readonly<Record<string, number>>): Promise<void>;
  /** Every counter under `key` (an empty object when there are none). */
  getCounters(key: string): Promise<Record<string, number>>;
  /**
   * Marks `member` present under `key` for `ttlMs` (the store's clock), drops members whose time ran out, and
   * returns the other members present — one atomic step, so of callers marking at the same instant every one
   * but the first sees another. The key lives as long as its longest-lived member.
   */
  joinPresence(key: string, member: string, ttlMs: number): Promise<string[]>;
  /** Removes `member` from `key` (the key goes with its last member). */
  leavePresence(key: string, member: string): Promise<void>;
  /** Sets the key only if absent, with a TTL (throttles). Returns whether it did. */
  setIfAbsent(key: string, value: unknown, ttlMs: number): Promise<boolean>;
  /** Takes the lease if nobody holds a live one; returns it with a fresh fencing token, else undefined. */
  acquireLease(key: string, holder: string, ttlMs: number): Promise<Lease | undefined>;
  /** Extends the lease if `holder` + `token` still hold it. */
  renewLease(key: string, holder: string, token: number, ttlMs: number): Promise<boolean>;
  /** Releases the lease if `holder` + `token` still hold it. */
  releaseLease(key: string, holder: string, token: number): Promise<boolean>;
  getLease(key: string): Promise<Lease | undefined>;
  /**
   * The FIFO form of `acquireLease`: takes the lease when nobody holds it or when it is reserved for `holder`;
   * otherwise puts `holder` in the key's line of waiters (keeping its place when it is already there; a waiter
   * not seen for `waiterTtlMs` drops out) and says where it stands.
   */
  acquireLeaseInTurn(key: string, holder: string, ttlMs: number, waiterTtlMs: number): Promise<LeaseTurn>;
  /**
   * Releases the lease if `holder` + `token` still hold it and hands it to the first waiter: the lease is then
   * reserved for that waiter for `reserveMs` (nobody else can take it meanwhile). Returns that waiter.
   */
  releaseLeaseToNext(
    key: string,
    holder: string,
    token: number,
    reserveMs: number,
  ): Promise<{ released: boolean; next?: string }>;
  /**
   * Resolves when the store can take commands. While a first connection is being made it waits; when an
   * established connection has been lost it rejects at once (producers must not wait out an outage) — unless
   * `waitMs` is given: then it waits up to that long for the connection to come back (a served turn waits out
   * the reconnect backoff of a queue engine that was just restarted, instead of answering 503).
   */
  ready(options?: { waitMs?: number }): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
