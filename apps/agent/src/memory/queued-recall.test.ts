import { promises as fs, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import { awaitRecall } from '@engram/memory-client/queued-recall';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { jsonReply } from '@engram/testkit/replies';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { describe, expect, inject, it } from 'vitest';
import { loadAgentConfig } from '../config.js';

// awaitRecall on a real Redis with a real recall worker and the scripted selector: the same session's same
// prompt, asked twice at once with `reuse`, runs one recall job (one selector request) and both get its answer;
// another prompt starts its own; with the queue down it answers "not queued" at once.

const scripted = useModelServer();
const SMALL_MODEL = 'small-test-model';

async function setup(redisUrl: string) {
  const home = mkdtempSync(join(tmpdir(), 'engram-queued-recall-'));
  const repo = mkdtempSync(join(tmpdir(), 'engram-queued-recall-repo-'));
  await fs.mkdir(join(repo, '.git'));
  const paths = await resolveEngramPaths({ engramHome: home, cwd: repo });
  await fs.mkdir(paths.memoryDir, { recursive: true });
  await fs.writeFile(
    join(paths.memoryDir, 'project_deploy.md'),
    '---\nname: deploy-region\ndescription: Deploys go to region ams\ntype: project\n---\nWe deploy to ams.\n',
  );
  const namespace = uniquePrefix('qrecall');
  const config = loadAgentConfig({
    HOME: home,
    ENGRAM_HOME: home,
    ENGRAM_NAMESPACE: namespace,
    REDIS_URL: redisUrl,
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: scripted.server.url,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
    ENGRAM_ENQUEUE_TIMEOUT_MS: '1000',
  });
  return { home, paths, namespace, config };
}

describe('awaitRecall', () => {
  it('reuses the recall another caller started for the same session and prompt', async () => {
    const selections: string[] = [];
    scripted.server.route(
      'selector',
      (r) => r.body.model === SMALL_MODEL,
      (r) => {
        selections.push(JSON.stringify(r.body.messages));
        return { ...jsonReply({ selected_memories: ['project_deploy.md'] }), latencyMs: 300 };
      },
      { sticky: true },
    );
    const s = await setup(inject('redisUrl'));
    await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: s.home,
      queues: 'recall',
      closer: scripted.closer,
      namespace: s.namespace,
      env: { ENGRAM_SMALL_MODEL: SMALL_MODEL },
    });
    const one = new MemoryQueue(s.config);
    const two = new MemoryQueue(s.config);
    scripted.closer.defer(() => one.close());
    scripted.closer.defer(() => two.close());
    const ref = { sessionId: crypto.randomUUID(), paths: s.paths };
    const ask = (q: MemoryQueue, query: string) =>
      awaitRecall(q, ref, { query, waitMs: 15_000, reuse: true });

    const [a, b] = await Promise.all([
      ask(one, 'which region do we deploy to'),
      ask(two, 'which region do we deploy to'),
    ]);
    expect(a.status).toBe('answered');
    expect(b.status).toBe('answered');
    if (a.status !== 'answered' || b.status !== 'answered') return;
    expect(a.jobId).toBe(b.jobId);
    expect([a.reused, b.reused].sort()).toEqual([false, true]);
    expect(a.result.attachments.map((x) => x.path)).toEqual(['project_deploy.md']);
    expect(b.result.attachments.map((x) => x.path)).toEqual(['project_deploy.md']);
    expect(selections).toHaveLength(1);

    // Another prompt (positive control): its own job and selector request.
    const c = await ask(one, 'how do we run the tests');
    expect(c.status).toBe('answered');
    if (c.status === 'answered') expect(c.jobId).not.toBe(a.jobId);
    expect(selections).toHaveLength(2);
  }, 60_000);

  it('with the queue down answers "not queued" within the enqueue timeout', async () => {
    const s = await setup('redis://127.0.0.1:9');
    const memory = new MemoryQueue(s.config);
    scripted.closer.defer(() => memory.close());
    const started = Date.now();
    const outcome = await awaitRecall(
      memory,
      { sessionId: crypto.randomUUID(), paths: s.paths },
      { query: 'which region do we deploy to', waitMs: 4_000, reuse: true },
    );
    expect(outcome.status).toBe('not-queued');
    expect(Date.now() - started).toBeLessThan(8_000);
  }, 30_000);
});
