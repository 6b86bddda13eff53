import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { redisConnectionOptions } from '../engine.js';
import { type LocalRedis, startLocalRedis } from '../local-redis.js';
import { RedisStateStore, StateStoreUnavailableError } from './redis-state-store.js';

// A Redis that goes away under a running store: every call fails with the one typed, retryable
// STATE_STORE_UNAVAILABLE (what the hosted API answers 503 for), never with ioredis's raw outage message
// ("Stream isn't writeable and enableOfflineQueue options is false", which used to reach clients as a 500).
// A reply from Redis itself (WRONGTYPE) is not an outage and keeps its own error.

let dir: string;
let redis: LocalRedis;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'engram-redis-outage-'));
  redis = await startLocalRedis({ dir });
});
afterAll(async () => {
  await redis?.stop().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

it('maps a lost connection to StateStoreUnavailableError on every kind of call, and keeps Redis replies as they are', async () => {
  const store = new RedisStateStore(redis.url, 'outage', redisConnectionOptions('producer'));
  try {
    await store.ready();
    await store.setJson('plain', { a: 1 });
    expect(await store.getJson('plain')).toEqual({ a: 1 });
    // WRONGTYPE from Redis: a versioned record is a hash, setJson's value a string.
    expect(await store.setIfNewer('versioned', 1, { v: 1 })).toBe(true);
    const wrongType = await store.getJson('versioned').then(
      () => undefined,
      (e: Error) => e,
    );
    expect(wrongType).toBeInstanceOf(Error);
    expect(wrongType).not.toBeInstanceOf(StateStoreUnavailableError);

    await redis.stop();
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['getJson', () => store.getJson('plain')],
      ['setJson', () => store.setJson('plain', { a: 2 })],
      ['addCounters', () => store.addCounters('c', { n: 1 })],
      ['acquireLease', () => store.acquireLease('l', 'me', 10_000)],
      ['renewLease', () => store.renewLease('l', 'me', 1, 10_000)],
      ['setIfNewer', () => store.setIfNewer('s', 1, { v: 1 })],
    ];
    for (const [name, call] of calls) {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, name).toBeInstanceOf(StateStoreUnavailableError);
      expect((error as StateStoreUnavailableError).code, name).toBe('STATE_STORE_UNAVAILABLE');
      expect((error as StateStoreUnavailableError).retryable, name).toBe(true);
    }

    await redis.start();
    // Back (an empty server: this one keeps no data across restarts): the same store works again once ioredis
    // has reconnected.
    const deadline = Date.now() + 20_000;
    let value: unknown = 'down';
    while (Date.now() < deadline && value === 'down') {
      value = await store
        .setJson('plain', { a: 3 })
        .then(() => store.getJson('plain'))
        .catch(() => 'down');
      if (value === 'down') await new Promise((r) => setTimeout(r, 200));
    }
    expect(value).toEqual({ a: 3 });
  } finally {
    await store.close().catch(() => {});
  }
});

it('ready({ waitMs }) waits out the reconnect of a Redis that comes back; without it, or past it, rejects', async () => {
  const store = new RedisStateStore(redis.url, 'outage-wait', redisConnectionOptions('producer'));
  try {
    await store.ready();
    await redis.stop();
    // Let the producer connection notice and back off a few times (its delays grow to 2 s).
    await new Promise((r) => setTimeout(r, 2_500));
    await expect(store.ready()).rejects.toBeInstanceOf(StateStoreUnavailableError);
    // Still down for the whole wait: the one typed error, after the wait.
    const started = Date.now();
    await expect(store.ready({ waitMs: 300 })).rejects.toBeInstanceOf(StateStoreUnavailableError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);

    // Back while a caller waits: it resolves once ioredis has reconnected, and the store works.
    const waiting = store.ready({ waitMs: 10_000 });
    await redis.start();
    await waiting;
    await store.setJson('after', { ok: true });
    expect(await store.getJson('after')).toEqual({ ok: true });
  } finally {
    await store.close().catch(() => {});
  }
}, 30_000);
