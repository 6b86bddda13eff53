import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addToOutbox } from '@engram/memory-core/extraction/session-record';
import { PROJECTS_DIRNAME } from '@engram/memory-core/paths/memory-paths';
import { JOB_KINDS } from '@engram/queue/catalog';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { waitUntil } from '@engram/testkit/wait';
import { readReconcileRun } from '@engram/worker-service/operations';
import type { WorkerService } from '@engram/worker-service/service';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadAgentConfig } from '../config.js';
import { doctorCommand } from './doctor.js';
import type { Output } from './output.js';

// `engram doctor` on outboxes and the reconcile sweep, against real Redis and a worker service consuming every
// queue (so every other check passes and the exit code is the outbox's): ok with no backlog, exit 1 with an
// outbox older than the threshold, ok again when the threshold is raised.

const closer = new Closer();
let server: ModelServer;
let service: WorkerService;
let engramHome: string;
let namespace: string;

beforeAll(async () => {
  server = await startModelServer();
  engramHome = mkdtempSync(join(tmpdir(), 'engram-doctor-ops-'));
  namespace = uniquePrefix('doctor');
  service = await startTestWorkerService({
    modelUrl: server.url,
    engramHome,
    namespace,
    queues: JOB_KINDS.join(','),
    closer,
    env: { ENGRAM_RECONCILE_INTERVAL_MS: '500' },
  });
  await waitUntil(async () => (await readReconcileRun(service.engine.state)) !== undefined, 'a first sweep', {
    timeoutMs: 20_000,
  });
}, 60_000);
afterAll(async () => {
  await closer.closeAll();
  await server?.close();
});

function config() {
  return loadAgentConfig({
    HOME: engramHome,
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: namespace,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: server.url,
  });
}

async function doctor(opts: { outboxMaxAgeMs?: number } = {}) {
  const out: string[] = [];
  const io: Output = { out: (t) => out.push(t), err: (t) => out.push(t) };
  const code = await doctorCommand(config(), { json: false, ...opts }, io);
  const json: string[] = [];
  await doctorCommand(config(), { json: true, ...opts }, { out: (t) => json.push(t), err: () => {} });
  const report = JSON.parse(json.join('')) as {
    ok: boolean;
    checks: Array<{ ok: boolean; name: string; detail: string; fix?: string }>;
  };
  return { code, text: out.join('\n'), report };
}

describe('engram doctor: outboxes and the reconcile sweep', () => {
  it('passes with no backlog, fails on an outbox older than the threshold, passes under a larger one', async () => {
    const healthy = await doctor();
    expect(healthy.report.checks.filter((c) => !c.ok)).toEqual([]);
    expect(healthy.code).toBe(0);
    expect(healthy.text).toContain('ok    outboxes: empty (no memory work waiting to be queued)');
    expect(healthy.text).toMatch(/ok {4}reconcile: last sweep \d+ s ago ok \(\d+ sessions, .*; every 1 s\)/);

    // Memory work a foreground could not enqueue, for a session the sweep cannot hand over (no memory record).
    const sessionDir = join(engramHome, PROJECTS_DIRNAME, '-work-p', 'sess-stuck');
    mkdirSync(sessionDir, { recursive: true });
    await addToOutbox(sessionDir, {
      kind: 'extract',
      payload: { leafSeq: 2 },
      atMs: Date.now() - 25 * 60_000,
    });

    const stale = await doctor();
    expect(stale.code).toBe(1);
    expect(stale.report.ok).toBe(false);
    expect(stale.report.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual([
      'outboxes',
      'outbox -work-p/sess-stuck',
    ]);
    expect(stale.text).toMatch(
      /FAIL {2}outboxes: 1 item waiting in 1 outbox \(extract 1\), oldest 2[5-9] min; 1 older than 10 min\n {6}fix: the reconcile sweep hands outboxes to the queue/,
    );
    expect(stale.text).toMatch(
      /FAIL {2}outbox -work-p\/sess-stuck: 1 item \(extract\), oldest 2[5-9] min \(over 10 min\)/,
    );

    const lenient = await doctor({ outboxMaxAgeMs: 60 * 60_000 });
    expect(lenient.code).toBe(0);
    expect(lenient.text).toMatch(
      /ok {4}outboxes: 1 item waiting in 1 outbox \(extract 1\), oldest 2[5-9] min\n/,
    );
  }, 60_000);
});
