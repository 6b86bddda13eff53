import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { errors, jsonReply, reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  addUsage,
  createModelClient,
  EMPTY_USAGE,
  type ModelClient,
  type ModelRequest,
  parseStructuredOutput,
  withCacheBreakpoints,
} from './client.js';
import {
  ModelAbortedError,
  ModelAuthError,
  type ModelError,
  ModelOverloadedError,
  ModelRateLimitError,
  PromptTooLongError,
  RequestTooLargeError,
} from './errors.js';

let server: ModelServer;

beforeAll(async () => {
  server = await startModelServer();
});
afterEach(() => {
  // Reset before the check: a test that failed with a request unanswered must not hand its leftovers (or its
  // unused script) to every test after it.
  const unscripted = [...server.unscripted];
  server.reset();
  expect(unscripted).toEqual([]);
});
afterAll(() => server.close());

const base: ModelRequest = {
  model: 'claude-sonnet-5-5',
  system: [{ type: 'text', text: 'You are a test agent.' }],
  tools: [
    {
      name: 'Read',
      description: 'Read a file',
      input_schema: {
        type: 'object',
        properties: { file_path: { type: 'string' } },
        required: ['file_path'],
      },
    },
  ],
  messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in a.txt?' }] }],
  maxTokens: 1024,
};

// Every behaviour of the client holds whether the SDK runs in this thread or in model threads.
describe.each([0, 2])('createModelClient (model threads: %i)', (threads) => {
  // One client per retry setting for the whole block, as a process keeps one: a client's model threads each
  // load the SDK, and starting them for every test cost more than the tests themselves.
  const opened = new Map<string, ModelClient>();
  const closeAll = async () => {
    const clients = [...opened.values()];
    opened.clear();
    await Promise.all(clients.map((c) => c.close?.()));
  };
  // A failed test's calls may still be in flight: its clients go, so they cannot answer the next test's script.
  afterEach(async ({ task }) => {
    if (task.result?.state === 'fail') await closeAll();
  });
  afterAll(closeAll);
  const clientFor = (s: ModelServer, maxRetries = 2): ModelClient => {
    const key = `${s.url} ${maxRetries}`;
    let client = opened.get(key);
    if (!client) {
      client = createModelClient({ apiKey: 'test', baseURL: s.url, maxRetries, threads });
      opened.set(key, client);
    }
    return client;
  };
  // Model threads boot lazily on a client's first call (each loads the SDK): boot them here, under the hook's
  // timeout, so on a loaded machine the boot is not charged to the first test's.
  beforeAll(async () => {
    if (threads === 0) return;
    server.script(textReply('warm'));
    await clientFor(server).send(base);
    server.reset();
  }, 60_000);

  it('hands each text delta to onTextDelta as it streams, and returns the same reply as without it', async () => {
    const long = 'A reply long enough to arrive in several text deltas from the streaming API.';
    server.script(reply(text(long), toolUse('Read', { file_path: '/a.txt' }, 'toolu_1'), text('Tail.')));
    server.script(reply(text(long), toolUse('Read', { file_path: '/a.txt' }, 'toolu_1'), text('Tail.')));
    const deltas: Array<{ index: number; text: string }> = [];
    const streamed = await clientFor(server).send(base, { onTextDelta: (d) => deltas.push(d) });
    const plain = await clientFor(server).send(base);
    expect(streamed.message.content).toEqual(plain.message.content);
    expect(deltas.filter((d) => d.index === 0).length).toBeGreaterThan(2);
    expect(
      deltas
        .filter((d) => d.index === 0)
        .map((d) => d.text)
        .join(''),
    ).toBe(long);
    expect(deltas.filter((d) => d.index === 2).map((d) => d.text)).toEqual(['Tail.']);
    // A listener that throws does not break the call.
    server.script(textReply(long));
    const survived = await clientFor(server).send(base, {
      onTextDelta: () => {
        throw new Error('listener bug');
      },
    });
    expect(survived.message.content).toEqual([{ type: 'text', text: long }]);
  });

  it('streams a reply into content blocks, a stop reason and usage', async () => {
    server.script(reply(text('Let me look.'), toolUse('Read', { file_path: '/a.txt' }, 'toolu_1')));
    const response = await clientFor(server).send(base);
    expect(response.message.content).toEqual([
      { type: 'text', text: 'Let me look.' },
      { type: 'tool_use', id: 'toolu_1', name: 'Read', input: { file_path: '/a.txt' } },
    ]);
    expect(response.message.stopReason).toBe('tool_use');
    const recorded = server.messageRequests()[0]!;
    expect(recorded.stream).toBe(true);
    expect(response.usage).toEqual({
      inputTokens: recorded.response!.usage!.input_tokens,
      outputTokens: recorded.response!.usage!.output_tokens,
      cacheReadInputTokens: recorded.response!.usage!.cache_read_input_tokens,
      cacheCreationInputTokens: recorded.response!.usage!.cache_creation_input_tokens,
    });
  });

  it('marks the last system block and the last message block for caching, so a repeat reads the cache', async () => {
    server.script(textReply('one'), textReply('two'));
    const client = clientFor(server);
    await client.send(base);
    const second = await client.send({
      ...base,
      messages: [
        ...base.messages,
        { role: 'assistant', content: [{ type: 'text', text: 'one' }] },
        { role: 'user', content: [{ type: 'text', text: 'again' }] },
      ],
    });
    const [r1] = server.messageRequests();
    const system = r1!.body.system as Array<Record<string, unknown>>;
    expect(system[system.length - 1]!.cache_control).toEqual({ type: 'ephemeral' });
    const lastMessage = r1!.body.messages[0]!.content as Array<Record<string, unknown>>;
    expect(lastMessage[lastMessage.length - 1]!.cache_control).toEqual({ type: 'ephemeral' });
    expect(r1!.body.tools?.[0]).not.toHaveProperty('cache_control');
    expect(second.usage.cacheReadInputTokens).toBeGreaterThan(0);
    // The caller's request objects are never mutated.
    expect(base.system[0]).not.toHaveProperty('cache_control');
    expect(base.messages[0]!.content).toEqual([{ type: 'text', text: 'What is in a.txt?' }]);
  });

  it('retries a 529 overloaded reply and then succeeds', async () => {
    server.script(errors.overloaded(5), textReply('finally'));
    const response = await clientFor(server, 2).send(base);
    expect(response.message.content).toEqual([{ type: 'text', text: 'finally' }]);
    expect(server.messageRequests().map((r) => r.response?.status)).toEqual([529, 200]);
  });

  it('surfaces an exhausted 529 as a retryable ModelOverloadedError', async () => {
    server.script(errors.overloaded(5), errors.overloaded(5));
    const error = await clientFor(server, 1)
      .send(base)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelOverloadedError);
    expect(error).toMatchObject({ code: 'MODEL_OVERLOADED', status: 529, retryable: true, retryAfterMs: 5 });
  });

  it('maps a 429 to a retryable ModelRateLimitError', async () => {
    server.script(errors.rateLimited(5));
    const error = await clientFor(server, 0)
      .send(base)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelRateLimitError);
    expect(error).toMatchObject({ code: 'MODEL_RATE_LIMITED', status: 429, retryable: true });
  });

  it('turns "prompt is too long" into PromptTooLongError with both token counts', async () => {
    server.script(errors.promptTooLong(213_462, 200_000));
    const error = await clientFor(server)
      .send(base)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PromptTooLongError);
    expect(error).toMatchObject({ actualTokens: 213_462, maxTokens: 200_000, retryable: false, status: 400 });
    expect(server.messageRequests()).toHaveLength(1);
  });

  it("reports the server's own context-window refusal the same way", async () => {
    server.setContextWindow(10);
    const error = await clientFor(server)
      .send(base)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PromptTooLongError);
    expect((error as PromptTooLongError).maxTokens).toBe(10);
    expect((error as PromptTooLongError).actualTokens).toBeGreaterThan(10);
  });

  it('fails fast on 401 and 413 without retrying', async () => {
    server.script(errors.authentication(), errors.requestTooLarge());
    const client = clientFor(server, 2);
    const auth = await client.send(base).catch((e: unknown) => e);
    const tooLarge = await client.send(base).catch((e: unknown) => e);
    expect(auth).toBeInstanceOf(ModelAuthError);
    expect(auth).toMatchObject({ code: 'MODEL_AUTH', status: 401, retryable: false });
    expect(tooLarge).toBeInstanceOf(RequestTooLargeError);
    expect(tooLarge).toMatchObject({ code: 'MODEL_REQUEST_TOO_LARGE', status: 413, retryable: false });
    expect(server.messageRequests()).toHaveLength(2);
  });

  it('maps an overloaded error delivered mid-stream to a retryable error', async () => {
    server.script({ ...errors.overloaded(5), midStream: true });
    const error = await clientFor(server, 0)
      .send(base)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelOverloadedError);
    expect((error as ModelError).retryable).toBe(true);
  });

  it('turns an abort into ModelAbortedError', async () => {
    server.script({ ...textReply('slow'), latencyMs: 2_000 });
    const controller = new AbortController();
    const pending = clientFor(server).send(base, { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    const error = await pending.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelAbortedError);
    expect((error as ModelError).retryable).toBe(false);
  });

  it('runs a structured-output side query and validates the reply', async () => {
    server.script(jsonReply({ selected: ['a.md', 'b.md'] }));
    const schema = z.object({ selected: z.array(z.string()) });
    const response = await clientFor(server).sendSideQuery({
      ...base,
      tools: [],
      outputFormat: { type: 'json_schema', schema: z.toJSONSchema(schema) as Record<string, unknown> },
    });
    expect(parseStructuredOutput(response, schema)).toEqual({ selected: ['a.md', 'b.md'] });
    const recorded = server.messageRequests()[0]!;
    expect(recorded.stream).toBe(false);
    expect(recorded.body.output_config?.format?.type).toBe('json_schema');
    expect(recorded.body).not.toHaveProperty('tools');
  });

  it('rejects a structured reply that does not match the schema with a typed error', () => {
    const response = {
      message: {
        id: 'm',
        content: [{ type: 'text' as const, text: '{"selected": 3}' }],
        stopReason: 'end_turn',
      },
      usage: EMPTY_USAGE,
    };
    expect(() => parseStructuredOutput(response, z.object({ selected: z.array(z.string()) }))).toThrow(
      expect.objectContaining({ code: 'MODEL_INVALID_STRUCTURED_OUTPUT' }),
    );
  });
});

describe('usage and cache markers', () => {
  it('adds usage field by field', () => {
    expect(
      addUsage(
        { inputTokens: 1, outputTokens: 2, cacheReadInputTokens: 3, cacheCreationInputTokens: 4 },
        { inputTokens: 10, outputTokens: 20, cacheReadInputTokens: 30, cacheCreationInputTokens: 40 },
      ),
    ).toEqual({ inputTokens: 11, outputTokens: 22, cacheReadInputTokens: 33, cacheCreationInputTokens: 44 });
  });

  it('places the message breakpoint on a string-content last message too', () => {
    const { messages } = withCacheBreakpoints([], [{ role: 'user', content: 'hi' }]);
    expect(messages[0]!.content).toEqual([
      { type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } },
    ]);
  });
});
