import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { textReply } from '@engram/testkit/replies';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../fixtures.test-helpers.js';

// A process whose model threads never keep it alive once no call is in flight: a script of its own that makes one
// call and must then end by itself (an end-to-end suite: `END_TO_END_SUITES`, process).

let server: ModelServer;
beforeAll(async () => {
  server = await startModelServer();
});
afterEach(() => server.reset());
afterAll(() => server.close());

describe('threaded model transport', () => {
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
