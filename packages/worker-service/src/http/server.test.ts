import { resetSandboxStatusCache } from '@engram/agent-runtime/sandbox/sandbox';
import { afterEach, describe, expect, it } from 'vitest';
import type { WorkersConfig } from '../config.js';
import { createWorkerMetrics } from '../metrics.js';
import { createHttpApp } from './server.js';

// /readyz and /metrics say which sandbox mode forks run in; a required sandbox that cannot start makes the
// service unready.

const saved = { mode: process.env.ENGRAM_SANDBOX, bwrap: process.env.ENGRAM_BWRAP };
afterEach(() => {
  for (const [name, value] of [
    ['ENGRAM_SANDBOX', saved.mode],
    ['ENGRAM_BWRAP', saved.bwrap],
  ] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  resetSandboxStatusCache();
});

function app() {
  return createHttpApp({
    config: { dashboard: { enabled: false } } as WorkersConfig,
    metrics: createWorkerMetrics(),
    checkReady: async () => ({ ok: true, details: { backend: 'ok' } }),
    dashboardQueues: [],
    sampleQueueDepths: async () => {},
  });
}

describe('the sandbox mode on /readyz and /metrics', () => {
  it('is not ready where the sandbox is required and cannot start, and says why', async () => {
    process.env.ENGRAM_SANDBOX = 'require';
    process.env.ENGRAM_BWRAP = '/nonexistent/bwrap';
    const http = app();
    const ready = await http.request('/readyz');
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({
      ok: false,
      details: {
        backend: 'ok',
        sandbox: {
          mode: 'require',
          backend: 'none',
          bash: 'denied',
          reason: expect.stringContaining('bubblewrap is not installed'),
        },
      },
    });
    expect(await (await http.request('/metrics')).text()).toContain(
      'engram_sandbox_info{mode="require",backend="none",bash="denied"} 1',
    );
  });

  it('stays ready with Bash denied when the sandbox is off', async () => {
    process.env.ENGRAM_SANDBOX = 'off';
    const http = app();
    const ready = await http.request('/readyz');
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({
      details: { sandbox: { mode: 'off', bash: 'denied', reason: 'disabled by ENGRAM_SANDBOX=off' } },
    });
    expect(await (await http.request('/metrics')).text()).toContain(
      'engram_sandbox_info{mode="off",backend="none",bash="denied"} 1',
    );
  });
});
