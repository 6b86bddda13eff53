import { EngramError } from '@engram/errors/engram-error';

// Every refusal of the Memory Stores API is one of these: the HTTP status, the Anthropic error `type` the
// SDK maps to its error classes, and (for path conflicts) the fields a client retries with.

export type ApiErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'memory_precondition_failed_error'
  | 'memory_path_conflict_error'
  | 'conflict_error'
  | 'api_error';

export class MemoryStoreApiError extends EngramError {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 405 | 409 | 413 | 500 | 503,
    readonly type: ApiErrorType,
    message: string,
    readonly extra: Record<string, string> = {},
  ) {
    super(`MEMORY_STORE_${type.toUpperCase()}`, message, { retryable: status >= 500 });
  }

  /** The Anthropic error envelope. */
  body(): { type: 'error'; error: Record<string, string> } {
    return { type: 'error', error: { type: this.type, message: this.message, ...this.extra } };
  }
}

export const invalid = (message: string) => new MemoryStoreApiError(400, 'invalid_request_error', message);
export const notFound = (message: string) => new MemoryStoreApiError(404, 'not_found_error', message);
