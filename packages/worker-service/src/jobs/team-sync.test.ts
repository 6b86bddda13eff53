import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engramPathsFromDirNames } from '@engram/memory-core/paths/memory-paths';
import type { TeamSyncPayload, TeamSyncResult } from '@engram/queue/jobs/team-sync';
import { JobProducer } from '@engram/queue/producer';
import { holdLeaseInTurn } from '@engram/queue/state/held-lease';
import { ProjectChanges, projectChangesScope } from '@engram/queue/state/project-changes';
import {
  startTeamMemoryTestServer,
  type TeamMemoryTestServer,
} from '@engram/team-memory/testing/server.test-helpers';
import { Closer } from '@engram/testkit/bullmq-helpers';
import { waitForFinishedJob } from '@engram/testkit/wait';
import type { Job } from 'bullmq';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createHandlers } from '../handlers.js';
import { startWorkerService, type WorkerService } from '../service.js';
import { testWorkersConfig } from '../testing/service.test-helpers.js';
import { projectWriterLeaseKey } from './extract.js';

// team-sync jobs end to end: real BullMQ on the run's Redis, the worker service with its production handlers,
// and the real team memory service on embedded PostgreSQL. Two ENGRAM_HOMEs stand for two machines.

const PROJECT = '-work-widgets';
const REPO = 'acme/widgets';
// A GitHub PAT shape from the scanner's families, assembled so this file does not itself look like one.
const FAKE_PAT = ['ghp', 'R8f2kQ9xLm4Tz7Vb1Nc6Hd3Ws5Pa0Ye2Ju8K'].join('_');

let server: TeamMemoryTestServer;
let apiKey: string;
const closer = new Closer();
beforeAll(async () => {
  server = await startTeamMemoryTestServer({ postgresUrl: inject('postgresUrl') });
  apiKey = await server.issueKey('acme-tenant');
});
afterEach(async () => closer.closeAll());
afterAll(async () => server?.close());

interface Machine {
  home: string;
  teamDir: string;
  service: WorkerService;
  producer: JobProducer;
  logs: string[];
  run(action: 'pull' | 'push', extra?: Partial<TeamSyncPayload>): Promise<Job>;
}

async function machine(name: string, repo = REPO): Promise<Machine> {
  const home = mkdtempSync(join(tmpdir(), `engram-team-${name}-`));
  closer.defer(async () => rmSync(home, { recursive: true, force: true }));
  const { teamDir } = engramPathsFromDirNames({
    engramHome: home,
    projectDirName: PROJECT,
    transcriptDirName: PROJECT,
  });
  mkdirSync(teamDir, { recursive: true });
  const logs: string[] = [];
  const config = testWorkersConfig({
    modelUrl: 'http://127.0.0.1:9',
    engramHome: home,
    queues: 'team-sync',
    env: { ENGRAM_TEAM_SYNC_URL: server.url, ENGRAM_TEAM_SYNC_KEY: apiKey },
  });
  const service = await startWorkerService({
    config,
    logger: pino({ level: 'info' }, { write: (line: string) => logs.push(line) }),
    handlers: createHandlers,
    http: false,
  });
  const producer = new JobProducer(service.engine);
  closer.defer(async () => {
    await producer.close();
    await service.stop('test');
  });
  return {
    home,
    teamDir,
    service,
    producer,
    logs,
    run: async (action, extra = {}) => {
      const { jobId } = await producer.enqueue('team-sync', {
        projectDir: PROJECT,
        transcriptDir: PROJECT,
        repo,
        action,
        reason: 'manual',
        debounceMs: 0,
        requestedAt: new Date().toISOString(),
        ...extra,
      });
      return waitForFinishedJob(producer.queue('team-sync'), jobId);
    },
  };
}

const put = (m: Machine, key: string, content: string) => {
  mkdirSync(join(m.teamDir, key, '..'), { recursive: true });
  writeFileSync(join(m.teamDir, key), content);
};
const result = (job: Job) => job.returnvalue as TeamSyncResult;

async function metric(service: WorkerService, name: string, labels: Record<string, string>): Promise<number> {
  const m = (await service.metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  const value = m?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return Number(value?.value ?? 0);
}

describe('team-sync jobs', () => {
  it('two machines converge through the service; a local delete comes back on pull', async () => {
    const a = await machine('a');
    const b = await machine('b');
    put(a, 'x.md', '---\nname: deploy\n---\nDeploys go through the blue pipeline.\n');

    const pushed = await a.run('push');
    expect(pushed.failedReason).toBeUndefined();
    expect(result(pushed)).toMatchObject({ action: 'push', outcome: 'pushed', pushed: ['x.md'] });

    const pulled = await b.run('pull');
    expect(result(pulled)).toMatchObject({
      outcome: 'pulled',
      written: [{ key: 'x.md', change: 'created' }],
    });
    expect(readFileSync(join(b.teamDir, 'x.md'), 'utf8')).toContain('blue pipeline');
    // Every session of b's project hears of the pulled file (the foreground's notice reads this feed); a
    // push records nothing.
    const feed = new ProjectChanges(b.service.engine.state, projectChangesScope({ projectDir: PROJECT }));
    expect((await feed.since({})).changes).toMatchObject([
      { source: 'team-pull', memories: [{ path: 'team/x.md', action: 'created' }] },
    ]);
    expect(
      (
        await new ProjectChanges(a.service.engine.state, projectChangesScope({ projectDir: PROJECT })).since(
          {},
        )
      ).changes,
    ).toEqual([]);

    put(b, 'x.md', '---\nname: deploy\n---\nDeploys go through the green pipeline.\n');
    expect(result(await b.run('push'))).toMatchObject({ outcome: 'pushed', pushed: ['x.md'] });
    expect(result(await a.run('pull'))).toMatchObject({ written: [{ key: 'x.md', change: 'updated' }] });
    expect(readFileSync(join(a.teamDir, 'x.md'), 'utf8')).toContain('green pipeline');

    rmSync(join(a.teamDir, 'x.md'));
    expect(result(await a.run('push'))).toMatchObject({ outcome: 'up-to-date', pushed: [] });
    expect(result(await a.run('pull'))).toMatchObject({ written: [{ key: 'x.md', change: 'restored' }] });
    expect(readFileSync(join(a.teamDir, 'x.md'), 'utf8')).toContain('green pipeline');

    expect(
      await metric(a.service, 'engram_team_sync_entries_total', { direction: 'push', outcome: 'pushed' }),
    ).toBe(1);
    expect(
      await metric(a.service, 'engram_team_sync_entries_total', { direction: 'pull', outcome: 'written' }),
    ).toBe(2);
    expect(await metric(a.service, 'engram_team_sync_bytes_total', { direction: 'push' })).toBeGreaterThan(0);
  });

  it('a pull waits in line for the project-writer lease like every memory writer', async () => {
    const repo = 'acme/lease';
    const a = await machine('a', repo);
    const b = await machine('b', repo);
    put(a, 'y.md', 'shared fact\n');
    await a.run('push');
    // Another memory writer of B's project (an extraction, say) holds the lease.
    const key = projectWriterLeaseKey({ projectDir: PROJECT });
    const busy = await holdLeaseInTurn(b.service.engine.state, key, {
      ttlMs: 2_000,
      holder: 'extract:someone-else',
      reserveMs: 5_000,
      waiterTtlMs: 60_000,
    });
    expect(busy.held).toBeDefined();
    const { jobId } = await b.producer.enqueue('team-sync', {
      projectDir: PROJECT,
      transcriptDir: PROJECT,
      repo,
      action: 'pull',
      reason: 'manual',
      debounceMs: 0,
      requestedAt: new Date().toISOString(),
    });
    const queue = b.producer.queue('team-sync');
    // The pull parks (delayed, no attempt spent) behind the holder and writes nothing meanwhile.
    for (let i = 0; i < 200 && (await (await queue.getJob(jobId))?.getState()) !== 'delayed'; i++)
      await new Promise((r) => setTimeout(r, 25));
    expect(await (await queue.getJob(jobId))?.getState()).toBe('delayed');
    expect(existsSync(join(b.teamDir, 'y.md'))).toBe(false);
    const handed = await busy.held!.release();
    expect(handed.next).toBe(`team-sync:${jobId}`);
    const done = await waitForFinishedJob(queue, jobId);
    expect(result(done)).toMatchObject({ outcome: 'pulled', written: [{ key: 'y.md', change: 'created' }] });
    expect(done.attemptsMade).toBeLessThanOrEqual(1);
    expect(await b.service.engine.state.getLease(key)).toBeUndefined();
  });

  it('concurrent pushes from the same base: one 412, retried, both changes present', async () => {
    const repo = 'acme/race';
    const a = await machine('a', repo);
    const b = await machine('b', repo);
    put(a, 'base.md', 'base\n');
    await a.run('push');
    await b.run('pull');
    put(a, 'from-a.md', 'a\n');
    put(b, 'from-b.md', 'b\n');
    server.requests.length = 0;
    const [ja, jb] = await Promise.all([a.run('push'), b.run('push')]);
    expect([result(ja).outcome, result(jb).outcome]).toEqual(['pushed', 'pushed']);
    expect(result(ja).conflicts + result(jb).conflicts).toBe(1);
    expect(server.requests.filter((r) => r.status === 412)).toHaveLength(1);
    const conflicts =
      (await metric(a.service, 'engram_team_sync_conflicts_total', { direction: 'push' })) +
      (await metric(b.service, 'engram_team_sync_conflicts_total', { direction: 'push' }));
    expect(conflicts).toBe(1);
    expect(Object.keys((await server.store.get('acme-tenant', repo))!.entries).sort()).toEqual([
      'base.md',
      'from-a.md',
      'from-b.md',
    ]);
  });

  it('a file with a secret never reaches the service; the log names the rule, never the value', async () => {
    const repo = 'acme/secrets';
    const a = await machine('a', repo);
    put(a, 'ok.md', 'The deploy key is in the team vault.\n');
    put(a, 'leak.md', `use ${FAKE_PAT} for the API\n`);
    const job = await a.run('push');
    expect(result(job)).toMatchObject({
      outcome: 'pushed',
      pushed: ['ok.md'],
      skipped: [{ key: 'leak.md', reason: 'secret', ruleId: 'github-pat' }],
    });
    expect(JSON.stringify(job.returnvalue)).not.toContain(FAKE_PAT);
    const stored = (await server.store.get('acme-tenant', repo))!;
    expect(Object.keys(stored.entries)).toEqual(['ok.md']);
    const logLines = a.logs.join('');
    expect(logLines).toContain('"ruleId":"github-pat"');
    expect(logLines).toContain('"key":"leak.md"');
    expect(logLines).not.toContain(FAKE_PAT);
    expect(
      await metric(a.service, 'engram_team_sync_skipped_total', { direction: 'push', reason: 'secret' }),
    ).toBe(1);
  });

  it('a permanent refusal fails the job at once (no retries) and suppresses the next push', async () => {
    const a = await machine('a', 'acme/refused');
    put(a, 'x.md', 'x');
    expect(result(await a.run('push')).outcome).toBe('pushed');
    // The tenant's key is revoked: every request now gets 401, which no retry can fix.
    await server.pool.query(`DELETE FROM "${server.schema}".api_keys`);
    try {
      put(a, 'x.md', 'x changed');
      const refused = await a.run('push');
      expect(refused.failedReason).toContain('401');
      expect(refused.attemptsMade).toBe(1);
      // Until a team file changes, pushes do not call the service again.
      server.requests.length = 0;
      expect(result(await a.run('push')).outcome).toBe('suppressed');
      expect(server.requests).toHaveLength(0);
    } finally {
      apiKey = await server.issueKey('acme-tenant');
    }
  });

  it('writes in quick succession coalesce into one debounced push', async () => {
    const a = await machine('a', 'acme/debounce');
    put(a, 'one.md', '1');
    const request = () =>
      a.producer.enqueue('team-sync', {
        projectDir: PROJECT,
        transcriptDir: PROJECT,
        repo: 'acme/debounce',
        action: 'push',
        reason: 'write',
        debounceMs: 400,
        requestedAt: new Date().toISOString(),
      });
    const first = await request();
    put(a, 'two.md', '2');
    const second = await request();
    put(a, 'three.md', '3');
    const third = await request();
    expect(new Set([first.jobId, second.jobId, third.jobId]).size).toBe(1);
    const job = await waitForFinishedJob(a.producer.queue('team-sync'), first.jobId);
    expect(result(job).pushed).toEqual(['one.md', 'three.md', 'two.md']);
    expect(existsSync(join(a.home, 'projects', PROJECT, 'team-sync.json'))).toBe(true);
  });
});
