import { existsSync, promises as fs, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import { outboxPath } from '@engram/memory-core/extraction/session-record';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { tenantHomeDir } from '@engram/tenants/tenant-store';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { startPrivateRedis } from '@engram/testkit/private-redis';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitUntil } from '@engram/testkit/wait';
import {
  createForeground,
  type ForegroundSession,
  isExtractionRequest,
  lastUserText,
} from '@engram/worker-service/testing/foreground.test-helpers';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { describe, expect, it } from 'vitest';
import { loadAgentConfig } from '../config.js';

// Nothing lost when the engine is away: turns that end while Redis is down keep their memory work in the
// session's outbox, and the work reaches the disk once Redis is back; a purged queue converges through the
// reconciliation sweep (a BullMQ job scheduler), which never extracts a covered range again.

const scripted = useModelServer();
const { closer } = scripted;

const MEMORY = (n: number) =>
  `---\nname: Fact ${n}\ndescription: The fact of session ${n}\ntype: project\n---\nFact ${n}.\n`;

/** Each session's extraction saves its own fact into its project's memory; counts fork runs per directory. */
function scriptModel(forkRuns: Map<string, number>) {
  scripted.server.route(
    'parent',
    (r) => !isExtractionRequest(r.body),
    (r) => textReply(`ok ${r.index}`),
    { sticky: true },
  );
  scripted.server.route(
    'extract',
    (r) => isExtractionRequest(r.body),
    (r): ScriptStep => {
      const instruction = lastUserText(r.body);
      if (!instruction.includes('You are now the memory extraction subagent')) return textReply('Saved.');
      const memoryDir = /the memory directory `([^`]+)`/.exec(instruction)?.[1];
      if (!memoryDir) throw new Error('no memory directory in the instruction');
      const n = (forkRuns.get(memoryDir) ?? 0) + 1;
      forkRuns.set(memoryDir, n);
      return reply(
        text('Saving.'),
        toolUse('Write', { file_path: join(memoryDir, `project_fact_${n}.md`), content: MEMORY(n) }),
      );
    },
    { sticky: true },
  );
}

/** Persistent, so a restart keeps the jobs. */
const privateRedis = () => startPrivateRedis(closer, { prefix: 'engram-outbox-redis-', persist: true });

function agentQueue(engramHome: string, redisUrl: string, namespace: string): MemoryQueue {
  const memory = new MemoryQueue(
    loadAgentConfig({
      HOME: engramHome,
      ENGRAM_HOME: engramHome,
      ENGRAM_NAMESPACE: namespace,
      REDIS_URL: redisUrl,
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: scripted.server.url,
      ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
    }),
  );
  closer.defer(() => memory.close());
  return memory;
}

/** Memory files with their index pointer (the extraction finished). */
async function saved(fg: ForegroundSession): Promise<string[]> {
  const index = await fs.readFile(fg.paths.memoryIndexPath, 'utf8').catch(() => '');
  return parseIndexEntries(index).map((e) => e.file);
}

async function memoriesOf(fg: ForegroundSession): Promise<string[]> {
  if (!existsSync(fg.paths.memoryDir)) return [];
  return readdirSync(fg.paths.memoryDir).filter((f) => f.endsWith('.md') && f !== 'MEMORY.md');
}

describe('memory work when the engine is away', () => {
  it('turns that end while Redis is down: work kept in the outbox, on disk after Redis is back', async () => {
    const forkRuns = new Map<string, number>();
    scriptModel(forkRuns);
    const redis = await privateRedis();
    const engramHome = mkdtempSync(join(tmpdir(), 'engram-outbox-home-'));
    const namespace = uniquePrefix('outbox');
    await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome,
      queues: 'extract,reconcile',
      closer,
      backendEnv: { REDIS_URL: redis.url },
      namespace,
      env: { ENGRAM_RECONCILE_INTERVAL_MS: '500', ENGRAM_RECONCILE_QUIET_MS: '200' },
    });
    const memory = agentQueue(engramHome, redis.url, namespace);
    const sessions = await Promise.all(
      Array.from({ length: 4 }, async (_, i) => {
        const fg = createForeground(scripted.server, { engramHome });
        return { fg, leaf: await fg.turn(`turn ${i}: remember this fact please`) };
      }),
    );

    await redis.stop();
    for (const { fg, leaf } of sessions) {
      const status = await memory.afterTurn(
        { sessionId: fg.sessionId, paths: fg.paths },
        leaf.newEntries,
        leaf,
      );
      expect(status).toMatchObject({ status: 'not-queued', kept: true });
      expect(existsSync(outboxPath(fg.paths.sessionDir(fg.sessionId)))).toBe(true);
    }
    await redis.start();

    for (const { fg } of sessions) {
      await waitUntil(async () => (await saved(fg)).length === 1, `memory of ${fg.sessionId}`, {
        timeoutMs: 45_000,
        ignoreErrors: true,
      });
    }
    for (const { fg } of sessions) {
      expect(await memoriesOf(fg)).toEqual(['project_fact_1.md']);
      const index = await fs.readFile(fg.paths.memoryIndexPath, 'utf8');
      expect(parseIndexEntries(index).map((e) => e.file)).toEqual(['project_fact_1.md']);
      await waitUntil(() => !existsSync(outboxPath(fg.paths.sessionDir(fg.sessionId))), 'outbox drained', {
        timeoutMs: 15_000,
      });
    }
    expect([...forkRuns.values()]).toEqual([1, 1, 1, 1]);
  }, 90_000);

  it("a hosted tenant's kept work lands in the tenant's area, where the sweep looks, never at ENGRAM_HOME's root", async () => {
    const engramHome = mkdtempSync(join(tmpdir(), 'engram-tenant-outbox-'));
    // An engine that never answers: every enqueue fails retryably and is kept.
    const memory = agentQueue(engramHome, 'redis://127.0.0.1:1', uniquePrefix('tenant-outbox'));
    const payload = (tenant?: string) => ({
      sessionId: 'sess1',
      projectDir: '-repo',
      transcriptDir: '-repo',
      leafUuid: '00000000-0000-4000-8000-000000000001',
      leafSeq: 2,
      requestedAt: new Date().toISOString(),
      ...(tenant ? { tenant } : {}),
    });
    const kept = await memory.enqueue('extract', payload('acme'));
    expect(kept).toMatchObject({ status: 'not-queued', kept: true });
    const tenantDir = join(tenantHomeDir(engramHome, 'acme'), 'projects', '-repo', 'sess1');
    expect(JSON.parse(await fs.readFile(outboxPath(tenantDir), 'utf8'))).toMatchObject({
      items: [{ kind: 'extract', payload: { tenant: 'acme', sessionId: 'sess1' } }],
    });
    const rootDir = join(engramHome, 'projects', '-repo', 'sess1');
    expect(existsSync(outboxPath(rootDir))).toBe(false);
    // Positive control: the operator's own (tenant-less) session keeps its work at the root.
    await memory.enqueue('extract', payload());
    expect(existsSync(outboxPath(rootDir))).toBe(true);
  });

  it('a purged queue converges through the reconciliation sweep, without extracting a covered range again', async () => {
    const forkRuns = new Map<string, number>();
    scriptModel(forkRuns);
    const redis = await privateRedis();
    const engramHome = mkdtempSync(join(tmpdir(), 'engram-purge-home-'));
    const namespace = uniquePrefix('purge');
    const memory = agentQueue(engramHome, redis.url, namespace);
    const sessions = await Promise.all(
      Array.from({ length: 3 }, async (_, i) => {
        const fg = createForeground(scripted.server, { engramHome });
        return { fg, leaf: await fg.turn(`turn ${i}: remember this fact please`) };
      }),
    );
    for (const { fg, leaf } of sessions) {
      const status = await memory.afterTurn(
        { sessionId: fg.sessionId, paths: fg.paths },
        leaf.newEntries,
        leaf,
      );
      expect(status.status).toBe('queued');
    }
    // The queue loses every job before any worker saw it.
    await memory.producer.queue('extract').obliterate({ force: true });
    expect(await memory.producer.queue('extract').getJobCounts('waiting', 'delayed')).toEqual({
      waiting: 0,
      delayed: 0,
    });

    const service = await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome,
      queues: 'extract,reconcile',
      closer,
      backendEnv: { REDIS_URL: redis.url },
      namespace,
      env: { ENGRAM_RECONCILE_INTERVAL_MS: '400', ENGRAM_RECONCILE_QUIET_MS: '100' },
    });
    for (const { fg } of sessions) {
      await waitUntil(async () => (await saved(fg)).length === 1, `memory of ${fg.sessionId}`, {
        timeoutMs: 45_000,
        ignoreErrors: true,
      });
    }
    // Several more sweeps run: every session is covered now, so none is extracted again.
    const reconcile = memory.producer.queue('reconcile');
    const sweeps = (await reconcile.getJobCounts('completed')).completed ?? 0;
    await waitUntil(
      async () => ((await reconcile.getJobCounts('completed')).completed ?? 0) >= Math.min(sweeps + 3, 20),
      'three more sweeps',
      { timeoutMs: 30_000 },
    );
    for (const { fg } of sessions) expect(await memoriesOf(fg)).toEqual(['project_fact_1.md']);
    expect([...forkRuns.values()]).toEqual([1, 1, 1]);
    expect(service.workers.has('reconcile')).toBe(true);
  }, 90_000);
});
