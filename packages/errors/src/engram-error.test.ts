import { describe, expect, it } from 'vitest';
import { EngramError, errorCode, isEngramError } from './engram-error.js';

class LeaseLostError extends EngramError {
  constructor(key: string) {
    super('LEASE_LOST', `lease ${key} was lost; the job will be retried`, { retryable: true });
  }
}

describe('EngramError', () => {
  it('carries code and retryable as fields, and the subclass name', () => {
    const error = new LeaseLostError('project-writer:p');
    expect(error).toBeInstanceOf(Error);
    expect(isEngramError(error)).toBe(true);
    expect(error.name).toBe('LeaseLostError');
    expect(error.code).toBe('LEASE_LOST');
    expect(error.retryable).toBe(true);
    expect(error.message).not.toContain('LEASE_LOST');
    expect(JSON.parse(JSON.stringify(error))).toEqual({
      name: 'LeaseLostError',
      code: 'LEASE_LOST',
      retryable: true,
      message: 'lease project-writer:p was lost; the job will be retried',
    });
  });

  it('says whether it is retryable at construction (required), and keeps its cause', () => {
    const cause = new Error('ENOENT');
    const error = new EngramError('TRANSCRIPT_MISSING', 'no transcript', { retryable: false, cause });
    expect(error.retryable).toBe(false);
    expect(error.cause).toBe(cause);
    // @ts-expect-error retryable is required: no error may leave the worker's retry decision to a default
    const undecided = new EngramError('UNDECIDED', 'x', {});
    expect(undecided.retryable).toBeUndefined();
  });

  it('errorCode reads the code of Node system errors too', () => {
    expect(errorCode(Object.assign(new Error('x'), { code: 'ENOENT' }))).toBe('ENOENT');
    expect(errorCode(new Error('plain'))).toBeUndefined();
    expect(errorCode(undefined)).toBeUndefined();
  });
});
