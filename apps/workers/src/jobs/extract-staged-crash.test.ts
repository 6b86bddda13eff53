import { existsSync, promises as fs, readdirSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { openQueueEngine, type QueueEngine } from '@engram/queue/engine';
import type { ExtractResult } from '@engram/queue/jobs/extract';
import { JobProducer } from '@engram/queue/producer';
import { SessionState } from '@engram/queue/state/session-state';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { textReply } from '@engram/testkit/replies';
import { waitForFinishedJob, waitUntil } from '@engram/testkit/wait';
import { projectWriterLeaseKey } from '@engram/worker-service/jobs/extract';
import { WORKER_TEST_BACKENDS } from '@engram/worker-service/testing/backends.test-helpers';
import {
  createForeground,
  isExtractionRequest,
  scriptExtractionFork,
} from '@engram/worker-service/testing/foreground.test-helpers';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import {
  assertWorkerBuilt,
  extractWorkerEnv,
  killWorkerProcess,
  spawnWorkerProcess,
} from '../testing/worker-process.test-helpers.js';

// Staged extraction (ENGRAM_EXTRACT_STAGED) with real worker processes: a worker SIGKILLed after its fork wrote
// its private copy, while it waits for its commit turn (the test holds the project-writer lease, as a running
// consolidation would). Nothing was published; another worker recovers the job, re-forks on a fresh copy and
// commits: one memory, one pointer, cursor advanced.

beforeAll(assertWorkerBuilt);
const scripted = useModelServer();
const { closer } = scripted;

const MEMORY =
  '---\nname: Use pnpm\ndescription: The user wants pnpm, never npm\ntype: feedback\n---\nUse pnpm.\n';

/**
 * A TCP proxy to Redis that freezes the moment the staged commit's journal entry has gone through: the SET of an
 * `extract-commit:` key is forwarded (and answered), every later command of every connection is held back. The
 * worker behind it then writes its files and pointers (disk) and hangs on its cursor write: a kill there is a
 * kill between the journal and the cursor.
 */
async function freezingProxy(
  target: URL,
): Promise<{ url: string; frozen(): boolean; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let frozen = false;
  const journalSet = /\r\nset\r\n\$\d+\r\n[^\r\n]*extract-commit:/i;
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port) });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    let tail = '';
    client.on('data', (chunk: Buffer) => {
      if (frozen) return;
      const text = tail + chunk.toString('latin1');
      upstream.write(chunk);
      if (journalSet.test(text)) frozen = true;
      tail = text.slice(-512);
    });
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `redis://127.0.0.1:${port}${target.pathname}`,
    frozen: () => frozen,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

describe.each(WORKER_TEST_BACKENDS.filter(([kind]) => kind === 'redis'))(
  'staged crash safety on %s',
  (_k, backend) => {
    it('a staged worker killed before its commit: nothing published; the retry commits the fact once', async () => {
      const fg = createForeground(scripted.server);
      scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('pnpm it is.')]);
      let forkRuns = 0;
      let secondTurns = 0;
      // Each fork's copy (the fork itself is told the live path; its tools map it onto the copy).
      const dirs: string[] = [];
      scriptExtractionFork(
        scripted.server,
        (dir) => {
          forkRuns++;
          // The instruction names the live directory (the alias maps it onto the job's copy): find the copy.
          const copies = readdirSync(join(dir, '.staging'));
          dirs.push(copies.length === 1 ? join(dir, '.staging', copies[0]!) : `${copies.length} copies`);
          return { file: 'feedback_pnpm.md', content: MEMORY };
        },
        {
          after: () => {
            secondTurns++;
            return textReply('Saved.');
          },
        },
      );
      const leaf = await fg.turn('always use pnpm in this repo, never npm');
      const payload = fg.extractPayload(leaf);
      const namespace = uniquePrefix('staged-crash');
      backend.cleanUpAfter(namespace, closer);
      const env = extractWorkerEnv(
        { engramHome: fg.engramHome, namespace, modelUrl: scripted.server.url },
        { ...backend.env(), ENGRAM_EXTRACT_STAGED: '1' },
      );
      const engine: QueueEngine = closer.add(
        await openQueueEngine({ config: backend.config(), profile: 'worker', namespace }),
      );
      const producer = closer.add(new JobProducer(engine));
      // The project's writer lease is busy (a consolidation, say): the staged fork runs, its commit waits.
      const leaseKey = projectWriterLeaseKey(payload);
      const held = await engine.state.acquireLease(leaseKey, 'test-holder', 60_000);
      expect(held).toBeDefined();

      const a = spawnWorkerProcess(env, closer);
      const receipt = await producer.enqueue('extract', payload);
      await waitUntil(() => secondTurns === 1, 'the first fork to finish', { timeoutMs: 30_000 });
      // Its copy holds the memory; the live directory has nothing of it.
      await waitUntil(() => existsSync(join(dirs[0]!, 'feedback_pnpm.md')), 'the copy written', {
        timeoutMs: 10_000,
      });
      expect(dirs[0]!.startsWith(join(fg.paths.memoryDir, '.staging'))).toBe(true);
      await new Promise((r) => setTimeout(r, 300));
      expect(existsSync(join(fg.paths.memoryDir, 'feedback_pnpm.md'))).toBe(false);

      spawnWorkerProcess(env, closer);
      await killWorkerProcess(a);
      await engine.state.releaseLease(leaseKey, 'test-holder', held!.token);

      const job = await waitForFinishedJob(producer.queue('extract'), receipt.jobId, 30_000);
      expect(await job.getState()).toBe('completed');
      const result = job.returnvalue as ExtractResult | undefined;
      expect(result?.outcome).toBe('extracted');
      expect(result?.memories.map((m) => m.path)).toEqual(['feedback_pnpm.md']);
      expect(forkRuns).toBe(2);
      expect(dirs[1]).not.toBe(dirs[0]);

      const visible = readdirSync(fg.paths.memoryDir)
        .filter((n) => !n.startsWith('.'))
        .sort();
      expect(visible).toEqual(['MEMORY.md', 'feedback_pnpm.md']);
      const index = await fs.readFile(fg.paths.memoryIndexPath, 'utf8');
      expect(parseIndexEntries(index).filter((e) => e.file === 'feedback_pnpm.md')).toHaveLength(1);
      // Both copies are gone: the recovering attempt's after its commit, the killed one's at the retry's start.
      expect(existsSync(dirs[1]!)).toBe(false);
      expect(existsSync(dirs[0]!)).toBe(false);
      expect(readdirSync(join(fg.paths.memoryDir, '.staging'))).toEqual([]);
      const state = new SessionState(engine.state, payload);
      expect(await state.extractCursor()).toEqual({ leafUuid: leaf.leafUuid, leafSeq: leaf.leafSeq });
    }, 90_000);

    it('a staged worker killed mid-commit (journal stored, files written, cursor not moved): the retry completes it from the journal without a second fork', async () => {
      const fg = createForeground(scripted.server);
      scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('pnpm it is.')]);
      let forkRuns = 0;
      scriptExtractionFork(scripted.server, () => {
        forkRuns++;
        return { file: 'feedback_pnpm.md', content: MEMORY };
      });
      const leaf = await fg.turn('always use pnpm in this repo, never npm');
      const payload = fg.extractPayload(leaf);
      const namespace = uniquePrefix('staged-midcommit');
      backend.cleanUpAfter(namespace, closer);
      const proxy = await freezingProxy(new URL(inject('redisUrl')));
      closer.defer(() => proxy.close());
      const env = extractWorkerEnv(
        { engramHome: fg.engramHome, namespace, modelUrl: scripted.server.url },
        { ENGRAM_EXTRACT_STAGED: '1' },
      );
      const engine: QueueEngine = closer.add(
        await openQueueEngine({ config: backend.config(), profile: 'worker', namespace }),
      );
      const producer = closer.add(new JobProducer(engine));
      const a = spawnWorkerProcess({ ...env, REDIS_URL: proxy.url }, closer);
      const receipt = await producer.enqueue('extract', payload);
      const state = new SessionState(engine.state, payload);
      await waitUntil(
        async () =>
          proxy.frozen() &&
          (await fs.readFile(fg.paths.memoryIndexPath, 'utf8').catch(() => '')).includes('feedback_pnpm.md'),
        'the commit to write its files and hang before the cursor',
        { timeoutMs: 30_000, ignoreErrors: true },
      );
      await new Promise((r) => setTimeout(r, 300));
      expect(await state.extractCursor()).toBeUndefined();

      await killWorkerProcess(a);
      spawnWorkerProcess({ ...env, ...backend.env() }, closer);

      const job = await waitForFinishedJob(producer.queue('extract'), receipt.jobId, 30_000);
      expect(await job.getState()).toBe('completed');
      const result = job.returnvalue as ExtractResult | undefined;
      expect(result?.outcome).toBe('extracted');
      // Credited once, from the journal: the roll-forward found the file at its committed hash.
      expect(result?.memories).toEqual([{ path: 'feedback_pnpm.md', type: 'feedback', action: 'created' }]);
      expect(forkRuns).toBe(1);
      const visible = readdirSync(fg.paths.memoryDir)
        .filter((n) => !n.startsWith('.'))
        .sort();
      expect(visible).toEqual(['MEMORY.md', 'feedback_pnpm.md']);
      const index = await fs.readFile(fg.paths.memoryIndexPath, 'utf8');
      expect(parseIndexEntries(index).filter((e) => e.file === 'feedback_pnpm.md')).toHaveLength(1);
      expect(readdirSync(join(fg.paths.memoryDir, '.staging'))).toEqual([]);
      expect(await state.extractCursor()).toEqual({ leafUuid: leaf.leafUuid, leafSeq: leaf.leafSeq });
    }, 90_000);
  },
);
