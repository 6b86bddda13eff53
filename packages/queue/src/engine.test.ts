import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { dropPostgresNamespace, TEST_BACKENDS, testEngines } from './backends.test-helpers.js';
import { createQueueEngine, DEFAULT_NAMESPACE, prepareBackend, QueueBackendPrepareError } from './engine.js';
import { postgresSchemaFor } from './postgres-backend.js';
import { EnqueueError, JobProducer } from './producer.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

describe('postgresSchemaFor', () => {
  it('keeps the default namespace as the schema name and folds others to a safe identifier', () => {
    expect(postgresSchemaFor(DEFAULT_NAMESPACE)).toBe('engram');
    expect(postgresSchemaFor('engram-test-q-1A2b')).toBe('engram_test_q_1a2b');
    expect(postgresSchemaFor('9lives')).toBe('n9lives');
    expect(postgresSchemaFor('a"; DROP SCHEMA public; --')).toMatch(/^[a-z_][a-z0-9_]*$/);
  });

  it('keeps long namespaces within 63 characters and distinct', () => {
    const a = postgresSchemaFor(`${'x'.repeat(80)}-a`);
    const b = postgresSchemaFor(`${'x'.repeat(80)}-b`);
    expect(a.length).toBeLessThanOrEqual(63);
    expect(a).not.toBe(b);
  });
});

describe('PostgreSQL migrations', () => {
  const backend = TEST_BACKENDS.find(([kind]) => kind === 'postgres')![1];

  async function schemaExists(schema: string): Promise<boolean> {
    const client = new pg.Client({ connectionString: inject('postgresUrl') });
    await client.connect();
    try {
      const { rows } = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
      return rows.length === 1;
    } finally {
      await client.end();
    }
  }

  it('never migrate implicitly: an engine on an unprepared schema refuses to enqueue and creates nothing', async () => {
    const namespace = uniquePrefix('unprepared');
    const engine = closer.add(
      createQueueEngine({ config: backend.config(), profile: 'producer', namespace }),
    );
    const producer = closer.add(new JobProducer(engine));
    const error = await producer
      .enqueue('recall', {
        sessionId: 's',
        projectDir: '-p',
        transcriptDir: '-p',
        query: 'what did we decide',
        alreadySurfaced: [],
        alreadyRead: [],
        recentTools: [],
        requestedAt: new Date().toISOString(),
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnqueueError);
    expect((error as Error).message).toContain('prepareBackend');
    expect(await schemaExists(postgresSchemaFor(namespace))).toBe(false);
  });

  it('migrates once when many processes start together, and again is a no-op', async () => {
    const namespace = uniquePrefix('race');
    await backend.prepare(namespace, closer);
    const again = await Promise.all([1, 2, 3].map(() => prepareBackend(backend.config(), namespace)));
    expect(new Set(again.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(again[0]).toMatchObject({ kind: 'postgres', schema: postgresSchemaFor(namespace) });
    const fresh = uniquePrefix('race');
    closer.defer(() => dropPostgresNamespace(fresh));
    const concurrent = await Promise.all([1, 2, 3].map(() => prepareBackend(backend.config(), fresh)));
    expect(new Set(concurrent.map((r) => JSON.stringify(r))).size).toBe(1);
  });

  it('names the server and the fix when it cannot migrate', async () => {
    const error = await prepareBackend(backend.unreachableConfig(), uniquePrefix('down')).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(QueueBackendPrepareError);
    expect((error as Error).message).toContain('127.0.0.1:1');
    expect((error as Error).message).not.toContain('secret');
    expect((error as Error).message).toContain('ENGRAM_QUEUE_URL');
  });
});

describe('BullMQ 6.7 PostgreSQL QueueEvents', () => {
  const backend = TEST_BACKENDS.find(([kind]) => kind === 'postgres')![1];

  // Known limitation, pinned so an upgrade that fixes it is noticed: QueueEvents pages events by
  // `id > cursor`, but ids come from a sequence at insert time, so an event whose transaction commits after a
  // later-numbered one is skipped for good. Callers that must not miss a completion (the agent's recall check)
  // poll the job's state instead of relying on QueueEvents alone.
  it('can miss an event committed out of id order', async () => {
    const { producer, namespace } = await testEngines(backend, closer);
    const events = closer.add(producer.createQueueEvents('ordering'));
    const seen: string[] = [];
    events.on('completed', ({ jobId }) => seen.push(jobId));
    await events.waitUntilReady();
    await new Promise((r) => setTimeout(r, 200));
    const schema = `"${postgresSchemaFor(namespace)}"`;
    const clients = [0, 1, 2].map(() => new pg.Client({ connectionString: inject('postgresUrl') }));
    await Promise.all(clients.map((c) => c.connect()));
    closer.defer(() => Promise.all(clients.map((c) => c.end())));
    const [slow, fast, blocker] = clients as [pg.Client, pg.Client, pg.Client];
    const publish = (c: pg.Client, jobId: string) =>
      c.query(`SELECT ${schema}.publish_event('ordering', 'completed', $1::jsonb)`, [
        JSON.stringify({ jobId, returnvalue: '"ok"' }),
      ]);
    const waitSeen = async (jobId: string) => {
      const deadline = Date.now() + 10_000;
      while (!seen.includes(jobId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    };
    // Two workers finish jobs at once: the slower transaction drew the lower event id. (The blocker only
    // keeps the slow one from also taking the per-queue NOTIFY lock, as a concurrent committer would.)
    await blocker.query('BEGIN');
    await blocker.query(`SELECT pg_advisory_xact_lock(hashtext('bullmq:evnotify:ordering'))`);
    await slow.query('BEGIN');
    await publish(slow, 'first-numbered');
    await blocker.query('COMMIT');
    await publish(fast, 'second-numbered');
    await waitSeen('second-numbered');
    await slow.query('COMMIT');
    await publish(fast, 'third-numbered');
    await waitSeen('third-numbered');
    expect(seen).toEqual(['second-numbered', 'third-numbered']);
  });
});

// BullMQ features Engram relies on beyond the worker suite, checked on both engines.
describe.each(TEST_BACKENDS)('%s engine parity', (_kind, backend) => {
  it('reports progress and completion to QueueEvents listeners (how a caller awaits a recall)', async () => {
    const { producer, worker } = await testEngines(backend, closer);
    const events = closer.add(producer.createQueueEvents('parity'));
    const progress: unknown[] = [];
    events.on('progress', ({ data }) => progress.push(data));
    await events.waitUntilReady();
    closer.add(
      worker.createWorker('parity', async (job) => {
        await job.updateProgress({ phase: 'orient' });
        return { echoed: job.data };
      }),
    );
    const queue = closer.add(producer.createQueue('parity'));
    const job = await queue.add('parity', { n: 1 });
    expect(await job.waitUntilFinished(events, 10_000)).toEqual({ echoed: { n: 1 } });
    expect(progress).toEqual([{ phase: 'orient' }]);
  });

  it('keeps at most the configured number of completed jobs', async () => {
    const { producer, worker } = await testEngines(backend, closer);
    const queue = closer.add(producer.createQueue('retention'));
    let done = 0;
    const w = closer.add(worker.createWorker('retention', async () => 'ok'));
    w.on('completed', () => done++);
    for (let i = 0; i < 5; i++) await queue.add('retention', { i }, { removeOnComplete: { count: 2 } });
    const deadline = Date.now() + 10_000;
    while (done < 5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(done).toBe(5);
    expect((await queue.getJobCounts('completed')).completed).toBe(2);
  });
});
