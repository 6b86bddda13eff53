import { Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { Closer, uniquePrefix } from './bullmq-helpers.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

describe('provisioned Redis', () => {
  it('adds and processes a BullMQ job on the real Redis', async () => {
    const connection = { url: inject('redisUrl'), maxRetriesPerRequest: null };
    const prefix = uniquePrefix('smoke');
    const queue = closer.add(new Queue('smoke', { connection, prefix }));
    const events = closer.add(new QueueEvents('smoke', { connection, prefix }));
    await events.waitUntilReady();
    const seen: number[] = [];
    closer.add(
      new Worker(
        'smoke',
        async (job) => {
          seen.push(job.data.n);
          return job.data.n * 2;
        },
        { connection, prefix },
      ),
    );
    const job = await queue.add('double', { n: 21 });
    const result = await job.waitUntilFinished(events, 10_000);
    expect(result).toBe(42);
    expect(seen).toEqual([21]);
  });

  it('runs Redis with the noeviction policy BullMQ needs', async () => {
    const redis = new Redis(inject('redisUrl'));
    closer.defer(async () => redis.quit());
    const [, policy] = (await redis.config('GET', 'maxmemory-policy')) as [string, string];
    expect(policy).toBe('noeviction');
  });
});
