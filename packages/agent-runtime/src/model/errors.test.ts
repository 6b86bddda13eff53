import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import {
  ModelAbortedError,
  ModelConnectionError,
  ModelError,
  ModelServerError,
  PromptTooLongError,
  parsePromptTooLong,
  toModelError,
} from './errors.js';

function apiError(status: number | undefined, type: string, message: string) {
  return Anthropic.APIError.generate(
    status,
    { type: 'error', error: { type, message } },
    message,
    new Headers(),
  );
}

describe('toModelError', () => {
  it('parses both numbers out of a prompt-too-long message', () => {
    expect(parsePromptTooLong('prompt is too long: 201000 tokens > 200000 maximum')).toEqual({
      actualTokens: 201_000,
      maxTokens: 200_000,
    });
    expect(parsePromptTooLong('Prompt is too long')).toEqual({});
    expect(parsePromptTooLong('something else')).toBeUndefined();
  });

  it('keeps a prompt-too-long without numbers typed, with undefined counts', () => {
    const e = toModelError(apiError(400, 'invalid_request_error', 'Prompt is too long'));
    expect(e).toBeInstanceOf(PromptTooLongError);
    expect((e as PromptTooLongError).actualTokens).toBeUndefined();
  });

  it('classifies 5xx as retryable server errors and other 400s as non-retryable bad requests', () => {
    const server = toModelError(apiError(500, 'api_error', 'Internal server error'));
    expect(server).toBeInstanceOf(ModelServerError);
    expect(server.retryable).toBe(true);
    const bad = toModelError(apiError(400, 'invalid_request_error', 'messages: roles must alternate'));
    expect(bad).toMatchObject({ code: 'MODEL_BAD_REQUEST', retryable: false, status: 400 });
    expect(bad.message).toContain('roles must alternate');
  });

  it('maps connection failures, aborts and unknown throwables', () => {
    expect(toModelError(new Anthropic.APIConnectionError({ message: 'ECONNREFUSED' }))).toBeInstanceOf(
      ModelConnectionError,
    );
    expect(toModelError(new Anthropic.APIConnectionError({ message: 'x' })).retryable).toBe(true);
    expect(toModelError(new Anthropic.APIUserAbortError())).toBeInstanceOf(ModelAbortedError);
    const unknown = toModelError('boom');
    expect(unknown).toBeInstanceOf(ModelError);
    expect(unknown).toMatchObject({ code: 'MODEL_UNKNOWN', retryable: false });
  });

  it('returns a ModelError unchanged', () => {
    const e = new ModelServerError(503, 'down');
    expect(toModelError(e)).toBe(e);
  });
});
