import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExtractResult } from '@engram/queue/jobs/extract';
import { JobProducer } from '@engram/queue/producer';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob, waitUntil } from '@engram/testkit/wait';
import { describe, expect, it } from 'vitest';
import { WORKER_TEST_BACKENDS } from '../testing/backends.test-helpers.js';
import { createForeground, isExtractionRequest, lastUserText } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';

// One project's memory writers form a line: extractions of four sessions of one repository, arriving while
// the first one runs, run one at a time in arrival order — parked, not randomly deferred — and each is
// handed the lease by the one before it.

const scripted = useModelServer();
const { closer } = scripted;

describe.each(WORKER_TEST_BACKENDS)('the project writer line on %s', (_kind, backend) => {
  it('runs one project’s extractions one at a time, first come first served', async () => {
    const engramHome = mkdtempSync(join(tmpdir(), 'engram-line-home-'));
    const cwd = mkdtempSync(join(tmpdir(), 'engram-line-repo-'));
    scripted.server.route(
      'parent',
      (r) => !isExtractionRequest(r.body),
      (r) => textReply(`ok ${r.index}`),
      { sticky: true },
    );
    const order: number[] = [];
    let running = 0;
    let maxRunning = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    scripted.server.route(
      'extract',
      (r) => isExtractionRequest(r.body),
      async (r): Promise<ScriptStep> => {
        const last = lastUserText(r.body);
        const session = Number(/session (\d+) says/.exec(JSON.stringify(r.body.messages))?.[1]);
        if (last.includes('You are now the memory extraction subagent')) {
          running++;
          maxRunning = Math.max(maxRunning, running);
          order.push(session);
          if (order.length === 1) await gate;
          const memoryDir = /the memory directory `([^`]+)`/.exec(last)![1]!;
          return reply(
            text('Saving.'),
            toolUse('Write', {
              file_path: join(memoryDir, `project_s${session}.md`),
              content: `---\nname: S${session}\ndescription: session ${session}\ntype: project\n---\nS${session}\n`,
            }),
          );
        }
        running--;
        return textReply('Saved.');
      },
      { sticky: true },
    );
    const sessions = [];
    for (let i = 0; i < 4; i++) {
      const fg = createForeground(scripted.server, { engramHome, cwd });
      sessions.push({ fg, leaf: await fg.turn(`session ${i} says: remember fact ${i}`) });
    }
    const ns = uniquePrefix('line');
    backend.cleanUpAfter(ns, closer);
    const service = await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome,
      queues: 'extract',
      closer,
      backendEnv: backend.env(),
      namespace: ns,
      // The serial line itself (staged extraction would not wait in it: docs/concurrency.md).
      env: { ENGRAM_CONCURRENCY_EXTRACT: '4', ENGRAM_EXTRACT_STAGED: '0' },
    });
    const producer = closer.add(new JobProducer(service.engine));
    const queue = producer.queue('extract');
    const ids: string[] = [];
    ids.push((await producer.enqueue('extract', sessions[0]!.fg.extractPayload(sessions[0]!.leaf))).jobId);
    await waitUntil(() => order.length === 1, 'first fork running');
    // The others arrive one after another while the first holds the project: each parks in the line.
    for (let i = 1; i < 4; i++) {
      const id = (await producer.enqueue('extract', sessions[i]!.fg.extractPayload(sessions[i]!.leaf))).jobId;
      ids.push(id);
      await waitUntil(async () => (await queue.getJob(id))?.isDelayed() ?? false, `job ${i} parked`);
    }
    release();
    const results: ExtractResult[] = [];
    for (const id of ids) results.push((await waitForFinishedJob(queue, id)).returnvalue as ExtractResult);

    expect(order).toEqual([0, 1, 2, 3]);
    expect(maxRunning).toBe(1);
    expect(results.map((r) => r.memories.map((m) => m.path))).toEqual([
      ['project_s0.md'],
      ['project_s1.md'],
      ['project_s2.md'],
      ['project_s3.md'],
    ]);
    // Parked jobs spent no attempt.
    for (const id of ids) expect((await queue.getJob(id))?.attemptsMade).toBe(1);
  });
});
