import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobProducer } from '@engram/queue/producer';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { startPrivateRedis } from '@engram/testkit/private-redis';
import { waitUntil } from '@engram/testkit/wait';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { ConfigError, loadWorkersConfig } from './config.js';
import { createLogger } from './logger.js';
import { startWorkerService, type WorkerHandlers } from './service.js';

const closer = new Closer();
afterEach(() => closer.closeAll());

function testConfig(extra: Record<string, string> = {}) {
  return loadWorkersConfig({
    REDIS_URL: inject('redisUrl'),
    ENGRAM_HOME: mkdtempSync(join(tmpdir(), 'engram-workers-home-')),
    ENGRAM_NAMESPACE: uniquePrefix('svc'),
    ENGRAM_WORKERS_PORT: '0',
    ENGRAM_QUEUES: 'recall',
    LOG_LEVEL: 'silent',
    ...extra,
  });
}

const recallHandler =
  (delayMs = 0, onStart?: () => void): ((deps: unknown) => WorkerHandlers) =>
  () => ({
    recall: async () => {
      onStart?.();
      await new Promise((r) => setTimeout(r, delayMs));
      return { outcome: 'empty', attachments: [], latencyMs: delayMs };
    },
  });

function recallPayload(n: number) {
  return {
    sessionId: `s${n}`,
    projectDir: '-p',
    transcriptDir: '-p',
    query: 'what did we decide about testing',
    alreadySurfaced: [],
    alreadyRead: [],
    recentTools: [],
    requestedAt: new Date().toISOString(),
  };
}

describe('worker configuration', () => {
  it('names every invalid variable with the reason', () => {
    const error = (() => {
      try {
        loadWorkersConfig({
          ENGRAM_WORKERS_PORT: 'eighty',
          ENGRAM_CONCURRENCY_EXTRACT: '-2',
          ENGRAM_QUEUES: 'extract,dreams',
        });
      } catch (e) {
        return e;
      }
    })() as Error;
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain('ENGRAM_WORKERS_PORT');
    expect(error.message).toContain('ENGRAM_CONCURRENCY_EXTRACT');
  });

  it('rejects an unknown queue name and a half-configured basic auth', () => {
    expect(() => loadWorkersConfig({ ENGRAM_QUEUES: 'extract,dreams' })).toThrow(/unknown queue\(s\) dreams/);
    expect(() => loadWorkersConfig({ ENGRAM_DASHBOARD_USER: 'ops' })).toThrow(/must be set together/);
    expect(() => loadWorkersConfig({ REDIS_URL: 'http://nope' })).toThrow(
      /REDIS_URL must start with redis:\/\//,
    );
  });
});

describe('worker service', () => {
  it('processes jobs and exposes health, readiness and Prometheus metrics', async () => {
    const config = testConfig();
    const service = await startWorkerService({
      config,
      logger: createLogger('silent'),
      handlers: recallHandler(),
    });
    closer.defer(() => service.stop('test'));
    const base = service.http!.url;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    await waitUntil(async () => (await fetch(`${base}/readyz`)).status === 200, 'ready');
    const ready = (await (await fetch(`${base}/readyz`)).json()) as { details: Record<string, string> };
    expect(ready.details).toMatchObject({ backend: 'ok', recall: 'fetching' });
    // Which OS-sandbox mode forks run in (bubblewrap is installed here, as .ci/run installs it).
    expect(ready.details.sandbox).toMatchObject({ mode: 'auto', backend: 'bubblewrap', bash: 'sandboxed' });

    const producer = closer.add(new JobProducer(service.engine));
    await producer.enqueue('recall', recallPayload(1));
    await waitUntil(
      async () => (await fetch(`${base}/metrics`).then((r) => r.text())).includes('outcome="completed"} 1'),
      'metric',
    );
    const metrics = await fetch(`${base}/metrics`).then((r) => r.text());
    expect(metrics).toContain('engram_jobs_total{queue="recall",outcome="completed"} 1');
    expect(metrics).toContain('engram_job_duration_seconds_bucket');
    expect(metrics).toMatch(/engram_queue_jobs\{queue="recall",state="waiting"\} 0/);
    expect(metrics).toContain('engram_sandbox_info{mode="auto",backend="bubblewrap",bash="sandboxed"} 1');
  });

  it('guards the dashboard with a token when one is configured', async () => {
    const token = 'a-long-dashboard-token-123';
    const service = await startWorkerService({
      config: testConfig({ ENGRAM_DASHBOARD_TOKEN: token }),
      logger: createLogger('silent'),
      handlers: recallHandler(),
    });
    closer.defer(() => service.stop('test'));
    const base = service.http!.url;
    expect((await fetch(`${base}/dashboard`)).status).toBe(401);
    const page = await fetch(`${base}/dashboard`, { headers: { authorization: `Bearer ${token}` } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<html');
    const api = await fetch(`${base}/dashboard/api/queues`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(api.status).toBe(200);
    const body = (await api.json()) as { queues: Array<{ name: string; readOnlyMode: boolean }> };
    expect(body.queues.map((q) => q.name)).toEqual(['memory-recall']);
    expect(body.queues[0]?.readOnlyMode).toBe(true);
  });

  it('is closed with no token configured: it generates one into ENGRAM_HOME; /metrics names tenants only with it', async () => {
    const config = testConfig();
    const service = await startWorkerService({
      config,
      logger: createLogger('silent'),
      handlers: recallHandler(),
    });
    closer.defer(() => service.stop('test'));
    const base = service.http!.url;
    const file = join(config.engramHome, '.dashboard-token');
    expect(service.dashboardTokenFile).toBe(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const token = readFileSync(file, 'utf8').trim();
    expect(token.length).toBeGreaterThanOrEqual(16);
    service.metrics.tenantForkTokens.inc({ tenant: 'acme-corp', queue: 'extract', type: 'output' }, 5);
    for (const path of ['/dashboard', '/dashboard/api/queues', '/memories']) {
      const denied = await fetch(`${base}${path}`);
      expect(denied.status, path).toBe(401);
      expect(await denied.text()).not.toContain('acme-corp');
      // Positive control: the same page with the generated token.
      const allowed = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
      expect(allowed.status, path).toBe(200);
    }
    expect((await fetch(`${base}/memories?token=${token}`)).status).toBe(200);
    const open = await fetch(`${base}/metrics`).then((r) => r.text());
    expect(open).toContain('engram_jobs_total');
    expect(open).not.toMatch(/acme-corp|tenant=/);
    const scraped = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${token}` } }).then(
      (r) => r.text(),
    );
    expect(scraped).toContain(
      'engram_tenant_fork_tokens_total{tenant="acme-corp",queue="extract",type="output"} 5',
    );
    // A restart keeps the same token (the file is reused, not replaced).
    await service.stop('test');
    const again = await startWorkerService({
      config,
      logger: createLogger('silent'),
      handlers: recallHandler(),
    });
    closer.defer(() => again.stop('test'));
    expect(readFileSync(file, 'utf8').trim()).toBe(token);
    expect(
      (await fetch(`${again.http!.url}/dashboard`, { headers: { authorization: `Bearer ${token}` } })).status,
    ).toBe(200);
  });

  it('waits for an active job on shutdown before closing', async () => {
    let started = false;
    let finished = false;
    const service = await startWorkerService({
      config: testConfig(),
      logger: createLogger('silent'),
      handlers: () => ({
        recall: async () => {
          started = true;
          await new Promise((r) => setTimeout(r, 400));
          finished = true;
          return { outcome: 'empty', attachments: [], latencyMs: 400 };
        },
      }),
    });
    const producer = new JobProducer(service.engine);
    await producer.enqueue('recall', recallPayload(2));
    await waitUntil(() => started, 'job start');
    await producer.close();
    await service.stop('SIGTERM');
    expect(finished).toBe(true);
  });

  it('refuses to start on a Redis whose eviction policy could drop jobs', async () => {
    const redis = await startPrivateRedis(closer, { prefix: 'engram-lru-' });
    const client = new Redis(redis.url);
    await client.config('SET', 'maxmemory-policy', 'allkeys-lru');
    client.disconnect();
    const error = await startWorkerService({
      config: { ...testConfig(), backend: { kind: 'redis', url: redis.url, implicit: false } },
      logger: createLogger('silent'),
      handlers: recallHandler(),
    }).catch((e: unknown) => e);
    expect((error as Error & { code: string }).code).toBe('QUEUE_BACKEND_UNSAFE');
    expect((error as Error).message).toContain('noeviction');
  });
});
