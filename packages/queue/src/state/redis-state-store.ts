import { EngramError } from '@engram/errors/engram-error';
import { type Cluster, Redis, type RedisOptions, ReplyError } from 'ioredis';
import {
  type Lease,
  type LeaseTurn,
  RESERVED_HOLDER_PREFIX,
  type StateStore,
  type Versioned,
} from './state-store.js';

// StateStore on Redis: every compound operation is one Lua script, so it is atomic across any number of
// agents and workers.

const SET_IF_NEWER = `
local cur = redis.call('HGET', KEYS[1], 'seq')
if cur and tonumber(cur) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'seq', ARGV[1], 'value', ARGV[2])
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1`;

// KEYS: counters hash. ARGV: field, delta, field, delta, …
const ADD_COUNTERS = `
for i = 1, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1`;

// KEYS: the members, a sorted set scored by when each one's presence runs out. ARGV: member, ttl.
const JOIN_PRESENCE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return redis.call('ZRANGE', KEYS[1], 0, -1)`;

/**
 * How long a fencing counter outlives the last take of its lease, so no state key is unbounded. A counter
 * that expired restarts at 1: safe, because a holder is checked by name and token together, names are unique
 * per take, and no lease lives anywhere near this long (TTLs are seconds) — a stale holder is long gone.
 */
export const FENCE_TTL_MS = 7 * 24 * 3_600_000;

// Lua fragment: the next fencing token of KEYS[2], and its counter's expiry pushed out.
const NEXT_FENCE = `
local token = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ${FENCE_TTL_MS})`;

const ACQUIRE_LEASE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return nil end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
${NEXT_FENCE}
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', token, 'expiresAt', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {token, now + tonumber(ARGV[2])}`;

const RENEW_LEASE = `
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'token') ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'expiresAt', now + tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;

const RELEASE_LEASE = `
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'token') ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
return 1`;

// KEYS: lease, fence, waiters (a sorted set scored by join time). ARGV: holder, ttl, waiter ttl, reserved name.
const ACQUIRE_IN_TURN = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[3]))
local cur = redis.call('HGET', KEYS[1], 'holder')
if cur and cur ~= ARGV[4] then
  redis.call('ZADD', KEYS[3], 'NX', now, ARGV[1])
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  return {0, redis.call('ZRANK', KEYS[3], ARGV[1]), cur, redis.call('HGET', KEYS[1], 'expiresAt')}
end
${NEXT_FENCE}
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', token, 'expiresAt', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[1])
return {1, token, now + tonumber(ARGV[2])}`;

// KEYS: lease, waiters. ARGV: holder, token, reserve ms, reserved-name prefix.
const RELEASE_TO_NEXT = `
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'token') ~= ARGV[2] then return {0} end
local nxt = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if not nxt then
  redis.call('DEL', KEYS[1])
  return {1}
end
redis.call('ZREM', KEYS[2], nxt)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'holder', ARGV[4] .. nxt, 'token', 0, 'expiresAt', now + tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, nxt}`;

export class StateStoreUnavailableError extends EngramError {
  constructor(reason: string) {
    super('STATE_STORE_UNAVAILABLE', `Queue state store unavailable: ${reason}`, { retryable: true });
  }
}

/**
 * Whether a failed Redis call failed because the server could not be reached (the command got no reply):
 * the connection was closed or refused, the offline queue is off ("Stream isn't writeable…"), retries per
 * request ran out, a Cluster or the Sentinels could not be reached. A reply from Redis (a `ReplyError`:
 * WRONGTYPE, NOSCRIPT, OOM…) is not an outage, and neither is anything else (a JSON parse of a stored value).
 */
export function isRedisUnavailableError(error: unknown): boolean {
  if (!(error instanceof Error) || error instanceof ReplyError || error instanceof EngramError) return false;
  if (['MaxRetriesPerRequestError', 'AbortError', 'ClusterAllFailedError'].includes(error.name)) return true;
  const code = (error as Error & { code?: unknown }).code;
  if (
    typeof code === 'string' &&
    /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTCONN)$/.test(code)
  )
    return true;
  return /Stream isn't writeable|Connection is closed|connect ECONNREFUSED|read ECONNRESET|Command timed out|All sentinels are unreachable|Failed to refresh slots cache|None of startup nodes is available/.test(
    error.message,
  );
}

/**
 * Runs `issue` with the connection's socket corked and uncorks it in the check phase: what `issue` and the
 * caller's following synchronous and microtask work write goes out as one `writev`. Only on a single-node
 * connection that is ready (a Cluster's commands go to several sockets; an offline one queues them instead).
 * A socket corked already (a call inside a call, or an earlier one this turn) flushes at that cork's uncork.
 */
function heldUntilCheck<T>(redis: Redis | Cluster, issue: () => T): T {
  const stream = redis instanceof Redis && redis.status === 'ready' ? redis.stream : undefined;
  if (!stream?.writable || stream.writableCorked > 0) return issue();
  stream.cork();
  try {
    return issue();
  } finally {
    setImmediate(() => stream.uncork());
  }
}

export class RedisStateStore implements StateStore {
  readonly engine = 'redis' as const;
  private readonly redis: Redis | Cluster;

  /**
   * `namespace` isolates keys (the same prefix the queues use); `options` carry the connection profile. Given
   * an existing client instead of a URL, the store shares it and closes it in `close` — unless `borrowed`
   * (a queue's connection, which its queue closes). With `writeWithNext`, each call's command is held in the
   * connection's socket until the event loop's check phase, so a command the caller issues on the same
   * connection right after it (an enqueue's add after its bookkeeping, JobProducer.enqueue) leaves in the same
   * write: Redis reads both at once and answers both in one reply, instead of two of each (bench/enqueue.ts).
   */
  constructor(
    urlOrClient: string | Redis | Cluster,
    private readonly namespace: string,
    options: RedisOptions = {},
    private readonly ownership: { borrowed?: boolean; writeWithNext?: boolean } = {},
  ) {
    this.redis =
      typeof urlOrClient === 'string'
        ? new Redis(urlOrClient, { lazyConnect: false, ...options })
        : urlOrClient;
    // Errors surface on the calls that fail; an unhandled 'error' event would crash the process.
    this.redis.on('error', () => {});
    // Every call that cannot reach Redis fails with the one typed, retryable error the callers (the hosted
    // API's 503, the outbox, job retries) know, whatever ioredis's message for the outage is. Applied to every
    // method of the class that returns a promise, so a method added later is covered without a list to keep.
    // (The cast: methods are replaced by name on the instance; their signatures are unchanged.)
    const self = this as unknown as Record<string, (...args: unknown[]) => unknown>;
    for (const name of Object.getOwnPropertyNames(RedisStateStore.prototype)) {
      const method = self[name];
      if (name === 'constructor' || typeof method !== 'function') continue;
      const bound = method.bind(this);
      self[name] = (...args: unknown[]) => {
        const result = this.ownership.writeWithNext
          ? heldUntilCheck(this.redis, () => bound(...args))
          : bound(...args);
        if (!(result instanceof Promise)) return result;
        return result.catch((error: unknown) => {
          if (isRedisUnavailableError(error)) throw new StateStoreUnavailableError((error as Error).message);
          throw error;
        });
      };
    }
  }

  private k(key: string): string {
    return `${this.namespace}:engram:${key}`;
  }

  async getJson<T>(key: string): Promise<T | undefined> {
    const raw = await this.redis.get(this.k(key));
    return raw === null ? undefined : (JSON.parse(raw) as T);
  }

  async setJson(key: string, value: unknown, ttlMs?: number): Promise<void> {
    if (ttlMs && ttlMs > 0) await this.redis.set(this.k(key), JSON.stringify(value), 'PX', ttlMs);
    else await this.redis.set(this.k(key), JSON.stringify(value));
  }

  async delete(key: string): Promise<void> {
    await this.redis.del(this.k(key));
  }

  async setIfNewer(key: string, seq: number, value: unknown, ttlMs = 0): Promise<boolean> {
    const ok = await this.redis.eval(
      SET_IF_NEWER,
      1,
      this.k(key),
      String(seq),
      JSON.stringify(value),
      String(ttlMs),
    );
    return ok === 1;
  }

  async getVersioned<T>(key: string): Promise<Versioned<T> | undefined> {
    const [seq, value] = await this.redis.hmget(this.k(key), 'seq', 'value');
    if (seq == null || value == null) return undefined;
    return { seq: Number(seq), value: JSON.parse(value) as T };
  }

  async addCounters(key: string, deltas: Readonly<Record<string, number>>): Promise<void> {
    const args = Object.entries(deltas).flatMap(([field, n]) => [field, String(Math.trunc(n))]);
    if (args.length === 0) return;
    await this.redis.eval(ADD_COUNTERS, 1, this.k(`counters:${key}`), ...args);
  }

  async getCounters(key: string): Promise<Record<string, number>> {
    const raw = await this.redis.hgetall(this.k(`counters:${key}`));
    return Object.fromEntries(Object.entries(raw).map(([field, n]) => [field, Number(n)]));
  }

  async joinPresence(key: string, member: string, ttlMs: number): Promise<string[]> {
    const members = (await this.redis.eval(
      JOIN_PRESENCE,
      1,
      this.k(`presence:${key}`),
      member,
      String(Math.max(1, Math.trunc(ttlMs))),
    )) as string[];
    return members.filter((m) => m !== member);
  }

  async leavePresence(key: string, member: string): Promise<void> {
    // An empty sorted set is no key: the last member's removal deletes it.
    await this.redis.zrem(this.k(`presence:${key}`), member);
  }

  async setIfAbsent(key: string, value: unknown, ttlMs: number): Promise<boolean> {
    const ok = await this.redis.set(this.k(key), JSON.stringify(value), 'PX', ttlMs, 'NX');
    return ok === 'OK';
  }

  async acquireLease(key: string, holder: string, ttlMs: number): Promise<Lease | undefined> {
    const res = (await this.redis.eval(
      ACQUIRE_LEASE,
      2,
      this.k(`lease:${key}`),
      this.k(`fence:${key}`),
      holder,
      String(ttlMs),
    )) as [number, number] | null;
    if (!res) return undefined;
    return { holder, token: Number(res[0]), expiresAtMs: Number(res[1]) };
  }

  async renewLease(key: string, holder: string, token: number, ttlMs: number): Promise<boolean> {
    const ok = await this.redis.eval(
      RENEW_LEASE,
      1,
      this.k(`lease:${key}`),
      holder,
      String(token),
      String(ttlMs),
    );
    return ok === 1;
  }

  async releaseLease(key: string, holder: string, token: number): Promise<boolean> {
    const ok = await this.redis.eval(RELEASE_LEASE, 1, this.k(`lease:${key}`), holder, String(token));
    return ok === 1;
  }

  async getLease(key: string): Promise<Lease | undefined> {
    const [holder, token, expiresAt] = await this.redis.hmget(
      this.k(`lease:${key}`),
      'holder',
      'token',
      'expiresAt',
    );
    if (holder == null || token == null || expiresAt == null) return undefined;
    return { holder, token: Number(token), expiresAtMs: Number(expiresAt) };
  }

  async acquireLeaseInTurn(
    key: string,
    holder: string,
    ttlMs: number,
    waiterTtlMs: number,
  ): Promise<LeaseTurn> {
    const res = (await this.redis.eval(
      ACQUIRE_IN_TURN,
      3,
      this.k(`lease:${key}`),
      this.k(`fence:${key}`),
      this.k(`waiters:${key}`),
      holder,
      String(ttlMs),
      String(waiterTtlMs),
      `${RESERVED_HOLDER_PREFIX}${holder}`,
    )) as [number, number | string, string?, string?];
    if (Number(res[0]) === 1) {
      return { acquired: true, lease: { holder, token: Number(res[1]), expiresAtMs: Number(res[2]) } };
    }
    return {
      acquired: false,
      position: Number(res[1]),
      holder: String(res[2]),
      expiresAtMs: Number(res[3]),
    };
  }

  async releaseLeaseToNext(
    key: string,
    holder: string,
    token: number,
    reserveMs: number,
  ): Promise<{ released: boolean; next?: string }> {
    const res = (await this.redis.eval(
      RELEASE_TO_NEXT,
      2,
      this.k(`lease:${key}`),
      this.k(`waiters:${key}`),
      holder,
      String(token),
      String(reserveMs),
      RESERVED_HOLDER_PREFIX,
    )) as [number, string?];
    if (Number(res[0]) !== 1) return { released: false };
    return res[1] ? { released: true, next: res[1] } : { released: true };
  }

  async ready(options: { waitMs?: number } = {}): Promise<void> {
    const status = this.redis.status;
    if (status === 'ready') return;
    const waitMs = options.waitMs ?? 0;
    const lost = status === 'reconnecting' || status === 'close';
    if (status === 'end' || (lost && waitMs <= 0)) {
      throw new StateStoreUnavailableError(`Redis connection is ${status}`);
    }
    await new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onReady = () => {
        cleanup();
        resolve();
      };
      // Waiting out a reconnect: its failed attempts are expected; only the deadline gives up.
      const onError = (error: Error) => {
        if (lost) return;
        cleanup();
        reject(new StateStoreUnavailableError(error.message));
      };
      const onEnd = () => {
        cleanup();
        reject(new StateStoreUnavailableError('Redis connection is end'));
      };
      const cleanup = () => {
        if (timer) clearTimeout(timer);
        this.redis.off('ready', onReady);
        this.redis.off('error', onError);
        this.redis.off('end', onEnd);
      };
      if (lost)
        timer = setTimeout(() => {
          cleanup();
          reject(new StateStoreUnavailableError(`Redis connection is ${status} (waited ${waitMs} ms)`));
        }, waitMs);
      this.redis.once('ready', onReady);
      this.redis.on('error', onError);
      this.redis.once('end', onEnd);
    });
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    if (this.ownership.borrowed) return;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
