import Anthropic from '@anthropic-ai/sdk';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ModelServer, startModelServer } from './model-server.js';
import { comparePrefix } from './prefix.js';
import { errors, jsonReply, reply, text, textReply, toolUse } from './replies.js';

let server: ModelServer;
let client: Anthropic;

beforeAll(async () => {
  server = await startModelServer();
  client = new Anthropic({ apiKey: 'test-key', baseURL: server.url, maxRetries: 2 });
});
afterEach(() => {
  const unscripted = [...server.unscripted];
  server.reset();
  expect(unscripted).toEqual([]);
});
afterAll(() => server.close());

const tools: Anthropic.Tool[] = [
  {
    name: 'Read',
    description: 'Read a file',
    input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] },
  },
];

describe('scripted model server', () => {
  it('drives a two-step tool_use exchange through the real SDK and records both requests', async () => {
    server.script(
      reply(text('Let me look.'), toolUse('Read', { file_path: '/repo/a.txt' }, 'toolu_1')),
      textReply('The file says hello.'),
    );
    const system = [
      { type: 'text' as const, text: 'You are a test agent.', cache_control: { type: 'ephemeral' as const } },
    ];
    const first = await client.messages.create({
      model: 'claude-sonnet-5-5',
      max_tokens: 1024,
      system,
      tools,
      messages: [{ role: 'user', content: 'What is in a.txt?' }],
    });
    expect(first.stop_reason).toBe('tool_use');
    const call = first.content.find((b) => b.type === 'tool_use');
    expect(call).toMatchObject({
      type: 'tool_use',
      id: 'toolu_1',
      name: 'Read',
      input: { file_path: '/repo/a.txt' },
    });

    const second = await client.messages.create({
      model: 'claude-sonnet-5-5',
      max_tokens: 1024,
      system,
      tools,
      messages: [
        { role: 'user', content: 'What is in a.txt?' },
        { role: 'assistant', content: first.content as Anthropic.ContentBlockParam[] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'hello' }] },
      ],
    });
    expect(second.stop_reason).toBe('end_turn');
    expect(second.content).toEqual([{ type: 'text', text: 'The file says hello.' }]);

    const [r1, r2] = server.messageRequests();
    expect(r1?.body.tools?.[0]?.name).toBe('Read');
    expect(r2?.body.messages).toHaveLength(3);
    expect(r2?.body.messages[2]?.content).toEqual([
      { type: 'tool_result', tool_use_id: 'toolu_1', content: 'hello' },
    ]);
    const cmp = comparePrefix(r1!.body, r2!.body);
    expect(cmp).toMatchObject({ sameModel: true, sameSystem: true, sameTools: true, aIsPrefixOfB: true });
  });

  it('streams a reply with the event sequence the SDK accumulates into a final message', async () => {
    server.script(
      reply(text('Streaming works and keeps every character intact.'), toolUse('Read', { file_path: '/x' })),
    );
    const events: string[] = [];
    const stream = client.messages.stream({
      model: 'claude-sonnet-5-5',
      max_tokens: 512,
      tools,
      messages: [{ role: 'user', content: 'stream please' }],
    });
    stream.on('streamEvent', (e) => events.push(e.type));
    const final = await stream.finalMessage();
    expect(final.content[0]).toEqual({
      type: 'text',
      text: 'Streaming works and keeps every character intact.',
    });
    expect(final.content[1]).toMatchObject({ type: 'tool_use', name: 'Read', input: { file_path: '/x' } });
    expect(final.stop_reason).toBe('tool_use');
    expect(final.usage.output_tokens).toBeGreaterThan(1);
    expect(events[0]).toBe('message_start');
    expect(events.at(-1)).toBe('message_stop');
    expect(events).toContain('content_block_delta');
    expect(server.requests[0]?.stream).toBe(true);
  });

  it('reports a repeated prefix as cache reads and only the new tail as input', async () => {
    server.script(textReply('one'), textReply('two'));
    const system = [
      { type: 'text' as const, text: 'S'.repeat(4000), cache_control: { type: 'ephemeral' as const } },
    ];
    const base = [
      {
        role: 'user' as const,
        content: [
          { type: 'text' as const, text: 'U'.repeat(2000), cache_control: { type: 'ephemeral' as const } },
        ],
      },
    ];
    const a = await client.messages.create({ model: 'm', max_tokens: 10, system, messages: base });
    expect(a.usage.cache_read_input_tokens).toBe(0);
    expect(a.usage.cache_creation_input_tokens).toBeGreaterThan(1000);

    // Same prefix, cache marker moved to a new last message: the whole old prefix is read from cache.
    const b = await client.messages.create({
      model: 'm',
      max_tokens: 10,
      system,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'U'.repeat(2000) }] },
        { role: 'assistant', content: 'one' },
        { role: 'user', content: [{ type: 'text', text: 'next', cache_control: { type: 'ephemeral' } }] },
      ],
    });
    expect(b.usage.cache_read_input_tokens).toBe(a.usage.cache_creation_input_tokens);
    expect(b.usage.cache_creation_input_tokens).toBeGreaterThan(0);
    expect(b.usage.cache_creation_input_tokens).toBeLessThan(50);
  });

  it('does not share the cache across models or when the prefix changes', async () => {
    server.script(textReply('a'), textReply('b'), textReply('c'));
    const sys = [
      { type: 'text' as const, text: 'X'.repeat(800), cache_control: { type: 'ephemeral' as const } },
    ];
    await client.messages.create({
      model: 'm1',
      max_tokens: 5,
      system: sys,
      messages: [{ role: 'user', content: 'q' }],
    });
    const other = await client.messages.create({
      model: 'm2',
      max_tokens: 5,
      system: sys,
      messages: [{ role: 'user', content: 'q' }],
    });
    expect(other.usage.cache_read_input_tokens).toBe(0);
    const changed = await client.messages.create({
      model: 'm1',
      max_tokens: 5,
      system: [{ type: 'text', text: 'Y'.repeat(800), cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: 'q' }],
    });
    expect(changed.usage.cache_read_input_tokens).toBe(0);
  });

  it('lets the SDK retry an injected 529 and a 429, then succeed', async () => {
    server.script(errors.overloaded(), errors.rateLimited(), textReply('finally'));
    const res = await client.messages.create({
      model: 'm',
      max_tokens: 5,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(res.content).toEqual([{ type: 'text', text: 'finally' }]);
    expect(server.messageRequests().map((r) => r.response?.status)).toEqual([529, 429, 200]);
    expect(server.requests[1]?.headers['x-stainless-retry-count']).toBe('1');
  });

  it('surfaces a 400 prompt-too-long as the SDK BadRequestError with the token counts in the message', async () => {
    server.script(errors.promptTooLong(213_462, 200_000));
    const error = await client.messages
      .create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBe(400);
    expect((error as Error).message).toContain('prompt is too long: 213462 tokens > 200000 maximum');
    expect(server.requests).toHaveLength(1);
  });

  it('answers an oversized request with prompt-too-long when a context window is set', async () => {
    server.setContextWindow(100);
    const error = await client.messages
      .create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'z'.repeat(2_000) }] })
      .catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/prompt is too long: \d+ tokens > 100 maximum/);
  });

  it('surfaces 413 and 401 as the matching SDK errors without retrying', async () => {
    server.script(errors.requestTooLarge(), errors.authentication());
    const tooLarge = await client.messages
      .create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect((tooLarge as InstanceType<typeof Anthropic.APIError>).status).toBe(413);
    const auth = await client.messages
      .create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(auth).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(server.requests).toHaveLength(2);
  });

  it('supports every stop_reason the SDK knows', async () => {
    const reasons = [
      'end_turn',
      'max_tokens',
      'stop_sequence',
      'pause_turn',
      'refusal',
      'model_context_window_exceeded',
    ] as const;
    for (const stopReason of reasons) server.script(textReply('partial', { stopReason }));
    for (const reason of reasons) {
      const res = await client.messages.create({
        model: 'm',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'x' }],
      });
      expect(res.stop_reason).toBe(reason);
    }
  });

  it('validates a structured-output reply against the requested JSON schema', async () => {
    const schema = {
      type: 'object',
      properties: { selected_memories: { type: 'array', items: { type: 'string' } } },
      required: ['selected_memories'],
      additionalProperties: false,
    };
    server.script(jsonReply({ selected_memories: ['a.md'] }), jsonReply({ picked: 'a.md' }));
    const ok = await client.messages.create({
      model: 'small',
      max_tokens: 256,
      output_config: { format: { type: 'json_schema', schema } },
      messages: [{ role: 'user', content: 'pick' }],
    });
    expect(JSON.parse((ok.content[0] as Anthropic.TextBlock).text)).toEqual({ selected_memories: ['a.md'] });
    const bad = await client.messages
      .create({
        model: 'small',
        max_tokens: 256,
        output_config: { format: { type: 'json_schema', schema } },
        messages: [{ role: 'user', content: 'pick' }],
      })
      .catch((e: unknown) => e);
    expect((bad as InstanceType<typeof Anthropic.APIError>).status).toBe(400);
    expect(server.schemaViolations[0]?.problems.join(' ')).toContain('selected_memories is required');
  });

  it('routes requests to per-purpose scripts and injects latency', async () => {
    server.route('selector', (r) => r.body.model === 'small', [textReply('from route')]);
    server.script(textReply('from default', { latencyMs: 50 }));
    const started = Date.now();
    const [a, b] = await Promise.all([
      client.messages.create({ model: 'big', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
      client.messages.create({ model: 'small', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    ]);
    expect((a.content[0] as Anthropic.TextBlock).text).toBe('from default');
    expect((b.content[0] as Anthropic.TextBlock).text).toBe('from route');
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(server.messageRequests('selector')).toHaveLength(1);
  });

  it('counts tokens for /v1/messages/count_tokens', async () => {
    const res = await client.messages.countTokens({
      model: 'm',
      messages: [{ role: 'user', content: 'a'.repeat(400) }],
    });
    expect(res.input_tokens).toBeGreaterThan(100);
  });

  it('refuses an unscripted request with a message naming it', async () => {
    const error = await client.messages
      .create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'nobody scripted me' }] })
      .catch((e: unknown) => e);
    expect((error as Error).message).toContain('nobody scripted me');
    expect(server.unscripted).toHaveLength(1);
    server.unscripted.length = 0;
  });
});
