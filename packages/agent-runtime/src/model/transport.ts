import Anthropic from '@anthropic-ai/sdk';

// How a Messages API request reaches the SDK: in this thread (`inlineTransport`) or in a model thread
// (`threaded-transport.ts`, for processes that keep a hundred LLM-bound jobs in flight). Either way the SDK is
// the real `@anthropic-ai/sdk`; what crosses a thread is the request body, the final message, text deltas and
// a plain description of an SDK error, which `reviveSdkError` turns back into the SDK's own class so the one
// mapping to ModelError (errors.ts) sees exactly what an in-thread call would have thrown.

export type MessageBody = Anthropic.MessageCreateParamsNonStreaming;

export interface TransportCallOptions {
  signal?: AbortSignal;
  /** `stream` only: each text delta as it arrives (content block index, text). */
  onTextDelta?: (index: number, text: string) => void;
}

export interface ModelTransport {
  /** A streamed request; resolves with the final message. */
  stream(body: MessageBody, opts?: TransportCallOptions): Promise<Anthropic.Message>;
  /** A non-streaming request. */
  create(body: MessageBody, opts?: TransportCallOptions): Promise<Anthropic.Message>;
}

export interface SdkOptions {
  apiKey?: string;
  baseURL?: string;
  /** SDK-level retries for 408/409/429/5xx/connection errors (default 2). Workers use 0–1 and let BullMQ retry. */
  maxRetries?: number;
  timeoutMs?: number;
}

export function createSdk(opts: SdkOptions): Anthropic {
  return new Anthropic({
    ...(opts.apiKey !== undefined ? { apiKey: opts.apiKey } : {}),
    ...(opts.baseURL !== undefined ? { baseURL: opts.baseURL } : {}),
    maxRetries: opts.maxRetries ?? 2,
    ...(opts.timeoutMs !== undefined ? { timeout: opts.timeoutMs } : {}),
  });
}

/** The SDK called in this thread. */
export function inlineTransport(sdk: Anthropic): ModelTransport {
  return {
    async stream(body, opts = {}) {
      const stream = sdk.messages.stream(body, opts.signal ? { signal: opts.signal } : undefined);
      const onTextDelta = opts.onTextDelta;
      if (onTextDelta) {
        stream.on('streamEvent', (event) => {
          if (event.type !== 'content_block_delta' || event.delta.type !== 'text_delta') return;
          try {
            onTextDelta(event.index, event.delta.text);
          } catch {
            // A listener's failure is its own; the reply still completes.
          }
        });
      }
      return stream.finalMessage();
    },
    create(body, opts = {}) {
      return sdk.messages.create(body, opts.signal ? { signal: opts.signal } : undefined);
    },
  };
}

/** An SDK failure as plain data (structured-clone safe). */
export type SdkErrorData =
  | {
      kind: 'api';
      status: number | undefined;
      error: unknown;
      message: string;
      type: string | null;
      headers: Array<[string, string]>;
    }
  | { kind: 'abort'; message: string }
  | { kind: 'connection'; message: string; timeout: boolean }
  | { kind: 'other'; name: string; message: string; code?: string };

export function describeSdkError(e: unknown): SdkErrorData {
  if (e instanceof Anthropic.APIUserAbortError) return { kind: 'abort', message: e.message };
  if (e instanceof Anthropic.APIConnectionError) {
    return {
      kind: 'connection',
      message: e.message,
      timeout: e instanceof Anthropic.APIConnectionTimeoutError,
    };
  }
  if (e instanceof Anthropic.APIError) {
    const headers: Array<[string, string]> = [];
    const h = e.headers as Headers | undefined;
    if (h && typeof h.forEach === 'function') {
      h.forEach((value, key) => {
        headers.push([key, value]);
      });
    }
    let error: unknown;
    try {
      error = structuredClone(e.error);
    } catch {
      error = JSON.parse(JSON.stringify(e.error ?? null));
    }
    return { kind: 'api', status: e.status, error, message: e.message, type: e.type ?? null, headers };
  }
  const err = e instanceof Error ? e : new Error(String(e));
  const code = (err as { code?: unknown }).code;
  return {
    kind: 'other',
    name: err.name,
    message: err.message,
    ...(typeof code === 'string' ? { code } : {}),
  };
}

/** The SDK error `describeSdkError` described, as the SDK's own class (so `toModelError` maps it alike). */
export function reviveSdkError(d: SdkErrorData): Error {
  switch (d.kind) {
    case 'abort':
      return new Anthropic.APIUserAbortError({ message: d.message });
    case 'connection':
      return d.timeout
        ? new Anthropic.APIConnectionTimeoutError({ message: d.message })
        : new Anthropic.APIConnectionError({ message: d.message });
    case 'api': {
      const headers = new Headers(d.headers);
      const error = new Anthropic.APIError(
        d.status,
        d.error as object | undefined,
        d.message,
        headers,
        (d.type ?? undefined) as Anthropic.ErrorType | undefined,
      );
      // The constructor composes its message from status and body; keep the original's wording.
      Object.defineProperty(error, 'message', { value: d.message, writable: true, configurable: true });
      return error;
    }
    default: {
      const error = new Error(d.message) as Error & { code?: string };
      error.name = d.name;
      if (d.code) error.code = d.code;
      return error;
    }
  }
}
