import type { Socket } from 'node:net';
import { Closer } from '@engram/testkit/bullmq-helpers';
import { waitUntil } from '@engram/testkit/wait';
import { quoteSchemaName } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { TEST_BACKENDS, testEngines } from './backends.test-helpers.js';
import { createQueueEngine } from './engine.js';
import type { ExtractPayload, ExtractResult } from './jobs/extract.js';
import type { RecallPayload, RecallResult } from './jobs/recall.js';
import { postgresSchemaFor } from './postgres-backend.js';
import { JobProducer } from './producer.js';
import { RedisStateStore } from './state/redis-state-store.js';
import { SessionState } from './state/session-state.js';
import { createJobWorker } from './worker.js';

// Enqueue. The newest-request record must land before its extraction job can be seen: a worker that takes a
// deduplicated waiting job the moment it appears reads the record then, and a record that arrived later would
// leave the newest leaf uncovered. On Redis the record and the add go out on one connection, record first, in
// one round trip; on PostgreSQL the add waits for the record.

const closer = new Closer();
afterEach(() => closer.closeAll());

function payload(seq: number, sessionId = 'sess-1', tenant?: string): ExtractPayload {
  return {
    ...(tenant ? { tenant } : {}),
    sessionId,
    projectDir: '-repo',
    transcriptDir: '-repo',
    leafUuid: `leaf-${seq}`,
    leafSeq: seq,
    requestedAt: new Date().toISOString(),
  };
}

function result(p: ExtractPayload): ExtractResult {
  return {
    outcome: 'extracted',
    sessionId: p.sessionId,
    fromSeq: 0,
    toSeq: p.leafSeq,
    memories: [],
    turns: 1,
    usage: { inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 },
    deniedToolCalls: 0,
  };
}

describe.each(TEST_BACKENDS)('%s backend', (_kind, backend) => {
  it('a worker that takes a job the moment it is added already finds its newest-request record', async () => {
    const { producer, worker } = await testEngines(backend, closer);
    // For each run: the job's own leaf and the newest request the worker read when it started.
    const runs: Array<{ leaf: number; recorded: number }> = [];
    closer.add(
      createJobWorker(worker, 'extract', async (p) => {
        const newest = await new SessionState(worker.state, p).latestExtractRequest();
        runs.push({ leaf: p.leafSeq, recorded: newest?.leafSeq ?? -1 });
        return result(p);
      }),
    );
    const jobs = closer.add(new JobProducer(producer));
    // Distinct sessions (each add a fresh job a waiting worker takes at once) and one session's turns in a row.
    const sessions = Array.from({ length: 12 }, (_, i) => `fresh-${i}`);
    for (const [i, session] of sessions.entries()) await jobs.enqueue('extract', payload(i + 1, session));
    for (let seq = 1; seq <= 12; seq++) await jobs.enqueue('extract', payload(seq, 'same', 'tenant-a'));
    await waitUntil(
      async () =>
        (await jobs.queue('extract').getJobCounts('wait', 'active', 'delayed')).wait === 0 &&
        runs.length >= sessions.length + 1,
      'every job run',
    );
    await waitUntil(async () => {
      const c = await jobs.queue('extract').getJobCounts('wait', 'active', 'delayed');
      return (c.wait ?? 0) + (c.active ?? 0) + (c.delayed ?? 0) === 0;
    }, 'the queue drained');
    for (const run of runs) expect(run.recorded).toBeGreaterThanOrEqual(run.leaf);
    // The session's last turn is covered by the job that ran last for it (its payload or its record).
    const same = new SessionState(worker.state, {
      tenant: 'tenant-a',
      transcriptDir: '-repo',
      sessionId: 'same',
    });
    expect((await same.latestExtractRequest())?.leafSeq).toBe(12);
    expect(Math.max(...runs.map((r) => Math.max(r.leaf, r.recorded)))).toBe(12);
  });
});

describe('redis backend: one connection', () => {
  const backend = TEST_BACKENDS.find(([kind]) => kind === 'redis')![1];

  it('sends the newest-request record and the add on the same connection, the record first', async () => {
    const { producer, namespace } = await testEngines(backend, closer);
    const jobs = closer.add(new JobProducer(producer));
    // Warm up: connections open, BullMQ's scripts loaded (a first EVALSHA may be answered NOSCRIPT).
    await jobs.enqueue('extract', payload(1, 'warm'));
    const monitor = await new Redis(inject('redisUrl')).monitor();
    closer.defer(async () => monitor.disconnect());
    const seen: Array<{ command: string; source: string; args: string[] }> = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      // Commands a script runs are listed too, with the source "lua": only what clients sent counts here.
      if (source.includes('lua') || !args.some((a) => a.startsWith(`${namespace}:`))) return;
      const command = args[0]!.toLowerCase();
      if (args.some((a) => a.endsWith(':extract-requested'))) seen.push({ command: 'record', source, args });
      else if (command === 'evalsha' || command === 'eval') seen.push({ command: 'add', source, args });
    });
    // A waiting job of the session: the later turns are deduplicated into it, so only the record carries them.
    await jobs.enqueue('extract', payload(2));
    await jobs.enqueue('extract', payload(3));
    await jobs.enqueue('extract', payload(4, 'sess-2', 'tenant-a'));
    await waitUntil(async () => seen.length >= 6, 'six commands seen by MONITOR');
    expect(seen.map((s) => s.command)).toEqual(['record', 'add', 'record', 'add', 'record', 'add']);
    for (let i = 0; i < seen.length; i += 2) expect(seen[i]!.source).toBe(seen[i + 1]!.source);
    expect(await jobs.queue('extract').getJobCounts('wait')).toEqual({ wait: 3 });
    const state = new SessionState(producer.state, { transcriptDir: '-repo', sessionId: 'sess-1' });
    expect(await state.latestExtractRequest()).toEqual({ leafUuid: 'leaf-3', leafSeq: 3 });
  });
});

describe('redis backend: one write', () => {
  const backend = TEST_BACKENDS.find(([kind]) => kind === 'redis')![1];

  /** Counts the writes the socket hands to the kernel while `run` runs (a corked batch is one `_writev`). */
  async function socketWrites(socket: Socket, run: () => Promise<unknown>): Promise<number> {
    const writable = socket as unknown as Record<'_write' | '_writev', (...args: unknown[]) => unknown>;
    const original = { _write: writable._write, _writev: writable._writev };
    let writes = 0;
    for (const name of ['_write', '_writev'] as const) {
      writable[name] = function (this: unknown, ...args: unknown[]) {
        writes++;
        return original[name].apply(this, args);
      };
    }
    try {
      await run();
    } finally {
      Object.assign(writable, original);
    }
    return writes;
  }

  it('sends the newest-request record and the add in one write', async () => {
    const { producer } = await testEngines(backend, closer);
    const jobs = closer.add(new JobProducer(producer));
    await jobs.enqueue('extract', payload(1, 'warm'));
    const queue = jobs.queue('extract');
    const client = (await queue.backend.client) as unknown as Redis;
    // Positive control: the same record and add issued through a store that does not hold its writes leave in
    // two writes, so the count below can tell one from two.
    const plain = new RedisStateStore(client, 'control', {}, { borrowed: true });
    const unheld = await socketWrites(client.stream, () =>
      Promise.all([
        plain.setIfNewer('control:extract-requested', 1, { leafSeq: 1 }),
        queue.add('extract', payload(2, 'control')),
      ]),
    );
    expect(unheld).toBe(2);
    expect(await socketWrites(client.stream, () => jobs.enqueue('extract', payload(2, 'one-write')))).toBe(1);
    const state = new SessionState(producer.state, { transcriptDir: '-repo', sessionId: 'one-write' });
    expect(await state.latestExtractRequest()).toEqual({ leafUuid: 'leaf-2', leafSeq: 2 });
  });

  it('still sends what it holds when no add follows', async () => {
    const { producer } = await testEngines(backend, closer);
    const jobs = closer.add(new JobProducer(producer));
    await jobs.enqueue('extract', payload(1, 'warm'));
    const ordered = producer.orderedState(jobs.queue('extract'))!;
    const state = new SessionState(ordered, { transcriptDir: '-repo', sessionId: 'alone' });
    await state.noteExtractRequested({ leafUuid: 'leaf-7', leafSeq: 7 });
    const seen = new SessionState(producer.state, { transcriptDir: '-repo', sessionId: 'alone' });
    expect(await seen.latestExtractRequest()).toEqual({ leafUuid: 'leaf-7', leafSeq: 7 });
  });
});

describe('postgres backend: the add waits for the record', () => {
  const backend = TEST_BACKENDS.find(([kind]) => kind === 'postgres')![1];

  it('adds no job while the newest-request record cannot be written yet', async () => {
    const { producer, namespace } = await testEngines(backend, closer);
    const jobs = closer.add(new JobProducer(producer));
    const state = new SessionState(producer.state, { transcriptDir: '-repo', sessionId: 'locked' });
    await state.noteExtractRequested({ leafUuid: 'leaf-0', leafSeq: 0 });
    // Another transaction holds the record's row: the producer's write of it waits.
    const blocker = new pg.Client({ connectionString: inject('postgresUrl') });
    await blocker.connect();
    closer.defer(() => blocker.end());
    await blocker.query('BEGIN');
    const table = `${quoteSchemaName(postgresSchemaFor(namespace))}.engram_state`;
    const { rowCount } = await blocker.query(`SELECT 1 FROM ${table} WHERE key = $1 FOR UPDATE`, [
      'session:-repo:locked:extract-requested',
    ]);
    expect(rowCount).toBe(1);
    const enqueued = jobs.enqueue('extract', payload(1, 'locked'));
    await new Promise((r) => setTimeout(r, 300));
    expect(await jobs.queue('extract').getJobCounts('wait')).toEqual({ wait: 0 });
    await blocker.query('COMMIT');
    await enqueued;
    expect(await jobs.queue('extract').getJobCounts('wait')).toEqual({ wait: 1 });
    expect(await state.latestExtractRequest()).toEqual({ leafUuid: 'leaf-1', leafSeq: 1 });
  });
});

function recallPayload(query = 'what did we decide about deploys'): RecallPayload {
  return {
    sessionId: 'sess-1',
    projectDir: '-repo',
    transcriptDir: '-repo',
    query,
    alreadySurfaced: [],
    alreadyRead: [],
    recentTools: [],
    requestedAt: new Date().toISOString(),
  };
}

function recallResult(query: string): RecallResult {
  return {
    outcome: 'model',
    attachments: [{ path: 'a.md', header: query, content: 'x', truncated: false, mtimeMs: 1 }],
    latencyMs: 1,
  };
}

// Waiting for a job's result (a recall the caller needs now): the completion event answers at once, a look at
// the job's state finds what no event delivers, and the deadline ends the wait.
describe.each(TEST_BACKENDS)('%s backend: waitFor', (_kind, backend) => {
  it('answers with the result of a job that finishes while it waits', async () => {
    const { producer, worker } = await testEngines(backend, closer);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    closer.add(
      createJobWorker(worker, 'recall', async (p) => {
        await gate;
        return recallResult(p.query);
      }),
    );
    const jobs = closer.add(new JobProducer(producer));
    const { jobId } = await jobs.enqueue('recall', recallPayload('first'));
    const waiting = jobs.waitFor('recall', jobId, 20_000);
    release();
    expect(await waiting).toEqual({ finished: true, result: recallResult('first') });
  });

  it('answers for a job that finished before the wait began, and with the reason of a failed one', async () => {
    const { producer, worker } = await testEngines(backend, closer);
    const finished: string[] = [];
    const w = closer.add(
      createJobWorker(worker, 'recall', async (p) => {
        if (p.query === 'fails') throw new Error('selector exploded');
        return recallResult(p.query);
      }),
    );
    w.on('completed', (job) => finished.push(String(job.id)));
    w.on('failed', (job) => finished.push(String(job?.id)));
    const jobs = closer.add(new JobProducer(producer));
    const done = await jobs.enqueue('recall', recallPayload('done early'));
    const failed = await jobs.enqueue('recall', recallPayload('fails'));
    await waitUntil(async () => finished.length === 2, 'both jobs finished');
    expect(await jobs.waitFor('recall', done.jobId, 20_000)).toEqual({
      finished: true,
      result: recallResult('done early'),
    });
    expect(await jobs.waitFor('recall', failed.jobId, 20_000)).toMatchObject({
      finished: true,
      failedReason: expect.stringContaining('selector exploded'),
    });
  });

  it('ends unfinished when the engine cannot be reached, and the producer still closes', async () => {
    const engine = createQueueEngine({ config: backend.unreachableConfig(), profile: 'producer' });
    const jobs = new JobProducer(engine);
    expect(await jobs.waitFor('recall', 'no-such-job', 300)).toEqual({ finished: false });
    // The listener never connected: closing must not wait for it (a hook process has to be able to exit).
    await jobs.close();
    await engine.close();
  });

  it('ends unfinished at its deadline when nothing runs the job', async () => {
    const { producer } = await testEngines(backend, closer);
    const jobs = closer.add(new JobProducer(producer));
    const { jobId } = await jobs.enqueue('recall', recallPayload());
    expect(await jobs.waitFor('recall', jobId, 300)).toEqual({ finished: false });
  });
});

describe('redis backend: waitFor without an event', () => {
  const backend = TEST_BACKENDS.find(([kind]) => kind === 'redis')![1];

  it('finds a job finished without a completion event by looking at its state', async () => {
    const { producer, namespace } = await testEngines(backend, closer);
    const jobs = closer.add(new JobProducer(producer));
    const { jobId } = await jobs.enqueue('recall', recallPayload());
    const waiting = jobs.waitFor('recall', jobId, 20_000);
    await new Promise((r) => setTimeout(r, 150));
    // The job's record says finished, but no event was written (as when an event is lost).
    const redis = new Redis(inject('redisUrl'));
    closer.defer(async () => redis.quit());
    await redis.hset(`${namespace}:memory-recall:${jobId}`, {
      finishedOn: String(Date.now()),
      returnvalue: JSON.stringify(recallResult('no event')),
    });
    expect(await waiting).toEqual({ finished: true, result: recallResult('no event') });
  });
});
