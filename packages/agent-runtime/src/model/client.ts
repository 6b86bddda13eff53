import type Anthropic from '@anthropic-ai/sdk';
import type { z } from 'zod';
import { ModelError, toModelError } from './errors.js';
import { threadedTransport } from './threaded-transport.js';
import { createSdk, inlineTransport, type ModelTransport, type SdkOptions } from './transport.js';
import type {
  ApiMessage,
  ApiUsage,
  CacheControl,
  ContentBlock,
  StopReason,
  SystemBlock,
  ToolDefinition,
} from './types.js';

// The one place that talks to the Messages API. Requests go out with Claude Code's two cache breakpoints
// (last system block, last block of the last message) so consecutive requests and forks read the prompt
// cache; the markers are added here, on copies, and are never part of what callers store or compare.

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadInputTokens: number;
  cacheCreationInputTokens: number;
}

export interface ModelRequest {
  model: string;
  system: SystemBlock[];
  tools: ToolDefinition[];
  messages: ApiMessage[];
  maxTokens: number;
  outputFormat?: { type: 'json_schema'; schema: Record<string, unknown> };
  temperature?: number;
}

export interface ModelResponse {
  message: { id: string; content: ContentBlock[]; stopReason: StopReason | null; model?: string };
  usage: Usage;
}

export interface SendOptions {
  signal?: AbortSignal;
  /**
   * `send` only: each text delta of the streamed reply as it arrives (`index` is the content block's). The
   * returned response is the same with or without it; a throwing callback never breaks the call.
   */
  onTextDelta?: (delta: TextDelta) => void;
}

export interface TextDelta {
  /** Index of the content block the text belongs to, in the reply being streamed. */
  index: number;
  text: string;
}

export interface ModelClient {
  /** Streams the reply (long generations stay under HTTP timeouts) and returns the final message. */
  send(request: ModelRequest, opts?: SendOptions): Promise<ModelResponse>;
  /** Non-streaming call for small structured-output side queries (e.g. the recall selector). */
  sendSideQuery(request: ModelRequest, opts?: SendOptions): Promise<ModelResponse>;
  /** Releases what the client holds (its model threads); calls after it fail. Optional for test doubles. */
  close?(): Promise<void>;
}

export interface ModelClientOptions extends SdkOptions {
  /**
   * Model threads: 0 (the default) calls the SDK in the calling thread; N > 0 runs the SDK's requests in N
   * worker threads (threaded-transport.ts), for processes that keep many LLM-bound calls in flight.
   */
  threads?: number;
}

export const EMPTY_USAGE: Usage = Object.freeze({
  inputTokens: 0,
  outputTokens: 0,
  cacheReadInputTokens: 0,
  cacheCreationInputTokens: 0,
});

export function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheReadInputTokens: a.cacheReadInputTokens + b.cacheReadInputTokens,
    cacheCreationInputTokens: a.cacheCreationInputTokens + b.cacheCreationInputTokens,
  };
}

export function usageFromApi(usage: ApiUsage | undefined | null): Usage {
  return {
    inputTokens: usage?.input_tokens ?? 0,
    outputTokens: usage?.output_tokens ?? 0,
    cacheReadInputTokens: usage?.cache_read_input_tokens ?? 0,
    cacheCreationInputTokens: usage?.cache_creation_input_tokens ?? 0,
  };
}

export function usageToApi(usage: Usage): ApiUsage {
  return {
    input_tokens: usage.inputTokens,
    output_tokens: usage.outputTokens,
    cache_read_input_tokens: usage.cacheReadInputTokens,
    cache_creation_input_tokens: usage.cacheCreationInputTokens,
  };
}

const EPHEMERAL: CacheControl = { type: 'ephemeral' };

/** Copies of `system` and `messages` with the cache breakpoints placed; the inputs are left untouched. */
export function withCacheBreakpoints(
  system: SystemBlock[],
  messages: ApiMessage[],
): { system: SystemBlock[]; messages: ApiMessage[] } {
  const markedSystem = system.map((block, i) =>
    i === system.length - 1 ? { ...block, cache_control: EPHEMERAL } : block,
  );
  const last = messages[messages.length - 1];
  if (!last) return { system: markedSystem, messages };
  const content: ContentBlock[] =
    typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : [...last.content];
  const lastIndex = content.length - 1;
  const lastBlock = content[lastIndex];
  // Thinking blocks cannot carry cache_control; a request ends with a user message, so this is a guard.
  if (lastBlock && lastBlock.type !== 'thinking' && lastBlock.type !== 'redacted_thinking') {
    content[lastIndex] = { ...lastBlock, cache_control: EPHEMERAL };
  }
  return { system: markedSystem, messages: [...messages.slice(0, -1), { role: last.role, content }] };
}

/**
 * Keeps only the fields the API defines for each block, so what the loop stores (and later re-sends from
 * the transcript) does not depend on SDK accumulator details such as `citations: null`.
 */
export function normalizeAssistantContent(content: readonly unknown[]): ContentBlock[] {
  const out: ContentBlock[] = [];
  for (const raw of content) {
    const block = raw as Record<string, unknown>;
    switch (block.type) {
      case 'text': {
        const citations = block.citations;
        out.push(
          Array.isArray(citations) && citations.length > 0
            ? { type: 'text', text: String(block.text ?? ''), citations }
            : { type: 'text', text: String(block.text ?? '') },
        );
        break;
      }
      case 'tool_use':
        out.push({
          type: 'tool_use',
          id: String(block.id),
          name: String(block.name),
          input: (block.input && typeof block.input === 'object' ? block.input : {}) as Record<
            string,
            unknown
          >,
        });
        break;
      case 'thinking':
        out.push({
          type: 'thinking',
          thinking: String(block.thinking ?? ''),
          signature: String(block.signature ?? ''),
        });
        break;
      case 'redacted_thinking':
        out.push({ type: 'redacted_thinking', data: String(block.data ?? '') });
        break;
      default:
        // Server tool blocks and future types round-trip as the API sent them.
        out.push(JSON.parse(JSON.stringify(block)) as ContentBlock);
    }
  }
  return out;
}

function toBody(request: ModelRequest) {
  const { system, messages } = withCacheBreakpoints(request.system, request.messages);
  return {
    model: request.model,
    max_tokens: request.maxTokens,
    ...(system.length > 0 ? { system } : {}),
    ...(request.tools.length > 0 ? { tools: request.tools } : {}),
    messages,
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.outputFormat ? { output_config: { format: request.outputFormat } } : {}),
  } as unknown as Anthropic.MessageCreateParamsNonStreaming;
}

function toResponse(message: Anthropic.Message): ModelResponse {
  return {
    message: {
      id: message.id,
      content: normalizeAssistantContent(message.content),
      stopReason: (message.stop_reason ?? null) as StopReason | null,
      model: message.model,
    },
    usage: usageFromApi(message.usage as ApiUsage),
  };
}

export function createModelClient(opts: ModelClientOptions = {}): ModelClient {
  const { threads = 0, ...sdkOptions } = opts;
  const threaded = threads > 0 ? threadedTransport({ ...sdkOptions, threads }) : undefined;
  const transport: ModelTransport = threaded ?? inlineTransport(createSdk(sdkOptions));
  return {
    async send(request, sendOpts = {}) {
      try {
        const onTextDelta = sendOpts.onTextDelta;
        const message = await transport.stream(toBody(request), {
          ...(sendOpts.signal ? { signal: sendOpts.signal } : {}),
          ...(onTextDelta
            ? { onTextDelta: (index: number, text: string) => onTextDelta({ index, text }) }
            : {}),
        });
        return toResponse(message);
      } catch (e) {
        throw toModelError(e);
      }
    },
    async sendSideQuery(request, sendOpts = {}) {
      try {
        const message = await transport.create(
          toBody(request),
          sendOpts.signal ? { signal: sendOpts.signal } : {},
        );
        return toResponse(message);
      } catch (e) {
        throw toModelError(e);
      }
    },
    async close() {
      await threaded?.close();
    },
  };
}

/** The text of a reply, joined; the first text block carries structured output. */
export function responseText(response: ModelResponse): string {
  return response.message.content
    .filter((b): b is Extract<ContentBlock, { type: 'text' }> => b.type === 'text')
    .map((b) => b.text)
    .join('');
}

/** Parses and validates a structured-output reply; a mismatch is a typed, non-retryable error. */
export function parseStructuredOutput<T>(response: ModelResponse, schema: z.ZodType<T>): T {
  const first = response.message.content.find((b) => b.type === 'text');
  let json: unknown;
  try {
    json = JSON.parse(first?.type === 'text' ? first.text : '');
  } catch {
    throw new ModelError(
      'MODEL_INVALID_STRUCTURED_OUTPUT',
      'The model reply is not JSON although a json_schema output format was requested.',
      false,
    );
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new ModelError(
      'MODEL_INVALID_STRUCTURED_OUTPUT',
      `The model reply does not match the requested schema: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'} ${i.message}`).join('; ')}`,
      false,
    );
  }
  return parsed.data;
}
