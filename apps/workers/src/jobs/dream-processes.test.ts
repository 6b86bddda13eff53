import { promises as fs, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engramPathsFor } from '@engram/memory-core/paths/memory-paths';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import { createQueueEngine, type QueueEngine } from '@engram/queue/engine';
import type { DreamPayload, DreamResult } from '@engram/queue/jobs/dream';
import { JobProducer } from '@engram/queue/producer';
import {
  lastConsolidatedAt,
  readConsolidationState,
  recordConsolidatedAt,
} from '@engram/queue/state/consolidation-lock';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { reply, type ScriptStep, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob, waitUntil } from '@engram/testkit/wait';
import {
  DREAM_SEED,
  isDreamRequest,
  seedDreamMemories,
  seedSessions,
} from '@engram/worker-service/jobs/dream.test-helpers';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import {
  assertWorkerBuilt,
  killWorkerProcess,
  spawnWorkerProcess,
} from '../testing/worker-process.test-helpers.js';

// Dreams across real worker processes (the built bin): two agents enqueueing at once with two workers
// consuming, and a worker killed (SIGKILL) mid-dream.

const DAY = 24 * 3_600_000;

beforeAll(assertWorkerBuilt);
const scripted = useModelServer();
const { closer } = scripted;

const spawnWorker = (env: Record<string, string>) => spawnWorkerProcess(env, closer);

function setup() {
  const engramHome = mkdtempSync(join(tmpdir(), 'engram-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'engram-project-'));
  const paths = engramPathsFor({ engramHome, cwd, projectRoot: cwd });
  const namespace = uniquePrefix('dreamproc');
  const engine = (profile: 'producer' | 'worker'): QueueEngine =>
    closer.add(
      createQueueEngine({
        config: { kind: 'redis', url: inject('redisUrl'), implicit: false },
        profile,
        namespace,
      }),
    );
  const env = {
    REDIS_URL: inject('redisUrl'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: namespace,
    ENGRAM_QUEUES: 'dream',
    ENGRAM_WORKERS_PORT: '0',
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: scripted.server.url,
    ENGRAM_MODEL_MAX_RETRIES: '0',
    LOG_LEVEL: 'warn',
  };
  const payload = (extra: Partial<DreamPayload> = {}): DreamPayload => ({
    projectDir: sanitizePath(cwd),
    transcriptDir: sanitizePath(cwd),
    sessionIds: [],
    force: false,
    requestedAt: new Date().toISOString(),
    ...extra,
  });
  return { engramHome, paths, project: sanitizePath(cwd), engine, env, payload };
}

describe('dream across worker processes', () => {
  it('two agents enqueue a dream for the same project at once, two workers consume: exactly one fork runs (dedup, then the lock)', async () => {
    const t = setup();
    seedDreamMemories(t.paths.memoryDir);
    seedSessions(t.paths.transcriptDir, ['s1', 's2', 's3', 's4', 's5'], Date.now() - 60_000);
    let forkRuns = 0;
    let slow = false;
    scripted.server.route(
      'dream',
      (r) => isDreamRequest(r.body),
      (r): ScriptStep => {
        if (r.body.messages.length === 1) forkRuns++;
        return textReply('Nothing needs to change.', { latencyMs: slow ? 1_500 : 600 });
      },
    );
    spawnWorker(t.env);
    spawnWorker(t.env);
    const agentA = closer.add(new JobProducer(t.engine('producer')));
    const agentB = closer.add(new JobProducer(t.engine('producer')));
    await Promise.all([
      agentA.enqueue('dream', t.payload({ triggeredBy: 'sA' })),
      agentB.enqueue('dream', t.payload({ triggeredBy: 'sB' })),
    ]);

    const queue = agentA.queue('dream');
    const settled = async () => {
      const c = await queue.getJobCounts(
        'waiting',
        'active',
        'delayed',
        'prioritized',
        'completed',
        'failed',
      );
      const pending = (c.waiting ?? 0) + (c.active ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0);
      return (c.completed ?? 0) >= 1 && pending === 0;
    };
    await waitUntil(settled, 'every dream job to finish', { timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 700));
    expect(await settled()).toBe(true);

    expect(forkRuns).toBe(1);
    const done = await queue.getJobs(['completed']);
    const outcomes = done.map((j) => (j.returnvalue as DreamResult).outcome).sort();
    expect(outcomes[0]).toBe('consolidated');
    expect(outcomes.slice(1).every((o) => o === 'skipped-not-due' || o === 'skipped-locked')).toBe(true);
    expect((await queue.getJobs(['failed'])).length).toBe(0);

    // Two forced jobs that bypass deduplication (added straight to the queue) run at the same time: the
    // consolidation lock lets one fork run; the other completes as skipped-locked, without a retry.
    slow = true;
    const before = forkRuns;
    const [x, y] = await Promise.all([
      queue.add('dream', t.payload({ force: true })),
      queue.add('dream', t.payload({ force: true })),
    ]);
    await waitUntil(
      async () =>
        (await queue.getJob(x.id!))?.finishedOn !== undefined &&
        (await queue.getJob(y.id!))?.finishedOn !== undefined,
      'both forced jobs to finish',
      { timeoutMs: 30_000 },
    );
    expect(forkRuns - before).toBe(1);
    const pair = await Promise.all([queue.getJob(x.id!), queue.getJob(y.id!)]);
    expect(pair.map((j) => (j?.returnvalue as DreamResult | undefined)?.outcome).sort()).toEqual([
      'consolidated',
      'skipped-locked',
    ]);
    expect(pair.map((j) => j?.attemptsMade)).toEqual([1, 1]);
  }, 30_000);

  it('a worker killed mid-dream: lock freed after its TTL with the time rolled back, and a retry completes', async () => {
    const t = setup();
    const mem = t.paths.memoryDir;
    seedDreamMemories(mem);
    seedSessions(t.paths.transcriptDir, ['s1', 's2', 's3', 's4', 's5'], Date.now() - 60_000);
    const prior = Date.now() - 3 * DAY;
    const state = t.engine('worker').state;
    await recordConsolidatedAt(state, t.project, prior);

    const merged = DREAM_SEED['user_role.md']!.replace(
      'Go backend developer.',
      'Go backend developer (since 2016).',
    );
    let attempts = 0;
    let hung = false;
    scripted.server.route(
      'dream',
      (r) => isDreamRequest(r.body),
      (r): ScriptStep => {
        const n = r.body.messages.length;
        if (n === 1) attempts++;
        if (attempts > 1) return textReply('Already consolidated; nothing else to change.');
        if (n === 1) return reply(toolUse('Read', { file_path: join(mem, 'user_role.md') }));
        if (n === 3)
          return reply(toolUse('Write', { file_path: join(mem, 'user_role.md'), content: merged }));
        hung = true;
        // The first worker hangs here, after its write landed, long enough to be killed.
        return textReply('Done.', { latencyMs: 20_000 });
      },
    );
    const env = {
      ...t.env,
      ENGRAM_LOCK_DURATION_MS: '1500',
      ENGRAM_STALLED_INTERVAL_MS: '500',
      ENGRAM_DREAM_LOCK_TTL_MS: '1500',
    };
    const a = spawnWorker(env);
    const producer = closer.add(new JobProducer(t.engine('producer')));
    const receipt = await producer.enqueue('dream', t.payload());
    await waitUntil(() => hung, 'the first worker to write and hang', { timeoutMs: 30_000 });
    const running = await readConsolidationState(state, t.project);
    expect(running.running?.holder).toMatch(/^dream:/);
    expect(running.lastConsolidatedAtMs).toBeGreaterThan(prior);

    await killWorkerProcess(a);
    // Nobody renews the lease now: within its TTL the lock is free and the time is back to the prior run's.
    await waitUntil(
      async () => (await readConsolidationState(state, t.project)).running === undefined,
      'the dead holder lease to expire',
      { timeoutMs: 10_000 },
    );
    expect(await lastConsolidatedAt(state, t.project)).toBe(prior);

    spawnWorker(env);
    const job = await waitForFinishedJob(producer.queue('dream'), receipt.jobId, 30_000);
    expect(await job.getState()).toBe('completed');
    const result = job.returnvalue as DreamResult;
    expect(result.outcome).toBe('consolidated');
    // Judged against the killed attempt's pre-run snapshot: its write is part of this consolidation.
    expect(result.files.updated).toEqual(['user_role.md']);
    expect(attempts).toBe(2);
    expect(await fs.readFile(join(mem, 'user_role.md'), 'utf8')).toBe(merged);
    const after = await readConsolidationState(state, t.project);
    expect(after.running).toBeUndefined();
    expect(after.lastConsolidatedAtMs).toBe(Date.parse(result.consolidatedAt!));
    expect(after.lastConsolidatedAtMs).toBeGreaterThan(prior);
  }, 45_000);
});
