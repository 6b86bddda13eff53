// One worker process of the staged-commit SIGKILL tests (jobs/extract-staged-kill.test.ts). It runs the production
// extract handler from the built dist (plain node: a process starts in about half the CPU time of tsx on the
// sources, and these tests start one per kill) for each attempt its parent sends, reports every step of a staged
// commit as it completes (`onCommitStep`) and waits for the parent's word — go on, or die right there: SIGKILL
// to itself, so no finally block runs, no lease is released, nothing is cleaned up.
//
// The job runner is this loop, not BullMQ: an attempt is the handler called with the job's id and attempt
// number, and a retry is the same job sent to another (fresh) process — what BullMQ hands a stalled job's next
// worker. BullMQ's own stalled-job recovery with the built worker is apps/workers' extract-staged-crash test.
//
// Messages from the parent: { t: 'run', run, jobId, attempt, payload, env } | { t: 'go', run } | { t: 'die' }.
// To the parent: { t: 'ready' } | { t: 'step', run, step, rel? } | { t: 'result', run, result }
//   | { t: 'error', run, deferred, retryable, message }.
import { createModelClient } from '@engram/agent-runtime/model/client';
import { openQueueEngine } from '@engram/queue/engine';
import { loadWorkersConfig } from '@engram/worker-service/config';
import { createExtractHandler } from '@engram/worker-service/jobs/extract';
import { createLogger } from '@engram/worker-service/logger';
import { createWorkerMetrics } from '@engram/worker-service/metrics';

const DEFERRED = Symbol('deferred');

function send(message) {
  return new Promise((resolve) => process.send(message, () => resolve()));
}

const base = loadWorkersConfig(process.env);
const engine = await openQueueEngine({ config: base.backend, profile: 'worker', namespace: base.namespace });
const client = createModelClient({ apiKey: 'test', baseURL: base.anthropic.baseURL, maxRetries: 0 });
const metrics = createWorkerMetrics();
const logger = createLogger(process.env.LOG_LEVEL ?? 'silent');
/** run → resumes the attempt parked at its current step. */
const resume = new Map();

async function run(message) {
  const handler = createExtractHandler({
    config: loadWorkersConfig({ ...process.env, ...message.env }),
    engine,
    metrics,
    logger,
    client,
    onCommitStep: async (step, rel) => {
      const go = new Promise((resolve) => resume.set(message.run, resolve));
      await send({ t: 'step', run: message.run, step, ...(rel ? { rel } : {}) });
      await go;
    },
  });
  const ctx = {
    job: { id: message.jobId },
    signal: new AbortController().signal,
    attempt: message.attempt,
    progress: async () => {},
    defer: async () => Object.assign(new Error('deferred'), { [DEFERRED]: true }),
  };
  try {
    const result = await handler(message.payload, ctx);
    await send({ t: 'result', run: message.run, result });
  } catch (error) {
    await send({
      t: 'error',
      run: message.run,
      deferred: error?.[DEFERRED] === true,
      retryable: error?.retryable !== false,
      message: String(error?.message ?? error),
    });
  }
}

process.on('message', (message) => {
  if (message.t === 'die') process.kill(process.pid, 'SIGKILL');
  else if (message.t === 'go') {
    resume.get(message.run)?.();
    resume.delete(message.run);
  } else if (message.t === 'run') void run(message);
});
// The parent closing the channel ends this process (the test is over).
process.on('disconnect', () => process.exit(0));
await send({ t: 'ready' });
