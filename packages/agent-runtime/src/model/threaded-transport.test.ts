import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { textReply } from '@engram/testkit/replies';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createModelClient, type ModelClient, type ModelRequest, responseText } from './client.js';
import { ModelConnectionError } from './errors.js';

// What only the threaded transport does: many calls in flight matched to their own replies, and close. That a
// process's model threads never keep it alive once no call is in flight is threaded-transport-process.test.ts.

let server: ModelServer;
beforeAll(async () => {
  server = await startModelServer();
});
afterEach(() => server.reset());
afterAll(() => server.close());

const request = (prompt: string): ModelRequest => ({
  model: 'claude-sonnet-5-5',
  system: [{ type: 'text', text: 'You are a test agent.' }],
  tools: [],
  messages: [{ role: 'user', content: prompt }],
  maxTokens: 256,
});
const lastPrompt = (body: { messages: Array<{ content: unknown }> }) => {
  const content = body.messages.at(-1)?.content as Array<{ text?: string }> | string;
  return typeof content === 'string' ? content : content.map((b) => b.text ?? '').join('');
};

describe('threaded model transport', () => {
  let client: ModelClient;
  afterEach(async () => {
    await client?.close?.();
  });

  it('keeps 200 calls in flight over 2 threads and gives each its own reply', async () => {
    server.respond((r) =>
      textReply(`echo ${lastPrompt(r.body)}`, { latencyMs: 20 + (r.body.messages.length % 7) }),
    );
    client = createModelClient({ apiKey: 'test', baseURL: server.url, maxRetries: 0, threads: 2 });
    const prompts = Array.from({ length: 200 }, (_, i) => `prompt-${i}`);
    const replies = await Promise.all(
      prompts.map((p, i) => (i % 2 === 0 ? client.send(request(p)) : client.sendSideQuery(request(p)))),
    );
    expect(replies.map(responseText)).toEqual(prompts.map((p) => `echo ${p}`));
    expect(server.messageRequests().filter((r) => r.stream).length).toBeGreaterThanOrEqual(1);
  });

  it('fails calls in flight at close as connection errors, and refuses calls after it', async () => {
    server.respond(() => textReply('late', { latencyMs: 2_000 }));
    client = createModelClient({ apiKey: 'test', baseURL: server.url, maxRetries: 0, threads: 1 });
    const pending = client.send(request('slow')).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 200));
    await client.close?.();
    const error = await pending;
    expect(error).toBeInstanceOf(ModelConnectionError);
    expect((error as ModelConnectionError).retryable).toBe(true);
    await expect(client.send(request('after'))).rejects.toBeInstanceOf(ModelConnectionError);
  });
});
