import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addToOutbox, outboxPath, writeSessionRecord } from '@engram/memory-core/extraction/session-record';
import { PROJECTS_DIRNAME } from '@engram/memory-core/paths/memory-paths';
import { resolveBackendConfig } from '@engram/queue/backend-config';
import { openQueueEngine, type QueueEngine } from '@engram/queue/engine';
import { tenantHomeDir } from '@engram/tenants/tenant-store';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { waitUntil } from '@engram/testkit/wait';
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createHandlers } from './handlers.js';
import { createLogger } from './logger.js';
import {
  DEFAULT_OUTBOX_MAX_AGE_MS,
  operationsChecks,
  operationsReport,
  readReconcileRun,
  recordReconcileRun,
  scanOutboxes,
} from './operations.js';
import { startWorkerService } from './service.js';
import { launchChromium } from './testing/chromium.test-helpers.js';
import { testWorkersConfig } from './testing/service.test-helpers.js';

// What operators see of the outboxes and the reconcile sweep: the scan over ENGRAM_HOME (the operator's area
// and every tenant's), the sweep's last run as recorded in the real Redis state store, the checks doctor
// prints, and the same on /metrics and on the memory browser's front page (headless Chromium), against a
// running worker service whose reconcile scheduler records its sweeps.

const closer = new Closer();
afterEach(() => closer.closeAll());

const MIN = 60_000;

function home(): string {
  return mkdtempSync(join(tmpdir(), 'engram-operations-'));
}

function sessionDir(engramHome: string, transcriptDir: string, sessionId: string): string {
  const dir = join(engramHome, PROJECTS_DIRNAME, transcriptDir, sessionId);
  mkdirSync(dir, { recursive: true });
  return dir;
}

async function redisEngine(): Promise<QueueEngine> {
  const engine = await openQueueEngine({
    config: resolveBackendConfig({ REDIS_URL: inject('redisUrl') }),
    profile: 'worker',
    namespace: uniquePrefix('ops'),
  });
  closer.defer(() => engine.close());
  return engine;
}

describe('the outbox scan', () => {
  it("counts every outbox under the operator's and the tenants' areas, oldest first, by kind", async () => {
    const engramHome = home();
    const now = Date.now();
    const a = sessionDir(engramHome, '-work-a', 'sess-a');
    await addToOutbox(a, { kind: 'extract', payload: { leafSeq: 4 }, atMs: now - 5 * MIN });
    await addToOutbox(a, { kind: 'session-memory', payload: {}, atMs: now - 2 * MIN });
    const b = sessionDir(engramHome, '-work-b', 'sess-b');
    await addToOutbox(b, { kind: 'extract', payload: { leafSeq: 1 }, atMs: now - 30 * MIN });
    const t = sessionDir(tenantHomeDir(engramHome, 'acme'), '-srv-acme-ws', 'sess-t');
    await addToOutbox(t, { kind: 'dream', payload: {}, atMs: now - 1 * MIN });
    // Not outboxes: an empty session, the memory directory, a hidden directory.
    sessionDir(engramHome, '-work-a', 'sess-empty');
    sessionDir(engramHome, '-work-a', 'memory');
    sessionDir(engramHome, '-work-a', '.hidden');

    const backlog = await scanOutboxes(engramHome);
    expect(backlog.items).toBe(4);
    expect(backlog.oldestAtMs).toBe(now - 30 * MIN);
    expect(backlog.outboxes.map((o) => [o.tenant, o.transcriptDir, o.sessionId, o.items])).toEqual([
      [undefined, '-work-b', 'sess-b', 1],
      [undefined, '-work-a', 'sess-a', 2],
      ['acme', '-srv-acme-ws', 'sess-t', 1],
    ]);
    expect(backlog.outboxes[1]).toMatchObject({
      kinds: ['extract', 'session-memory'],
      oldestAtMs: now - 5 * MIN,
      path: outboxPath(a),
    });
    expect(backlog.byKind).toEqual({
      extract: { items: 2, oldestAtMs: now - 30 * MIN },
      'session-memory': { items: 1, oldestAtMs: now - 2 * MIN },
      dream: { items: 1, oldestAtMs: now - 1 * MIN },
    });
    expect(await scanOutboxes(home())).toEqual({
      outboxes: [],
      items: 0,
      byKind: { extract: { items: 0 }, 'session-memory': { items: 0 }, dream: { items: 0 } },
    });
  });
});

describe('the checks doctor prints', () => {
  it('fails an outbox older than the threshold and passes it under a larger one', async () => {
    const engramHome = home();
    const now = Date.now();
    await addToOutbox(sessionDir(engramHome, '-p', 'old'), {
      kind: 'extract',
      payload: {},
      atMs: now - 30 * MIN,
    });
    await addToOutbox(sessionDir(engramHome, '-p', 'new'), { kind: 'extract', payload: {}, atMs: now - MIN });
    const backlog = await scanOutboxes(engramHome);
    const reconcile = {
      startedAtMs: now - 1_000,
      finishedAtMs: now - 500,
      ok: true,
      intervalMs: MIN,
      result: { sessions: 2, unchanged: 0, outboxHanded: 0, extractsEnqueued: 1, skipped: 1 },
      lastSuccessAtMs: now - 500,
    };
    const checks = operationsChecks({ atMs: now, outboxMaxAgeMs: 10 * MIN, backlog, reconcile });
    expect(checks).toEqual([
      {
        ok: false,
        name: 'outboxes',
        detail: '2 items waiting in 2 outboxes (extract 2), oldest 30 min; 1 older than 10 min',
        fix: expect.stringContaining('reconcile queue'),
      },
      { ok: false, name: 'outbox -p/old', detail: '1 item (extract), oldest 30 min (over 10 min)' },
      { ok: true, name: 'outbox -p/new', detail: '1 item (extract), oldest 60 s' },
      {
        ok: true,
        name: 'reconcile',
        detail:
          'last sweep 1 s ago ok (2 sessions, 0 outbox items handed, 1 extractions enqueued, 0 unchanged, ' +
          '1 skipped; every 60 s)',
      },
    ]);
    const lenient = operationsChecks({ atMs: now, outboxMaxAgeMs: 60 * MIN, backlog, reconcile });
    expect(lenient.every((c) => c.ok)).toBe(true);
    expect(DEFAULT_OUTBOX_MAX_AGE_MS).toBe(10 * MIN);
  });

  it('fails a sweep that never ran, failed, or stopped running', () => {
    const now = Date.now();
    const backlog = {
      outboxes: [],
      items: 0,
      byKind: { extract: { items: 0 }, 'session-memory': { items: 0 }, dream: { items: 0 } },
    };
    const base = { atMs: now, outboxMaxAgeMs: 10 * MIN, backlog };
    const [empty, never] = operationsChecks(base);
    expect(empty).toEqual({
      ok: true,
      name: 'outboxes',
      detail: 'empty (no memory work waiting to be queued)',
    });
    expect(never).toMatchObject({
      ok: false,
      name: 'reconcile',
      detail: 'no sweep recorded in this namespace',
    });

    const failed = operationsChecks({
      ...base,
      reconcile: {
        startedAtMs: now - 2_000,
        finishedAtMs: now - 2_000,
        ok: false,
        error: 'Connection is closed.',
        intervalMs: MIN,
        lastSuccessAtMs: now - 5 * MIN,
      },
    }).at(-1);
    expect(failed).toMatchObject({
      ok: false,
      detail: 'last sweep 2 s ago failed: Connection is closed. (last success 5 min ago)',
    });

    const stale = operationsChecks({
      ...base,
      reconcile: { startedAtMs: now - 4 * MIN, finishedAtMs: now - 4 * MIN, ok: true, intervalMs: MIN },
    }).at(-1);
    expect(stale).toMatchObject({ ok: false, detail: expect.stringContaining('more than 3 intervals ago') });
  });
});

describe('the reconcile run record on Redis', () => {
  it('keeps the last run and the last success across a failure', async () => {
    const engine = await redisEngine();
    expect(await readReconcileRun(engine.state)).toBeUndefined();
    const result = { sessions: 1, unchanged: 0, outboxHanded: 1, extractsEnqueued: 0, skipped: 0 };
    await recordReconcileRun(engine.state, {
      startedAtMs: 1_000,
      finishedAtMs: 2_000,
      ok: true,
      result,
      intervalMs: MIN,
    });
    expect(await readReconcileRun(engine.state)).toEqual({
      startedAtMs: 1_000,
      finishedAtMs: 2_000,
      ok: true,
      result,
      intervalMs: MIN,
      lastSuccessAtMs: 2_000,
    });
    await recordReconcileRun(engine.state, {
      startedAtMs: 3_000,
      finishedAtMs: 4_000,
      ok: false,
      error: 'boom',
      intervalMs: MIN,
    });
    expect(await readReconcileRun(engine.state)).toEqual({
      startedAtMs: 3_000,
      finishedAtMs: 4_000,
      ok: false,
      error: 'boom',
      intervalMs: MIN,
      lastSuccessAtMs: 2_000,
    });
    const report = await operationsReport({ engramHome: home(), state: engine.state, now: 5_000 });
    expect(report.reconcile).toMatchObject({ ok: false, lastSuccessAtMs: 2_000 });
    expect(report.outboxMaxAgeMs).toBe(DEFAULT_OUTBOX_MAX_AGE_MS);
  });
});

describe('a running worker service', () => {
  let server: ModelServer;
  let browser: Browser;
  beforeAll(async () => {
    server = await startModelServer();
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('records its sweeps and shows outboxes and the last sweep on /metrics and the memory browser', async () => {
    const engramHome = home();
    const now = Date.now();
    // A session the sweep can hand over (it has a memory record) and one it cannot (no record: stuck).
    const handed = sessionDir(engramHome, '-work-x', 'sess-handed');
    await writeSessionRecord(handed, {
      version: 1,
      sessionId: 'sess-handed',
      projectDir: '-work-x',
      transcriptDir: '-work-x',
    });
    await addToOutbox(handed, {
      kind: 'session-memory',
      payload: {
        sessionId: 'sess-handed',
        projectDir: '-work-x',
        transcriptDir: '-work-x',
        leafUuid: '00000000-0000-4000-8000-000000000001',
        leafSeq: 1,
        requestedAt: new Date(now).toISOString(),
      },
      atMs: now - 2 * MIN,
    });
    const stuck = sessionDir(engramHome, '-work-x', 'sess-stuck');
    await addToOutbox(stuck, { kind: 'extract', payload: { leafSeq: 3 }, atMs: now - 45 * MIN });

    const token = 'operations-test-token-0123456789';
    const config = testWorkersConfig({
      modelUrl: server.url,
      engramHome,
      queues: 'reconcile',
      env: {
        ENGRAM_RECONCILE_INTERVAL_MS: '400',
        ENGRAM_RECONCILE_QUIET_MS: '0',
        ENGRAM_DASHBOARD_TOKEN: token,
        ENGRAM_WORKERS_PORT: '0',
      },
    });
    const service = await startWorkerService({
      config,
      logger: createLogger('silent'),
      handlers: createHandlers,
    });
    closer.defer(() => service.stop('test'));
    const url = service.http!.url;

    await waitUntil(
      async () => !existsSync(outboxPath(handed)),
      'the sweep hands the recorded session over',
      {
        timeoutMs: 20_000,
      },
    );
    await waitUntil(
      async () => ((await readReconcileRun(service.engine.state))?.lastSuccessAtMs ?? 0) > now,
      'a recorded sweep',
    );
    const run = await readReconcileRun(service.engine.state);
    expect(run).toMatchObject({ ok: true, intervalMs: 400 });
    expect(existsSync(outboxPath(stuck))).toBe(true);

    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/^engram_outbox_items\{kind="extract"\} 1$/m);
    expect(metrics).toMatch(/^engram_outbox_items\{kind="session-memory"\} 0$/m);
    expect(metrics).toMatch(/^engram_outboxes 1$/m);
    const age = Number(/^engram_outbox_oldest_age_seconds\{kind="extract"\} ([\d.]+)$/m.exec(metrics)?.[1]);
    expect(age).toBeGreaterThanOrEqual(45 * 60);
    expect(metrics).toMatch(/^engram_reconcile_last_run_ok 1$/m);
    const last = Number(/^engram_reconcile_last_run_timestamp_seconds ([\d.e+]+)$/m.exec(metrics)?.[1]);
    expect(last * 1000).toBeGreaterThan(now);
    expect(metrics).toMatch(/^engram_reconcile_last_result\{field="sessions"\} \d+$/m);

    const page = await (await browser.newContext()).newPage();
    await page.goto(`${url}/memories?token=${token}`);
    const section = page.locator('#operations');
    await expect.poll(() => section.locator('h2').textContent()).toBe('Memory work');
    const rows = await section.locator('tr.check').allTextContents();
    expect(rows[0]).toMatch(
      /^FAILoutboxes1 item waiting in 1 outbox \(extract 1\), oldest 4[5-9] min; 1 older than 10 min/,
    );
    expect(rows[1]).toMatch(
      /^FAILoutbox -work-x\/sess-stuck1 item \(extract\), oldest 4[5-9] min \(over 10 min\)$/,
    );
    expect(rows[2]).toMatch(/^okreconcilelast sweep \d+ s ago ok \(\d+ sessions, /);
    expect(await section.locator('tr.check.bad').count()).toBe(2);
  }, 60_000);
});
