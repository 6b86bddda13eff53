import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { waitUntil } from '@engram/testkit/wait';
import type { Job } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_BACKENDS, testEngines } from './backends.test-helpers.js';
import { createQueueEngine, type QueueEngine } from './engine.js';
import type { ExtractPayload } from './jobs/extract.js';
import { EnqueueError, JobProducer } from './producer.js';
import { SessionState } from './state/session-state.js';
import { createJobWorker, PermanentJobError } from './worker.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

function extractPayload(seq: number, sessionId = 'sess-1'): ExtractPayload {
  return {
    sessionId,
    projectDir: '-repo',
    transcriptDir: '-repo',
    leafUuid: `leaf-${seq}`,
    leafSeq: seq,
    requestedAt: new Date().toISOString(),
  };
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

function producerFor(engine: QueueEngine) {
  const producer = new JobProducer(engine, {
    config: { extract: { backoff: { type: 'exponential', delayMs: 10, jitter: 0 } } },
  });
  closer.add(producer);
  return producer;
}

// Every suite runs on both engines: Redis (production) and BullMQ's PostgreSQL backend (zero-install mode).
describe.each(TEST_BACKENDS)('%s backend', (_kind, backend) => {
  const engines = (namespace?: string) => testEngines(backend, closer, namespace);

  describe('typed enqueue and the base worker', () => {
    it('delivers a validated, typed payload to the handler and records the result', async () => {
      const { producer, worker } = await engines();
      const seen: ExtractPayload[] = [];
      const results: unknown[] = [];
      closer.add(
        createJobWorker(
          worker,
          'extract',
          async (payload) => {
            seen.push(payload);
            return {
              outcome: 'skipped-no-new-messages',
              sessionId: payload.sessionId,
              fromSeq: 0,
              toSeq: payload.leafSeq,
              memories: [],
              turns: 0,
              usage: {
                inputTokens: 0,
                outputTokens: 0,
                cacheReadInputTokens: 0,
                cacheCreationInputTokens: 0,
              },
              deniedToolCalls: 0,
            };
          },
          { onCompleted: ({ result }) => results.push(result) },
        ),
      );
      const receipt = await producerFor(producer).enqueue('extract', extractPayload(3));
      expect(receipt).toMatchObject({ kind: 'extract', queue: 'memory-extract' });
      await waitUntil(() => results.length === 1, 'completion');
      expect(seen[0]).toMatchObject({ sessionId: 'sess-1', leafSeq: 3 });
    });

    it('refuses an invalid payload at enqueue with the zod reason', async () => {
      const { producer } = await engines();
      const bad = { ...extractPayload(1), sessionId: '../../etc' };
      const error = await producerFor(producer)
        .enqueue('extract', bad)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EnqueueError);
      expect((error as EnqueueError).code).toBe('INVALID_PAYLOAD');
      expect((error as Error).message).toContain('sessionId');
    });

    it('fails an invalid payload that reached the queue once, without retrying, with the reason on the job', async () => {
      const { producer, worker } = await engines();
      const failures: Array<{ job: Job | undefined; final: boolean }> = [];
      let calls = 0;
      closer.add(
        createJobWorker(
          worker,
          'extract',
          async () => {
            calls++;
            throw new Error('handler must not run');
          },
          { onFailed: ({ job, final }) => failures.push({ job, final }) },
        ),
      );
      // Bypass the producer's validation, as a buggy or hostile client would.
      const queue = closer.add(new JobProducer(producer)).queue('extract');
      const job = await queue.add('extract', { sessionId: 'x/../../y', leafSeq: -1 }, { attempts: 5 });
      await waitUntil(() => failures.length === 1, 'failure');
      const stored = await queue.getJob(String(job.id));
      expect(calls).toBe(0);
      expect(failures[0]?.final).toBe(true);
      expect(stored?.attemptsMade).toBe(1);
      expect(stored?.failedReason).toContain('Invalid extract payload');
      expect(stored?.failedReason).toContain('sessionId');
      expect(await stored?.getState()).toBe('failed');
    });

    it('does not retry a handler error marked permanent, but retries a transient one', async () => {
      const { producer, worker } = await engines();
      let attempts = 0;
      const finals: boolean[] = [];
      closer.add(
        createJobWorker(
          worker,
          'extract',
          async (payload) => {
            attempts++;
            if (payload.leafSeq === 1)
              throw new PermanentJobError('BAD_TRANSCRIPT', 'transcript is unreadable');
            throw new Error('transient');
          },
          { onFailed: ({ final }) => finals.push(final) },
        ),
      );
      const p = producerFor(producer);
      await p.enqueue('extract', extractPayload(1, 'perm'));
      await waitUntil(() => finals.length === 1, 'permanent failure');
      expect(attempts).toBe(1);
      await p.enqueue('extract', extractPayload(2, 'transient'));
      await waitUntil(() => finals.includes(true) && finals.length === 6, 'five transient attempts', {
        timeoutMs: 20_000,
      });
      expect(attempts).toBe(6);
      expect(finals).toEqual([true, false, false, false, false, true]);
    });

    it('coalesces per session: three turns during an active job give exactly one more run with the newest payload', async () => {
      const { producer, worker } = await engines();
      const runs: number[] = [];
      const gate = deferred();
      const started = deferred();
      closer.add(
        createJobWorker(worker, 'extract', async (payload) => {
          runs.push(payload.leafSeq);
          if (runs.length === 1) {
            started.resolve();
            await gate.promise;
          }
          return {
            outcome: 'extracted',
            sessionId: payload.sessionId,
            fromSeq: 0,
            toSeq: payload.leafSeq,
            memories: [],
            turns: 1,
            usage: { inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 },
            deniedToolCalls: 0,
          };
        }),
      );
      const p = producerFor(producer);
      await p.enqueue('extract', extractPayload(1));
      await started.promise;
      await p.enqueue('extract', extractPayload(2));
      await p.enqueue('extract', extractPayload(3));
      await p.enqueue('extract', extractPayload(4));
      gate.resolve();
      await waitUntil(
        async () => (await p.queue('extract').getJobCounts('completed')).completed === 2,
        'two runs',
      );
      await new Promise((r) => setTimeout(r, 200));
      expect(runs).toEqual([1, 4]);
    });

    it('records the newest extraction request even while the first job is still waiting', async () => {
      const { producer } = await engines();
      const p = producerFor(producer);
      await p.enqueue('extract', extractPayload(1));
      await p.enqueue('extract', extractPayload(2));
      await p.enqueue('extract', extractPayload(5));
      const counts = await p.queue('extract').getJobCounts('waiting');
      expect(counts.waiting).toBe(1);
      // Deduplication keeps the *first* payload while the job waits (on both engines); the recorded newest
      // request is how the worker still covers turn 5.
      const [waiting] = await p.queue('extract').getWaiting();
      expect((waiting?.data as ExtractPayload | undefined)?.leafSeq).toBe(1);
      const state = new SessionState(producer.state, { transcriptDir: '-repo', sessionId: 'sess-1' });
      expect(await state.latestExtractRequest()).toEqual({ leafUuid: 'leaf-5', leafSeq: 5 });
    });

    it('recovers a job whose worker died mid-run: another worker runs it once the lock expires', async () => {
      const { producer, worker } = await engines();
      const started = deferred();
      // The "killed" worker: takes the job, never finishes and never renews its lock, as after a SIGKILL.
      const dead = worker.createWorker(
        'memory-extract',
        async () => {
          started.resolve();
          await new Promise(() => {});
        },
        { lockDuration: 300, skipLockRenewal: true, skipStalledCheck: true, concurrency: 1 },
      );
      closer.defer(() => dead.close(true));
      const receipt = await producerFor(producer).enqueue('extract', extractPayload(7));
      await started.promise;
      const rescued: number[] = [];
      closer.add(
        createJobWorker(
          worker,
          'extract',
          async (payload) => {
            rescued.push(payload.leafSeq);
            return {
              outcome: 'extracted',
              sessionId: payload.sessionId,
              fromSeq: 0,
              toSeq: payload.leafSeq,
              memories: [],
              turns: 1,
              usage: {
                inputTokens: 0,
                outputTokens: 0,
                cacheReadInputTokens: 0,
                cacheCreationInputTokens: 0,
              },
              deniedToolCalls: 0,
            };
          },
          { config: { lockDurationMs: 1_000, stalledIntervalMs: 150, maxStalledCount: 2 } },
        ),
      );
      const queue = producerFor(producer).queue('extract');
      await waitUntil(async () => (await queue.getJobState(receipt.jobId)) === 'completed', 'rescue');
      const job = await queue.getJob(receipt.jobId);
      expect(rescued).toEqual([7]);
      expect(job?.stalledCounter).toBe(1);
      expect(job?.attemptsMade).toBe(1);
    });

    it('aborts the handler when the job lock is lost', async () => {
      const { producer, worker, namespace } = await engines(uniquePrefix('lock'));
      let aborted = false;
      const started = deferred();
      closer.add(
        createJobWorker(
          worker,
          'extract',
          async (_payload, ctx) => {
            started.resolve();
            await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
            aborted = ctx.signal.aborted;
            throw new Error('aborted');
          },
          { config: { lockDurationMs: 800, stalledIntervalMs: 60_000 } },
        ),
      );
      const receipt = await producerFor(producer).enqueue('extract', extractPayload(1));
      await started.promise;
      // Another worker "steals" the job: its lock now belongs to someone else. How is engine-specific (Redis:
      // the job's lock key; PostgreSQL: the job row's lock_token); what the worker must do is not.
      await backend.stealJobLock(namespace, 'memory-extract', receipt.jobId, closer);
      await waitUntil(() => aborted, 'abort after lost lock');
      expect(aborted).toBe(true);
    });

    it('fails fast with QUEUE_UNAVAILABLE when the engine is unreachable, instead of hanging the turn', async () => {
      const engine = closer.add(
        createQueueEngine({
          config: backend.unreachableConfig(),
          profile: 'producer',
          namespace: uniquePrefix('down'),
        }),
      );
      const error = await producerFor(engine)
        .enqueue('extract', extractPayload(1))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EnqueueError);
      expect(['QUEUE_UNAVAILABLE', 'ENQUEUE_TIMEOUT']).toContain((error as EnqueueError).code);
    });
  });

  describe('deferring a job', () => {
    it('puts the job back as delayed without spending an attempt, then runs it again', async () => {
      const { producer, worker } = await engines();
      const attempts: number[] = [];
      const done: number[] = [];
      closer.add(
        createJobWorker(
          worker,
          'extract',
          async (payload, ctx) => {
            attempts.push(ctx.attempt);
            if (attempts.length === 1) throw await ctx.defer(100);
            return {
              outcome: 'extracted',
              sessionId: payload.sessionId,
              fromSeq: 0,
              toSeq: payload.leafSeq,
              memories: [],
              turns: 1,
              usage: {
                inputTokens: 0,
                outputTokens: 0,
                cacheReadInputTokens: 0,
                cacheCreationInputTokens: 0,
              },
              deniedToolCalls: 0,
            };
          },
          { onCompleted: () => done.push(1) },
        ),
      );
      await producerFor(producer).enqueue('extract', extractPayload(1));
      await waitUntil(() => done.length === 1, 'completion after defer');
      expect(attempts).toEqual([1, 1]);
    });
  });
});
