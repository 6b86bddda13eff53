import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JOB_CATALOG, JOB_KINDS } from '@engram/queue/catalog';
import { playgroundResponder } from '@engram/scripted-model/playground';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { startPrivateRedis } from '@engram/testkit/private-redis';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, engram } from './cli.test-helpers.js';

// Issue 27, Done when: "no state key without TTL after a session ends". A whole session on its own Redis —
// turns through the built CLI (recall, extraction, the session-memory and dream gates), the worker service
// consuming every queue but team sync (no team service here) — then it ends, and every key of the namespace
// either expires or is one of the bounded keys docs/memory-work.md lists ("State keys and their bounds").

let model: ModelServer;
const closer = new Closer();
beforeAll(async () => {
  assertBuilt();
  model = await startModelServer({ fallback: playgroundResponder() });
});
afterAll(async () => {
  await closer.closeAll();
  await model.close();
});

/**
 * Keys without a TTL that are bounded by construction (docs/memory-work.md, "State keys and their bounds"), as
 * patterns after the namespace. Engram's: one per fleet (the last sweep, the workers' model), one per tenant
 * (its cost ledger, kept by design), one per project (when it was last consolidated: the 24 h gate). BullMQ's
 * per-queue structure: a fixed set of keys per queue (meta, id counter, the events stream capped by
 * `eventsMaxLen`, the job sets whose members removeOnComplete / removeOnFail trim by age and count), each
 * retained job's hash (removed with it; a scheduled reconcile run's id is `repeat:<scheduler>:<time>`), and the
 * reconcile queue's one job scheduler.
 */
const QUEUES = JOB_KINDS.map((k) => JOB_CATALOG[k].queue).join('|');
const BOUNDED: RegExp[] = [
  /^engram:reconcile:last-run$/,
  /^engram:workers:model$/,
  /^engram:counters:cost:[^:]+$/,
  /^engram:consolidation:[^:]+:last$/,
  new RegExp(
    `^(${QUEUES}):(meta|id|events|stalled-check|marker|wait|paused|active|prioritized|delayed|completed|failed|waiting-children|pc|limiter|repeat)$`,
  ),
  new RegExp(`^(${QUEUES}):repeat:engram-reconcile$`),
  new RegExp(`^(${QUEUES}):(repeat:engram-reconcile:\\d+|[^:]+)(:logs)?$`),
];

describe('state keys after a session ends', () => {
  it('every key of the namespace has a TTL or is a documented bounded key', async () => {
    const redis = await startPrivateRedis(closer, { prefix: 'engram-ttl-redis-' });
    const home = mkdtempSync(join(tmpdir(), 'engram-ttl-home-'));
    const cwd = mkdtempSync(join(tmpdir(), 'engram-ttl-project-'));
    const namespace = uniquePrefix('ttl');
    const service = await startTestWorkerService({
      modelUrl: model.url,
      engramHome: home,
      queues: JOB_KINDS.filter((k) => k !== 'team-sync').join(','),
      backendEnv: { REDIS_URL: redis.url },
      namespace,
      env: { ENGRAM_RECONCILE_INTERVAL_MS: '500', ENGRAM_RECONCILE_QUIET_MS: '200' },
    });
    const env = {
      PATH: process.env.PATH,
      HOME: home,
      ENGRAM_HOME: home,
      ENGRAM_NAMESPACE: namespace,
      REDIS_URL: redis.url,
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: model.url,
      ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
      ENGRAM_DRAIN_TIMEOUT_MS: '20000',
    };
    const session = '7b0e4c52-35c4-4a53-9f4e-2f7d8c1a0b11';
    const prompts = ['Always use pnpm here, never npm.', 'Should I use npm or pnpm here?', 'Thanks, noted.'];
    for (const prompt of prompts) {
      const run = await engram(
        ['run', '-p', prompt, '--cwd', cwd, '--session', session, '--output-format', 'json'],
        { env, timeoutMs: 60_000 },
      );
      expect(run.code, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout).memory.status).toBe('done');
    }
    // A consolidation of the project too (its per-project keys), then the sweep over the idle session.
    const dream = await engram(['dream', '--force', '--cwd', cwd], { env, timeoutMs: 60_000 });
    expect(dream.code, dream.stderr).toBe(0);
    // The sweep has run over the idle session at least once.
    await new Promise((r) => setTimeout(r, 1_500));
    await service.stop('test');

    const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    closer.defer(async () => {
      client.disconnect();
    });
    const keys = (await client.keys(`${namespace}:*`)).sort();
    expect(keys.length).toBeGreaterThan(0);
    const unbounded: string[] = [];
    const bounded: string[] = [];
    for (const key of keys) {
      const ttl = await client.pttl(key);
      if (ttl > 0) continue;
      const rest = key.slice(namespace.length + 1);
      (BOUNDED.some((p) => p.test(rest)) ? bounded : unbounded).push(rest);
    }
    // Positive control: state keys of this session exist and carry a TTL (the check sees them).
    const withTtl = [];
    for (const key of keys) if ((await client.pttl(key)) > 0) withTtl.push(key.slice(namespace.length + 1));
    expect(withTtl.length, JSON.stringify({ keys })).toBeGreaterThan(0);
    expect(unbounded, JSON.stringify({ withTtl, bounded })).toEqual([]);
    // The consolidation left its per-project record (bounded: one per project).
    expect(
      bounded.filter((k) => k.startsWith('engram:consolidation:')),
      bounded.join(' '),
    ).toHaveLength(1);
    // The per-session state of this session is among the keys that expire.
    expect(
      withTtl.some((k) => k.includes(session) && k.includes('extract-cursor')),
      withTtl.join(' '),
    ).toBe(true);
  }, 180_000);
});
