import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { testWorkersConfig } from '../testing/service.test-helpers.js';
import { startHttpServer } from './server.js';

// A busy ENGRAM_WORKERS_PORT is a typed error that names the setting to change, not a raw EADDRINUSE.

describe('the workers HTTP server', () => {
  it('refuses a busy port with PORT_IN_USE and the setting that changes it', async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', () => resolve()));
    const port = (busy.address() as { port: number }).port;
    try {
      const config = testWorkersConfig({
        modelUrl: 'http://127.0.0.1:1',
        engramHome: '/nonexistent-engram-home',
        queues: 'extract',
        env: { ENGRAM_WORKERS_PORT: String(port) },
      });
      const started = startHttpServer({
        config,
        metrics: { registry: { contentType: 'text/plain', metrics: async () => '' } } as never,
        checkReady: async () => ({ ok: true, details: {} }),
        dashboardQueues: [],
        sampleQueueDepths: async () => {},
      });
      await expect(started).rejects.toMatchObject({
        code: 'PORT_IN_USE',
        message: expect.stringContaining(`port ${port} on 127.0.0.1 is already in use`),
      });
      await expect(started).rejects.toThrow(/choose another with ENGRAM_WORKERS_PORT/);
    } finally {
      await new Promise((resolve) => busy.close(resolve));
    }
  });
});
