import Anthropic from '@anthropic-ai/sdk';
import { EngramError } from '@engram/errors/engram-error';

// Every failure of a model call becomes one of these, so callers (the query loop, BullMQ job handlers)
// branch on `code` and `retryable` instead of on SDK classes or message wording.

export type ModelErrorCode =
  | 'MODEL_PROMPT_TOO_LONG'
  | 'MODEL_REQUEST_TOO_LARGE'
  | 'MODEL_AUTH'
  | 'MODEL_OVERLOADED'
  | 'MODEL_RATE_LIMITED'
  | 'MODEL_SERVER_ERROR'
  | 'MODEL_CONNECTION'
  | 'MODEL_ABORTED'
  | 'MODEL_BAD_REQUEST'
  | 'MODEL_INVALID_STRUCTURED_OUTPUT'
  | 'MODEL_UNKNOWN';

export class ModelError extends EngramError {
  declare readonly code: ModelErrorCode;
  constructor(
    code: ModelErrorCode,
    message: string,
    retryable: boolean,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(code, message, { retryable, ...options });
  }
}

const PROMPT_TOO_LONG = /prompt is too long:\s*(\d+)\s*tokens?\s*>\s*(\d+)/i;

/** The prompt exceeds the context window; compaction (not a retry) is the cure. */
export class PromptTooLongError extends ModelError {
  override name = 'PromptTooLongError';
  constructor(
    readonly actualTokens: number | undefined,
    readonly maxTokens: number | undefined,
    apiMessage: string,
    options?: { cause?: unknown },
  ) {
    super(
      'MODEL_PROMPT_TOO_LONG',
      `The prompt is too long for the model (${apiMessage}). Compact the conversation or drop older turns, then retry.`,
      false,
      400,
      options,
    );
  }
}

export class RequestTooLargeError extends ModelError {
  override name = 'RequestTooLargeError';
  constructor(apiMessage: string, options?: { cause?: unknown }) {
    super(
      'MODEL_REQUEST_TOO_LARGE',
      `The request body is larger than the API accepts (413: ${apiMessage}). Shrink tool results or attachments.`,
      false,
      413,
      options,
    );
  }
}

export class ModelAuthError extends ModelError {
  override name = 'ModelAuthError';
  constructor(status: number, apiMessage: string, options?: { cause?: unknown }) {
    super(
      'MODEL_AUTH',
      `The model API refused the credentials (${status}: ${apiMessage}). Check ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL.`,
      false,
      status,
      options,
    );
  }
}

/** 529 overloaded; the subclass below covers 429. Both are worth retrying after `retryAfterMs`. */
export class ModelOverloadedError extends ModelError {
  override name = 'ModelOverloadedError';
  constructor(
    status: number | undefined,
    apiMessage: string,
    readonly retryAfterMs?: number,
    options?: { cause?: unknown; code?: 'MODEL_OVERLOADED' | 'MODEL_RATE_LIMITED' },
  ) {
    const code = options?.code ?? 'MODEL_OVERLOADED';
    super(
      code,
      `The model API is ${code === 'MODEL_RATE_LIMITED' ? 'rate limiting requests' : 'overloaded'} (${status ?? 'stream'}: ${apiMessage}); retry later.`,
      true,
      status,
      options,
    );
  }
}

export class ModelRateLimitError extends ModelOverloadedError {
  override name = 'ModelRateLimitError';
  constructor(
    status: number | undefined,
    apiMessage: string,
    retryAfterMs?: number,
    options?: { cause?: unknown },
  ) {
    super(status, apiMessage, retryAfterMs, { ...options, code: 'MODEL_RATE_LIMITED' });
  }
}

export class ModelServerError extends ModelError {
  override name = 'ModelServerError';
  constructor(status: number | undefined, apiMessage: string, options?: { cause?: unknown }) {
    super(
      'MODEL_SERVER_ERROR',
      `The model API failed (${status ?? 'stream'}: ${apiMessage}); retry later.`,
      true,
      status,
      options,
    );
  }
}

export class ModelConnectionError extends ModelError {
  override name = 'ModelConnectionError';
  constructor(detail: string, options?: { cause?: unknown }) {
    super(
      'MODEL_CONNECTION',
      `Could not reach the model API (${detail}); check the network and ANTHROPIC_BASE_URL.`,
      true,
      undefined,
      options,
    );
  }
}

export class ModelAbortedError extends ModelError {
  override name = 'ModelAbortedError';
  constructor(options?: { cause?: unknown }) {
    super('MODEL_ABORTED', 'The model request was aborted by its caller.', false, undefined, options);
  }
}

/** Parses "prompt is too long: N tokens > M maximum"; undefined numbers when the wording differs. */
export function parsePromptTooLong(
  message: string,
): { actualTokens?: number; maxTokens?: number } | undefined {
  if (!/prompt is too long/i.test(message)) return undefined;
  const m = PROMPT_TOO_LONG.exec(message);
  if (!m) return {};
  return { actualTokens: Number(m[1]), maxTokens: Number(m[2]) };
}

function retryAfterMs(headers: Headers | undefined): number | undefined {
  if (!headers || typeof headers.get !== 'function') return undefined;
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms)) return ms;
  const seconds = Number.parseFloat(headers.get('retry-after') ?? '');
  if (Number.isFinite(seconds)) return seconds * 1000;
  return undefined;
}

/** The API's own error type and message, also for errors delivered as SSE `error` events mid-stream. */
function apiDetails(e: InstanceType<typeof Anthropic.APIError>): { type?: string; message: string } {
  const body = e.error as { error?: { type?: unknown; message?: unknown }; type?: unknown } | undefined;
  const inner = body?.error;
  const type = typeof inner?.type === 'string' ? inner.type : (e.type ?? undefined);
  const message =
    typeof inner?.message === 'string' ? inner.message : (e.apiMessage ?? e.message ?? 'no message');
  return { ...(type ? { type } : {}), message };
}

export function toModelError(e: unknown): ModelError {
  if (e instanceof ModelError) return e;
  const cause = { cause: e };
  if (e instanceof Anthropic.APIUserAbortError) return new ModelAbortedError(cause);
  if (e instanceof Anthropic.APIConnectionError) return new ModelConnectionError(e.message, cause);
  if (e instanceof Anthropic.APIError) {
    const { type, message } = apiDetails(e);
    const status = e.status;
    const ptl = parsePromptTooLong(message);
    if (ptl) return new PromptTooLongError(ptl.actualTokens, ptl.maxTokens, message, cause);
    if (status === 413 || type === 'request_too_large') return new RequestTooLargeError(message, cause);
    if (status === 401 || status === 403 || type === 'authentication_error' || type === 'permission_error') {
      return new ModelAuthError(status ?? 401, message, cause);
    }
    const headers = e.headers as Headers | undefined;
    if (status === 429 || type === 'rate_limit_error') {
      return new ModelRateLimitError(status, message, retryAfterMs(headers), cause);
    }
    if (status === 529 || type === 'overloaded_error') {
      return new ModelOverloadedError(status, message, retryAfterMs(headers), cause);
    }
    if ((status !== undefined && status >= 500) || type === 'api_error') {
      return new ModelServerError(status, message, cause);
    }
    if (status === 408 || status === 409) return new ModelServerError(status, message, cause);
    if (status === 400 || status === 404 || status === 422) {
      return new ModelError(
        'MODEL_BAD_REQUEST',
        `The model API rejected the request (${status}: ${message}).`,
        false,
        status,
        cause,
      );
    }
    return new ModelError(
      'MODEL_UNKNOWN',
      `The model API failed (${status ?? 'stream'}: ${message}).`,
      false,
      status,
      cause,
    );
  }
  if (e instanceof Error && (e.name === 'AbortError' || (e as { code?: string }).code === 'ABORT_ERR')) {
    return new ModelAbortedError(cause);
  }
  const message = e instanceof Error ? e.message : String(e);
  return new ModelError('MODEL_UNKNOWN', `The model call failed: ${message}`, false, undefined, cause);
}
