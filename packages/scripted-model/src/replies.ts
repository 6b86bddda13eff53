// Builders for scripted model replies and errors, so a test script reads like the conversation it stages.

import type { StopReason } from '@anthropic-ai/sdk/resources/messages';

export type ScriptedBlock =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id?: string; name: string; input: Record<string, unknown> }
  | { type: 'thinking'; thinking: string; signature?: string };

export interface ScriptedUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

export interface ScriptedReply {
  kind?: 'reply';
  content: ScriptedBlock[];
  /** Defaults to `tool_use` when the reply has a tool_use block, else `end_turn`. */
  stopReason?: StopReason;
  /** Overrides the computed usage figures (the computed cache figures are kept unless overridden). */
  usage?: ScriptedUsage;
  latencyMs?: number;
  model?: string;
  /** Lets a test stage a reply that violates the request's output_config.format schema on purpose. */
  skipSchemaValidation?: boolean;
  /**
   * Streaming requests: after this many text deltas, hold the rest of the reply until `until` settles, so a
   * test can observe what a client sees while a block is still open.
   */
  pauseStream?: { afterTextDeltas: number; until: Promise<unknown> };
}

export interface ScriptedError {
  kind: 'error';
  status: number;
  type: string;
  message: string;
  /** Sent as `retry-after-ms` (and rounded up as `retry-after`); the SDK honours it for its retries. */
  retryAfterMs?: number;
  latencyMs?: number;
  /** Emit the error as an SSE `error` event after the stream has started (streaming requests only). */
  midStream?: boolean;
  headers?: Record<string, string>;
}

export type ScriptStep = ScriptedReply | ScriptedError;

export function text(value: string): ScriptedBlock {
  return { type: 'text', text: value };
}

export function toolUse(name: string, input: Record<string, unknown>, id?: string): ScriptedBlock {
  return id === undefined ? { type: 'tool_use', name, input } : { type: 'tool_use', id, name, input };
}

export function reply(...content: ScriptedBlock[]): ScriptedReply {
  return { content };
}

export function textReply(value: string, extra: Partial<ScriptedReply> = {}): ScriptedReply {
  return { content: [text(value)], ...extra };
}

export function jsonReply(value: unknown, extra: Partial<ScriptedReply> = {}): ScriptedReply {
  return { content: [text(JSON.stringify(value))], ...extra };
}

export function toolReply(...calls: Array<{ name: string; input: Record<string, unknown>; id?: string }>) {
  return reply(...calls.map((c) => toolUse(c.name, c.input, c.id)));
}

export const errors = {
  rateLimited(retryAfterMs = 20): ScriptedError {
    return {
      kind: 'error',
      status: 429,
      type: 'rate_limit_error',
      message: 'Number of request tokens has exceeded your per-minute rate limit',
      retryAfterMs,
    };
  },
  overloaded(retryAfterMs = 20): ScriptedError {
    return { kind: 'error', status: 529, type: 'overloaded_error', message: 'Overloaded', retryAfterMs };
  },
  server(retryAfterMs = 20): ScriptedError {
    return { kind: 'error', status: 500, type: 'api_error', message: 'Internal server error', retryAfterMs };
  },
  promptTooLong(actualTokens: number, maxTokens = 200_000): ScriptedError {
    return {
      kind: 'error',
      status: 400,
      type: 'invalid_request_error',
      message: `prompt is too long: ${actualTokens} tokens > ${maxTokens} maximum`,
    };
  },
  requestTooLarge(): ScriptedError {
    return {
      kind: 'error',
      status: 413,
      type: 'request_too_large',
      message: 'Request exceeds the maximum allowed number of bytes.',
    };
  },
  authentication(): ScriptedError {
    return { kind: 'error', status: 401, type: 'authentication_error', message: 'invalid x-api-key' };
  },
  permission(): ScriptedError {
    return {
      kind: 'error',
      status: 403,
      type: 'permission_error',
      message: 'Your API key does not have permission to use the specified resource.',
    };
  },
  invalidRequest(message: string): ScriptedError {
    return { kind: 'error', status: 400, type: 'invalid_request_error', message };
  },
};
