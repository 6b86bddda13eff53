// The one error base every Engram package may throw: a stable machine-readable `code` (a field, never text
// to be parsed out of the message), whether trying again can help (`retryable`), and a message that says what
// to do. This package imports nothing, so the lowest layers (fs-atomic, queue) can depend on it too.

export interface EngramErrorOptions {
  /**
   * Whether the same operation may succeed if tried again later (an outage, a busy resource). Required: every
   * error decides it where it is made, because a job's worker retries exactly the errors that say `true` (and
   * errors that are not EngramErrors at all: an unknown failure is treated as transient).
   */
  retryable: boolean;
  cause?: unknown;
}

export class EngramError extends Error {
  readonly code: string;
  readonly retryable: boolean;

  constructor(code: string, message: string, options: EngramErrorOptions) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.code = code;
    this.retryable = options.retryable;
    this.name = new.target.name;
  }

  /** The fields a log line or an API error body carries. */
  toJSON(): { name: string; code: string; retryable: boolean; message: string } {
    return { name: this.name, code: this.code, retryable: this.retryable, message: this.message };
  }
}

/** One spelling for every code: upper snake case (`SESSION_BUSY`, `MODEL_PROMPT_TOO_LONG`). */
export const ERROR_CODE_PATTERN = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/;

export function isEngramError(error: unknown): error is EngramError {
  return error instanceof EngramError;
}

/** The code of any error that carries one (an EngramError, a Node system error), else undefined. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
