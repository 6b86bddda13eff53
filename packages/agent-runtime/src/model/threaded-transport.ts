import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import Anthropic from '@anthropic-ai/sdk';
import { carryTrace } from '@engram/telemetry/carry';
import { activeTelemetry, SHUTDOWN_FLUSH_MS, within } from '@engram/telemetry/setup';
import {
  type MessageBody,
  type ModelTransport,
  reviveSdkError,
  type SdkErrorData,
  type SdkOptions,
  type TransportCallOptions,
} from './transport.js';
import type { ThreadData, ThreadRequest } from './transport-thread.js';

// Model calls in worker threads (transport-thread.ts). A worker process keeps ~100 LLM-bound jobs in flight;
// in one thread the SDK's per-call work (building the request, undici, web streams, SSE parsing: ~2 ms of
// main-thread CPU per call, BENCHMARKS.md) competes with the jobs themselves and with BullMQ's lock renewals.
// Here the main thread only posts the request body and receives the final message (~0.15 ms per call).
// Threads start on the first call, are picked by fewest calls in flight, hold the process open only while a
// call is in flight, and a thread that dies fails its calls as connection errors (retryable) and is replaced
// on the next call.

export interface ThreadedTransport extends ModelTransport {
  /** Stops the threads; calls in flight fail as connection errors. */
  close(): Promise<void>;
}

interface Pending {
  resolve: (message: Anthropic.Message) => void;
  reject: (error: Error) => void;
  onTextDelta: ((index: number, text: string) => void) | undefined;
}

interface ModelThread {
  worker: Worker;
  pending: Map<number, Pending>;
  dead: boolean;
}

type ThreadReply =
  | { id: number; delta: [number, string] }
  | { id: number; message: Anthropic.Message }
  | { id: number; error: SdkErrorData };

function startWorker(sdkOptions: SdkOptions): Worker {
  const data = threadData(sdkOptions);
  const here = import.meta.url;
  if (here.endsWith('.ts')) {
    // Running from source (tests, `npm run dev`): the thread needs the TypeScript loader the process has.
    const entry = new URL('./transport-thread.ts', here).href;
    // tsx's documented register API, its ESM build (`tsx/esm/api` for `import`; the CommonJS build of the same
    // export sits beside it with the .cjs extension).
    const api = pathToFileURL(
      createRequire(here)
        .resolve('tsx/esm/api')
        .replace(/\.cjs$/, '.mjs'),
    ).href;
    const boot = `import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
    return new Worker(boot, {
      eval: true,
      workerData: data,
    });
  }
  return new Worker(new URL('./transport-thread.js', here), { workerData: data });
}

/** What a model thread needs to trace as this process does: the service name when telemetry is on. */
function threadData(data: SdkOptions): ThreadData {
  const { settings } = activeTelemetry();
  return settings.enabled ? { ...data, telemetryServiceName: settings.serviceName } : data;
}

/**
 * Asks a model thread that traces to export what its telemetry holds (the spans of its last calls), waiting
 * at most SHUTDOWN_FLUSH_MS: a thread is terminated right after, which would drop them.
 */
async function flushThread(worker: Worker): Promise<void> {
  if (!activeTelemetry().settings.enabled) return;
  const id = 0; // no call uses 0: call ids start at 1
  let onMessage: ((reply: { id: number; flushed?: boolean }) => void) | undefined;
  const flushed = new Promise<void>((resolve) => {
    onMessage = (reply) => {
      if (reply.id === id && 'flushed' in reply) resolve();
    };
    worker.on('message', onMessage);
    worker.once('exit', () => resolve());
  });
  try {
    worker.ref();
    worker.postMessage({ op: 'flush', id } satisfies ThreadRequest);
    await within(SHUTDOWN_FLUSH_MS, flushed);
  } catch {
    // A thread that already stopped has nothing left to export.
  } finally {
    if (onMessage) worker.off('message', onMessage);
  }
}

export function threadedTransport(opts: SdkOptions & { threads: number }): ThreadedTransport {
  const { threads: count, ...data } = opts;
  const size = Math.max(1, Math.floor(count));
  const threads: ModelThread[] = [];
  let nextId = 1;
  let closed = false;

  const fail = (thread: ModelThread, why: string) => {
    if (thread.dead) return;
    thread.dead = true;
    const index = threads.indexOf(thread);
    if (index >= 0) threads.splice(index, 1);
    for (const p of thread.pending.values()) {
      p.reject(new Anthropic.APIConnectionError({ message: `the model thread stopped: ${why}` }));
    }
    thread.pending.clear();
  };

  const spawn = (): ModelThread => {
    const worker = startWorker(data);
    worker.unref();
    const thread: ModelThread = { worker, pending: new Map(), dead: false };
    worker.on('message', (reply: ThreadReply) => {
      const p = thread.pending.get(reply.id);
      if (!p) return; // aborted here already
      if ('delta' in reply) {
        try {
          p.onTextDelta?.(reply.delta[0], reply.delta[1]);
        } catch {
          // A listener's failure is its own; the reply still completes.
        }
        return;
      }
      settle(thread, reply.id);
      if ('message' in reply) p.resolve(reply.message);
      else p.reject(reviveSdkError(reply.error));
    });
    worker.on('error', (error) => fail(thread, error.message));
    worker.on('exit', (code) => fail(thread, `exit ${code}`));
    threads.push(thread);
    return thread;
  };

  const settle = (thread: ModelThread, id: number) => {
    thread.pending.delete(id);
    if (thread.pending.size === 0) thread.worker.unref();
  };

  const pick = (): ModelThread => {
    if (threads.length < size) return spawn();
    let best = threads[0] as ModelThread;
    for (const t of threads) if (t.pending.size < best.pending.size) best = t;
    return best;
  };

  const call = (
    method: 'stream' | 'create',
    body: MessageBody,
    callOpts: TransportCallOptions = {},
  ): Promise<Anthropic.Message> =>
    new Promise((resolve, reject) => {
      if (closed) {
        reject(new Anthropic.APIConnectionError({ message: 'the model client is closed' }));
        return;
      }
      const { signal } = callOpts;
      if (signal?.aborted) {
        reject(new Anthropic.APIUserAbortError());
        return;
      }
      const thread = pick();
      const id = nextId++;
      const onAbort = () => {
        if (!thread.pending.has(id)) return;
        settle(thread, id);
        thread.worker.postMessage({ op: 'abort', id } satisfies ThreadRequest);
        reject(new Anthropic.APIUserAbortError());
      };
      const done = () => signal?.removeEventListener('abort', onAbort);
      thread.pending.set(id, {
        resolve: (m) => {
          done();
          resolve(m);
        },
        reject: (e) => {
          done();
          reject(e);
        },
        onTextDelta: callOpts.onTextDelta,
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      if (thread.pending.size === 1) thread.worker.ref();
      try {
        thread.worker.postMessage({
          op: 'call',
          id,
          method,
          body,
          deltas: callOpts.onTextDelta !== undefined,
          // The caller's trace context and job scope, so the SDK's span in the thread joins the job's trace.
          ...carryTrace(),
        } satisfies ThreadRequest);
      } catch (error) {
        settle(thread, id);
        done();
        reject(error as Error);
      }
    });

  return {
    stream: (body, callOpts) => call('stream', body, callOpts),
    create: (body, callOpts) => call('create', body, callOpts),
    async close() {
      closed = true;
      const all = threads.splice(0);
      await Promise.all(
        all.map(async (t) => {
          fail(t, 'closed');
          await flushThread(t.worker);
          await t.worker.terminate();
        }),
      );
    },
  };
}
