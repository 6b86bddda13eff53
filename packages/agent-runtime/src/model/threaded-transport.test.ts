import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { textReply } from '@engram/testkit/replies';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../fixtures.test-helpers.js';
import { createModelClient, type ModelClient, type ModelRequest, responseText } from './client.js';
import { ModelConnectionError } from './errors.js';

// What only the threaded transport does: many calls in flight matched to their own replies, close, and a
// process whose model threads never keep it alive once no call is in flight.

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

  it('holds the process open while a call is in flight, and not after', async () => {
    server.respond(() => textReply('done', { latencyMs: 500 }));
    const temp = await makeTempDir();
    try {
      const script = `${temp.dir}/call.ts`;
      const clientModule = fileURLToPath(new URL('./client.ts', import.meta.url));
      // No close(): the process must end by itself once its one call returned.
      await fs.writeFile(
        script,
        `import { createModelClient, responseText } from ${JSON.stringify(clientModule)};\n` +
          `const c = createModelClient({ apiKey: 't', baseURL: ${JSON.stringify(server.url)}, maxRetries: 0, threads: 1 });\n` +
          `c.send({ model: 'm', system: [], tools: [], maxTokens: 8, messages: [{ role: 'user', content: 'hi' }] })` +
          `.then((r) => console.log('reply', responseText(r)));\n`,
      );
      const child = spawn(process.execPath, ['--import', 'tsx', script], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
      });
      child.stderr.on('data', (d) => {
        out += d;
      });
      const started = Date.now();
      const code = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        child.on('exit', (c) => {
          clearTimeout(timer);
          resolve(c);
        });
      });
      expect(out).toContain('reply done');
      expect(code).toBe(0);
      expect(Date.now() - started).toBeLessThan(20_000);
    } finally {
      await temp.cleanup();
    }
  }, 30_000);
});
