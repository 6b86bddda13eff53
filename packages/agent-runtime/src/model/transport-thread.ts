import { parentPort, workerData } from 'node:worker_threads';
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
//   in:  { op: 'call', id, method: 'stream' | 'create', body, deltas }   { op: 'abort', id }
//   out: { id, delta: [index, text] }   { id, message }   { id, error: SdkErrorData }

export type ThreadRequest =
  | { op: 'call'; id: number; method: 'stream' | 'create'; body: MessageBody; deltas: boolean }
  | { op: 'abort'; id: number };

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

const transport = inlineTransport(createSdk(workerData as SdkOptions));
const inFlight = new Map<number, AbortController>();

port.on('message', (m: ThreadRequest) => {
  if (m.op === 'abort') {
    inFlight.get(m.id)?.abort();
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
  const call = m.method === 'stream' ? transport.stream(m.body, opts) : transport.create(m.body, opts);
  call
    .then(
      (message) => post({ id: m.id, message }),
      (error: unknown) => post({ id: m.id, error: describeSdkError(error) }),
    )
    .finally(() => inFlight.delete(m.id));
});
