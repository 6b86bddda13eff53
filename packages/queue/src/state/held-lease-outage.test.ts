import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { Redis } from 'ioredis';
import { afterEach, expect, inject, it } from 'vitest';
import { redisConnectionOptions } from '../engine.js';
import { RedisStateStore, StateStoreUnavailableError } from './redis-state-store.js';
import { acquireSessionLease, sessionLeaseKey } from './session-lease.js';

// A Redis that keeps its data but cannot be reached for a while (a network blip, a failover): a release that
// fails then is retried when the engine is back, so the session's next turn need not wait out the TTL.

/** A TCP proxy to Redis that can cut every connection and refuse new ones, then let them through again. */
async function cuttableProxy(
  target: URL,
): Promise<{ url: string; cut(): void; heal(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let down = false;
  const server: Server = createServer((client) => {
    if (down) return client.destroy();
    const upstream = createConnection({ host: target.hostname, port: Number(target.port) });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `redis://127.0.0.1:${port}${target.pathname}`,
    // Down: nothing listens on the port (connections are refused, as with a stopped server) and every open
    // connection is cut.
    cut: () => {
      down = true;
      server.close();
      for (const s of sockets) s.destroy();
    },
    heal: () => {
      down = false;
      server.listen(port, '127.0.0.1');
    },
    close: () => new Promise((r) => server.close(() => r())),
  };
}

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c().catch(() => {});
});

it('retries a release that failed during an outage, freeing the session as soon as the engine answers', async () => {
  const proxy = await cuttableProxy(new URL(inject('redisUrl')));
  closers.push(() => proxy.close());
  const prefix = uniquePrefix('release-outage');
  const viaProxy = new RedisStateStore(proxy.url, prefix, redisConnectionOptions('producer'));
  const direct = new RedisStateStore(inject('redisUrl'), prefix, redisConnectionOptions('producer'));
  closers.push(
    () => viaProxy.close(),
    () => direct.close(),
  );
  await Promise.all([viaProxy.ready(), direct.ready()]);
  const scope = { tenant: 'acme', sessionId: 'outage' };
  const ttlMs = 30_000;

  const lease = await acquireSessionLease(viaProxy, scope, { ttlMs });
  proxy.cut();
  // The release cannot reach the engine: it does not hold the turn up, and the lease is still held.
  const failed = await viaProxy.getJson('probe').catch((e) => e);
  expect(failed).toBeInstanceOf(StateStoreUnavailableError);
  await lease.release();
  expect((await direct.getLease(sessionLeaseKey(scope)))?.token).toBe(lease.lease.token);

  proxy.heal();
  // Back: the retried release frees the session long before the 30 s TTL would have.
  const healedAt = Date.now();
  while ((await direct.getLease(sessionLeaseKey(scope))) && Date.now() - healedAt < 10_000) {
    await new Promise((r) => setTimeout(r, 50));
  }
  expect(await direct.getLease(sessionLeaseKey(scope))).toBeUndefined();
  expect(Date.now() - healedAt).toBeLessThan(ttlMs / 3);
  // Positive control: the next turn takes the session at once, with a newer fencing token.
  const next = await acquireSessionLease(direct, scope, { ttlMs });
  expect(next.lease.token).toBeGreaterThan(lease.lease.token);
  await next.release();
});

it('leaves no key without a TTL once a session lease was taken, renewed and released', async () => {
  const prefix = uniquePrefix('lease-keys');
  const store = new RedisStateStore(inject('redisUrl'), prefix, redisConnectionOptions('producer'));
  closers.push(() => store.close());
  await store.ready();
  const scope = { tenant: 'acme', sessionId: 'bounded' };
  const first = await acquireSessionLease(store, scope, { ttlMs: 300 });
  await new Promise((r) => setTimeout(r, 250));
  await first.release();
  // Positive control: the keys exist (the fencing counter outlives the lease, so the next token is newer).
  const second = await acquireSessionLease(store, scope, { ttlMs: 300 });
  expect(second.lease.token).toBe(first.lease.token + 1);
  await second.release();

  const raw = new Redis(inject('redisUrl'));
  closers.push(async () => raw.disconnect());
  const keys = await raw.keys(`*${prefix}*`);
  expect(keys.length).toBeGreaterThan(0);
  const ttls = await Promise.all(keys.map(async (k) => [k, await raw.pttl(k)] as const));
  expect(ttls.filter(([, ttl]) => ttl < 0)).toEqual([]);
});
