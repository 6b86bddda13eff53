import { parentPort, workerData } from 'node:worker_threads';
import { type CarriedTrace, inCarriedTrace } from '@engram/telemetry/carry';
import { startTelemetry, type TelemetryHandle } from '@engram/telemetry/setup';
import {
  createSdk,
  describeSdkError,
  inlineTransport,
  type MessageBody,
  type SdkOptions,
} from './transport.js';

// A model thread (threaded-transport.ts): runs the SDK's requests for the thread that started it, so HTTP,
// SSE parsing and the SDK's own bookkeeping do not compete with that thread's jobs and lock renewals.
// Protocol, one message each way per event:
//   in:  { op: 'call', id, method: 'stream' | 'create', body, deltas, trace?, scope? }   { op: 'abort', id }
//        { op: 'flush', id }   (before the thread is stopped: its telemetry exports what it holds)
//   out: { id, delta: [index, text] }   { id, message }   { id, error: SdkErrorData }   { id, flushed }

export type ThreadRequest =
  | ({
      op: 'call';
      id: number;
      method: 'stream' | 'create';
      body: MessageBody;
      deltas: boolean;
    } & CarriedTrace)
  | { op: 'abort'; id: number }
  | { op: 'flush'; id: number };

/** The thread's start data: the SDK's options, and the service name to trace as when telemetry is on. */
export type ThreadData = SdkOptions & { telemetryServiceName?: string };

const port = parentPort;
if (!port) throw new Error('transport-thread.ts runs as a worker thread only');

/** Posts `out`; a value structured clone refuses goes as its JSON form (what the API sent was JSON anyway). */
function post(out: { id: number; message?: unknown; error?: unknown }): void {
  try {
    port?.postMessage(out);
  } catch {
    port?.postMessage(JSON.parse(JSON.stringify(out)));
  }
}

const data = (workerData ?? {}) as ThreadData;
const { telemetryServiceName, ...sdkOptions } = data;
const transport = inlineTransport(createSdk(sdkOptions));
// The thread's own SDK registration (a worker thread has its own OpenTelemetry globals), from the same
// OTEL_* environment as the process that started it.
const telemetryReady: Promise<TelemetryHandle | undefined> = telemetryServiceName
  ? startTelemetry('workers', { ...process.env, OTEL_SERVICE_NAME: telemetryServiceName })
  : Promise.resolve(undefined);
const inFlight = new Map<number, AbortController>();

port.on('message', (m: ThreadRequest) => {
  if (m.op === 'abort') {
    inFlight.get(m.id)?.abort();
    return;
  }
  if (m.op === 'flush') {
    // The thread's batch processors hold the spans of its last calls until their schedule: export them now
    // (bounded), since terminating the thread would drop them.
    void telemetryReady
      .then((telemetry) => telemetry?.shutdown() ?? true)
      .then((flushed) => port.postMessage({ id: m.id, flushed }));
    return;
  }
  const controller = new AbortController();
  inFlight.set(m.id, controller);
  const opts = {
    signal: controller.signal,
    ...(m.deltas
      ? { onTextDelta: (index: number, text: string) => port.postMessage({ id: m.id, delta: [index, text] }) }
      : {}),
  };
  const run = () => (m.method === 'stream' ? transport.stream(m.body, opts) : transport.create(m.body, opts));
  const traced = () => inCarriedTrace(m, run);
  const call = m.trace ? telemetryReady.then(traced) : run();
  call
    .then(
      (message) => post({ id: m.id, message }),
      (error: unknown) => post({ id: m.id, error: describeSdkError(error) }),
    )
    .finally(() => inFlight.delete(m.id));
});
