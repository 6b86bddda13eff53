import { promises as fs, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NOT_READ_MESSAGE } from '@engram/agent-runtime/tools/file-state';
import type { ExtractResult } from '@engram/queue/jobs/extract';
import { JobProducer } from '@engram/queue/producer';
import { SessionState } from '@engram/queue/state/session-state';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob } from '@engram/testkit/wait';
import { describe, expect, it } from 'vitest';
import { createHandlers } from '../handlers.js';
import { createLogger } from '../logger.js';
import { startWorkerService, type WorkerService } from '../service.js';
import { WORKER_TEST_BACKENDS } from '../testing/backends.test-helpers.js';
import { createForeground, isExtractionRequest, lastUserText } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService, testWorkersConfig } from '../testing/service.test-helpers.js';

// Receipts and `engram_memories_written_total` come from the files on disk (content hashes before and after
// the fork), never from the writes a fork set out to make: a refused Write is no saved memory.

const scripted = useModelServer();
const { closer } = scripted;

const memory = (name: string, body: string) =>
  `---\nname: ${name}\ndescription: ${name} for this repository\ntype: feedback\n---\n${body}\n`;

async function written(service: WorkerService, action: string): Promise<number> {
  const metric = await service.metrics.memoriesWritten.get();
  return metric.values.find((v) => v.labels.queue === 'extract' && v.labels.action === action)?.value ?? 0;
}

describe.each(WORKER_TEST_BACKENDS)('extraction receipts on %s', (_kind, backend) => {
  it('a Write refused with "File has not been read yet" is no saved memory: not in the receipt, not counted', async () => {
    const fg = createForeground(scripted.server);
    mkdirSync(fg.paths.memoryDir, { recursive: true });
    const existing = memory('Use pnpm', 'Use pnpm.');
    writeFileSync(join(fg.paths.memoryDir, 'feedback_pnpm.md'), existing);
    writeFileSync(fg.paths.memoryIndexPath, '- [Use pnpm](feedback_pnpm.md) — pnpm, never npm\n');
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('Noted.')]);
    const results: string[] = [];
    scripted.server.route(
      'extract',
      (r) => isExtractionRequest(r.body),
      (r): ScriptStep => {
        if (lastUserText(r.body).includes('You are now the memory extraction subagent')) {
          // Overwrites an existing memory without reading it first: the Write tool refuses.
          return reply(
            text('Updating.'),
            toolUse('Write', {
              file_path: join(fg.paths.memoryDir, 'feedback_pnpm.md'),
              content: memory('Use pnpm', 'Use pnpm 9.'),
            }),
          );
        }
        results.push(JSON.stringify(r.body.messages.at(-1)));
        return textReply('Done.');
      },
    );
    const leaf = await fg.turn('we are on pnpm 9 now');
    const service = await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: fg.engramHome,
      queues: 'extract',
      closer,
      backendEnv: backend.env(),
      namespace: (() => {
        const ns = uniquePrefix('receipt');
        backend.cleanUpAfter(ns, closer);
        return ns;
      })(),
    });
    const producer = closer.add(new JobProducer(service.engine));
    const receipt = await producer.enqueue('extract', fg.extractPayload(leaf));
    const job = await waitForFinishedJob(producer.queue('extract'), receipt.jobId);
    const result = job.returnvalue as ExtractResult;

    expect(results.join('\n')).toContain(NOT_READ_MESSAGE);
    expect(result.outcome).toBe('extracted');
    expect(result.memories).toEqual([]);
    expect(await fs.readFile(join(fg.paths.memoryDir, 'feedback_pnpm.md'), 'utf8')).toBe(existing);
    expect(await written(service, 'updated')).toBe(0);
    expect(await written(service, 'created')).toBe(0);
    // What the foreground shows ("Saved N memories" comes from these receipts) names no memory.
    const receipts = await new SessionState(service.engine.state, fg.extractPayload(leaf)).extractReceipts();
    expect(receipts).toHaveLength(1);
    expect(receipts[0]!.memories).toEqual([]);
  });

  it('the receipt is written before the cursor moves: a caller that sees its turn covered reads what was saved', async () => {
    // `engram run`, the demo and every drainExtraction wait for the cursor and then read the receipts at once. The
    // engine's state store is watched: when the cursor key is set, the receipt must already be there.
    const fg = createForeground(scripted.server);
    mkdirSync(fg.paths.memoryDir, { recursive: true });
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('Noted.')]);
    scripted.server.route(
      'extract',
      (r) => isExtractionRequest(r.body),
      (r): ScriptStep =>
        lastUserText(r.body).includes('You are now the memory extraction subagent')
          ? reply(
              text('Saving.'),
              toolUse('Write', {
                file_path: join(fg.paths.memoryDir, 'user_role.md'),
                content: memory('Role', 'Backend engineer.'),
              }),
            )
          : textReply('Saved.'),
      { sticky: true },
    );
    const leaf = await fg.turn('I am a backend engineer');
    const ns = uniquePrefix('receipt');
    backend.cleanUpAfter(ns, closer);
    const seenAtCursor: unknown[] = [];
    const service = await startWorkerService({
      config: testWorkersConfig({
        modelUrl: scripted.server.url,
        engramHome: fg.engramHome,
        queues: 'extract',
        backendEnv: backend.env(),
        namespace: ns,
      }),
      logger: createLogger('silent'),
      http: false,
      handlers: (deps) => {
        const real = deps.engine.state;
        const watched = new Proxy(real, {
          get(target, prop, receiver) {
            const value = Reflect.get(target, prop, receiver);
            if (prop !== 'setIfNewer' || typeof value !== 'function') return value;
            return async (key: string, ...rest: unknown[]) => {
              if (key.endsWith(':extract-cursor')) {
                seenAtCursor.push(await new SessionState(real, fg.extractPayload(leaf)).extractReceipts());
              }
              return (value as (...a: unknown[]) => unknown).call(target, key, ...rest);
            };
          },
        });
        const engine = new Proxy(deps.engine, {
          get: (target, prop, receiver) => (prop === 'state' ? watched : Reflect.get(target, prop, receiver)),
        });
        return createHandlers({ ...deps, engine });
      },
    });
    closer.defer(() => service.stop('test'));
    const producer = closer.add(new JobProducer(service.engine));
    const receipt = await producer.enqueue('extract', fg.extractPayload(leaf));
    const job = await waitForFinishedJob(producer.queue('extract'), receipt.jobId);
    expect((job.returnvalue as ExtractResult).outcome).toBe('extracted');
    expect(seenAtCursor).toEqual([
      [
        expect.objectContaining({
          memories: [{ path: 'user_role.md', type: 'feedback', action: 'created' }],
        }),
      ],
    ]);
  });

  it('credits exactly what changed on disk: a created file, an updated file, not an identical rewrite', async () => {
    const fg = createForeground(scripted.server);
    mkdirSync(fg.paths.memoryDir, { recursive: true });
    const same = memory('Tabs', 'Indent with tabs.');
    const old = memory('Node', 'Node 20.');
    writeFileSync(join(fg.paths.memoryDir, 'feedback_tabs.md'), same);
    writeFileSync(join(fg.paths.memoryDir, 'project_node.md'), old);
    scripted.server.route('parent', (r) => !isExtractionRequest(r.body), [textReply('Noted.')]);
    let step = 0;
    scripted.server.route(
      'extract',
      (r) => isExtractionRequest(r.body),
      (): ScriptStep => {
        step++;
        if (step === 1) {
          return reply(
            text('Reading.'),
            toolUse('Read', { file_path: join(fg.paths.memoryDir, 'feedback_tabs.md') }),
            toolUse('Read', { file_path: join(fg.paths.memoryDir, 'project_node.md') }),
          );
        }
        if (step === 2) {
          return reply(
            text('Writing.'),
            // Same bytes: no change on disk, so no "updated".
            toolUse('Write', { file_path: join(fg.paths.memoryDir, 'feedback_tabs.md'), content: same }),
            toolUse('Write', {
              file_path: join(fg.paths.memoryDir, 'project_node.md'),
              content: memory('Node', 'Node 22.'),
            }),
            toolUse('Write', {
              file_path: join(fg.paths.memoryDir, 'user_role.md'),
              content: memory('Role', 'Backend engineer.'),
            }),
          );
        }
        return textReply('Saved.');
      },
      { sticky: true },
    );
    const leaf = await fg.turn('we moved to node 22; I am a backend engineer');
    const ns = uniquePrefix('receipt');
    backend.cleanUpAfter(ns, closer);
    const service = await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: fg.engramHome,
      queues: 'extract',
      closer,
      backendEnv: backend.env(),
      namespace: ns,
    });
    const producer = closer.add(new JobProducer(service.engine));
    const receipt = await producer.enqueue('extract', fg.extractPayload(leaf));
    const job = await waitForFinishedJob(producer.queue('extract'), receipt.jobId);
    const result = job.returnvalue as ExtractResult;
    expect(result.outcome).toBe('extracted');
    expect(result.memories).toEqual([
      { path: 'user_role.md', type: 'feedback', action: 'created' },
      { path: 'project_node.md', type: 'feedback', action: 'updated' },
    ]);
    expect(await written(service, 'created')).toBe(1);
    expect(await written(service, 'updated')).toBe(1);
  });

  it('two writers at once: each receipt names only the files its own job wrote, never the other’s', async () => {
    // Two serial extractions of one project run at the same time — workers of two namespaces on one ENGRAM_HOME,
    // so neither holds the other's writer lease — while the session's own agent saves a memory directly (as the
    // main agent or the MCP server do, outside any lease). Each fork's before/after window holds all three writes.
    const alpha = createForeground(scripted.server);
    const beta = createForeground(scripted.server, { engramHome: alpha.engramHome, cwd: alpha.cwd });
    scripted.server.route(
      'parent',
      (r) => !isExtractionRequest(r.body),
      () => textReply('Noted.'),
      {
        sticky: true,
      },
    );
    const wrote = new Set<string>();
    let release!: () => void;
    const bothWrote = new Promise<void>((r) => {
      release = r;
    });
    scripted.server.route(
      'extract',
      (r) => isExtractionRequest(r.body),
      async (r): Promise<ScriptStep> => {
        const name = JSON.stringify(r.body.messages).includes('remember alpha') ? 'alpha' : 'beta';
        const last = lastUserText(r.body);
        if (last.includes('You are now the memory extraction subagent')) {
          const dir = /the memory directory `([^`]+)`/.exec(last)![1]!;
          return reply(
            text('Saving.'),
            toolUse('Write', {
              file_path: join(dir, `project_${name}.md`),
              content: memory(name, `${name} fact`),
            }),
          );
        }
        wrote.add(name);
        if (wrote.size === 2) {
          writeFileSync(
            join(alpha.paths.memoryDir, 'user_direct.md'),
            memory('Direct', 'saved by the agent'),
          );
          release();
        }
        // Neither fork ends before both have written (bounded, so a broken run fails instead of hanging).
        await Promise.race([bothWrote, new Promise((r) => setTimeout(r, 20_000))]);
        return textReply('Saved.');
      },
      { sticky: true },
    );
    const leaves = [await alpha.turn('remember alpha'), await beta.turn('remember beta')];
    const results: ExtractResult[] = [];
    await Promise.all(
      [alpha, beta].map(async (fg, i) => {
        const ns = uniquePrefix(`receipt-${i}`);
        backend.cleanUpAfter(ns, closer);
        const service = await startTestWorkerService({
          modelUrl: scripted.server.url,
          engramHome: fg.engramHome,
          queues: 'extract',
          closer,
          backendEnv: backend.env(),
          namespace: ns,
          env: { ENGRAM_EXTRACT_STAGED: '0' },
        });
        const producer = closer.add(new JobProducer(service.engine));
        const { jobId } = await producer.enqueue('extract', fg.extractPayload(leaves[i]!));
        const job = await waitForFinishedJob(producer.queue('extract'), jobId, 60_000);
        results[i] = job.returnvalue as ExtractResult;
        // What the foreground shows for the session comes from the same receipt.
        const receipts = await new SessionState(
          service.engine.state,
          fg.extractPayload(leaves[i]!),
        ).extractReceipts();
        expect(receipts.flatMap((x) => x.memories.map((m) => m.path))).toEqual([
          `project_${i === 0 ? 'alpha' : 'beta'}.md`,
        ]);
      }),
    );
    expect(wrote.size).toBe(2);
    expect(results[0]!.memories).toEqual([{ path: 'project_alpha.md', type: 'feedback', action: 'created' }]);
    expect(results[1]!.memories).toEqual([{ path: 'project_beta.md', type: 'feedback', action: 'created' }]);
    // The agent's own memory is in neither receipt, and was not stamped with either session's id.
    expect(await fs.readFile(join(alpha.paths.memoryDir, 'user_direct.md'), 'utf8')).toBe(
      memory('Direct', 'saved by the agent'),
    );
  }, 90_000);
});
