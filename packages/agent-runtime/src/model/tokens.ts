import type { Usage } from './client.js';
import type { ApiMessage, ApiUsage } from './types.js';

// Context size without a tokenizer: the last API-reported usage is exact for everything up to that reply;
// only what came after it is estimated, at 4 characters per token (Claude Code's rough estimator).

export const CHARS_PER_TOKEN = 4;
/** Claude Code's flat estimate for an image or document block. */
export const IMAGE_TOKEN_ESTIMATE = 2_000;

export function estimateTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

function estimateBlockTokens(block: unknown): number {
  if (typeof block === 'string') return estimateTokens(block);
  if (!block || typeof block !== 'object') return 0;
  const b = block as Record<string, unknown>;
  switch (b.type) {
    case 'text':
      return estimateTokens(String(b.text ?? ''));
    case 'tool_use':
      return estimateTokens(String(b.name ?? '') + JSON.stringify(b.input ?? {}));
    case 'tool_result':
      return Array.isArray(b.content)
        ? b.content.reduce((n: number, c: unknown) => n + estimateBlockTokens(c), 0)
        : estimateTokens(String(b.content ?? ''));
    case 'thinking':
      return estimateTokens(String(b.thinking ?? ''));
    case 'redacted_thinking':
      return estimateTokens(String(b.data ?? ''));
    case 'image':
    case 'document':
      return IMAGE_TOKEN_ESTIMATE;
    default:
      return estimateTokens(JSON.stringify(b));
  }
}

export function estimateMessagesTokens(messages: ReadonlyArray<Pick<ApiMessage, 'content'>>): number {
  let total = 0;
  for (const m of messages) {
    if (typeof m.content === 'string') total += estimateTokens(m.content);
    else for (const block of m.content) total += estimateBlockTokens(block);
  }
  return total;
}

/** Everything the API counted for one call: the context it read plus what it wrote. */
export function usageTotal(usage: Usage): number {
  return usage.inputTokens + usage.outputTokens + usage.cacheReadInputTokens + usage.cacheCreationInputTokens;
}

function apiUsageTotal(usage: ApiUsage): number {
  return (
    usage.input_tokens +
    usage.output_tokens +
    (usage.cache_read_input_tokens ?? 0) +
    (usage.cache_creation_input_tokens ?? 0)
  );
}

/** A transcript entry or anything shaped like one: `message.usage` is present on stored assistant replies. */
export interface MessageLike {
  message?: { role?: string; content?: unknown; usage?: ApiUsage | null } | undefined;
}

/**
 * Current context size: the usage of the newest message that carries API usage, plus an estimate of every
 * message after it. With no usage anywhere, the whole list is estimated. When `lastUsage` is given, the
 * caller has kept the last response's usage itself and `messages` are only those that came after it.
 */
export function tokenCountWithEstimation(messages: ReadonlyArray<MessageLike>, lastUsage?: Usage): number {
  const estimateFrom = (start: number) => {
    let n = 0;
    for (let i = start; i < messages.length; i++) {
      const content = messages[i]?.message?.content;
      if (typeof content === 'string' || Array.isArray(content)) {
        n += estimateMessagesTokens([{ content: content as ApiMessage['content'] }]);
      }
    }
    return n;
  };
  if (lastUsage) return usageTotal(lastUsage) + estimateFrom(0);
  for (let i = messages.length - 1; i >= 0; i--) {
    const usage = messages[i]?.message?.usage;
    if (usage && typeof usage.input_tokens === 'number') return apiUsageTotal(usage) + estimateFrom(i + 1);
  }
  return estimateFrom(0);
}
