import {
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { engramPathsFromDirNames } from '@engram/memory-core/paths/memory-paths';
import { MAX_MEMORY_BYTES } from '@engram/memory-core/recall/read-for-surfacing';
import { SELECTION_OUTPUT_JSON_SCHEMA } from '@engram/memory-core/recall/selection-prompt';
import { type RecallPayload, type RecallResult, recallResult } from '@engram/queue/jobs/recall';
import { JobProducer } from '@engram/queue/producer';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import type { RecordedRequest } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { errors, jsonReply, type ScriptStep, textReply } from '@engram/testkit/replies';
import { describe, expect, inject, it } from 'vitest';
import { loadWorkersConfig } from '../config.js';
import { createHandlers } from '../handlers.js';
import { createLogger } from '../logger.js';
import { type HandlerDeps, startWorkerService, type WorkerService } from '../service.js';
import { createRecallHandler, createRecallModelClient } from './recall.js';

const PROJECT = '-work-repo';
const DAY = 86_400_000;

const scripted = useModelServer();
const { closer } = scripted;

interface Home {
  root: string;
  engramHome: string;
  memoryDir: string;
}

function makeHome(): Home {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'engram-recall-')));
  closer.defer(async () => rmSync(root, { recursive: true, force: true }));
  const engramHome = join(root, 'home');
  const { memoryDir } = engramPathsFromDirNames({
    engramHome,
    projectDirName: PROJECT,
    transcriptDirName: PROJECT,
  });
  mkdirSync(memoryDir, { recursive: true });
  return { root, engramHome, memoryDir };
}

function writeMemory(
  home: Home,
  rel: string,
  fm: { name: string; description: string; type?: string },
  body = 'Body.\n',
  ageDays = 0,
): string {
  const path = join(home.memoryDir, rel);
  mkdirSync(dirname(path), { recursive: true });
  const type = fm.type ? `type: ${fm.type}\n` : '';
  writeFileSync(path, `---\nname: ${fm.name}\ndescription: ${fm.description}\n${type}---\n${body}`);
  const t = (Date.now() - ageDays * DAY) / 1000;
  utimesSync(path, t, t);
  return path;
}

/** A small realistic memory directory. */
function seedMemories(home: Home) {
  writeMemory(
    home,
    'feedback_pnpm.md',
    {
      name: 'Use pnpm',
      description: 'The user wants pnpm, never npm, for installs and scripts',
      type: 'feedback',
    },
    'Always pnpm.\n',
  );
  writeMemory(
    home,
    'feedback_db_tests.md',
    {
      name: 'Real database in tests',
      description: 'Never mock the database in integration tests; mocks hid a broken migration',
      type: 'feedback',
    },
    'Use the docker Postgres.\n',
    1,
  );
  writeMemory(
    home,
    'reference_grafana.md',
    {
      name: 'Latency board',
      description: 'Grafana "API latency" is what on-call watches',
      type: 'reference',
    },
    'https://grafana.example/d/api\n',
    9,
  );
  writeMemory(
    home,
    'team/deploy.md',
    {
      name: 'Deploy windows',
      description: 'Production deploys only on Tuesdays and Thursdays',
      type: 'project',
    },
    'After the staging soak.\n',
    3,
  );
}

type Handlers = (deps: HandlerDeps) => ReturnType<typeof createHandlers>;

async function startService(
  home: Home,
  opts: { selectorTimeoutMs?: number; handlers?: Handlers } = {},
): Promise<WorkerService> {
  const config = loadWorkersConfig({
    REDIS_URL: inject('redisUrl'),
    ENGRAM_HOME: home.engramHome,
    ENGRAM_NAMESPACE: uniquePrefix('recall'),
    ENGRAM_QUEUES: 'recall',
    ENGRAM_WORKERS_PORT: '0',
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: scripted.server.url,
    ENGRAM_SMALL_MODEL: 'testkit-small',
    LOG_LEVEL: 'silent',
  });
  const handlers: Handlers =
    opts.handlers ??
    ((deps) => ({
      recall: createRecallHandler({
        ...deps,
        client: createRecallModelClient(deps.config),
        ...(opts.selectorTimeoutMs ? { selectorTimeoutMs: opts.selectorTimeoutMs } : {}),
      }),
    }));
  const service = await startWorkerService({ config, logger: createLogger('silent'), handlers, http: false });
  closer.defer(() => service.stop('test'));
  return service;
}

function payload(query: string, extra: Partial<RecallPayload> = {}): RecallPayload {
  return {
    projectDir: PROJECT,
    transcriptDir: PROJECT,
    sessionId: 'session-1',
    query,
    alreadySurfaced: [],
    alreadyRead: [],
    recentTools: [],
    requestedAt: new Date().toISOString(),
    ...extra,
  };
}

/** Enqueues a recall the way the foreground does and awaits its result through QueueEvents. */
async function recall(service: WorkerService, p: RecallPayload): Promise<RecallResult> {
  const producer = closer.add(new JobProducer(service.engine));
  const events = closer.add(service.engine.createQueueEvents('memory-recall'));
  await events.waitUntilReady();
  const receipt = await producer.enqueue('recall', p);
  const job = await producer.queue('recall').getJob(receipt.jobId);
  return recallResult.parse(await job!.waitUntilFinished(events, 15_000));
}

const isSelector = (r: RecordedRequest) => r.body.output_config?.format?.type === 'json_schema';

function selectorRoute(steps: ScriptStep[] | ((r: RecordedRequest) => ScriptStep | Promise<ScriptStep>)) {
  scripted.server.route('selector', isSelector, steps);
}

function userText(r: RecordedRequest): string {
  const content = r.body.messages[0]?.content;
  if (typeof content === 'string') return content;
  return (content ?? []).map((b) => (typeof b.text === 'string' ? b.text : '')).join('');
}

describe('recall end to end', () => {
  it('asks the small model with the query, the manifest minus surfaced and read files, and the recent tools', async () => {
    const home = makeHome();
    seedMemories(home);
    selectorRoute([jsonReply({ selected_memories: ['feedback_db_tests.md'] })]);
    // The production composition (handlers.ts), default timeout.
    const service = await startService(home, { handlers: createHandlers });
    const result = await recall(
      service,
      payload('should the integration tests mock the database?', {
        alreadySurfaced: ['feedback_pnpm.md'],
        alreadyRead: ['team/deploy.md'],
        recentTools: ['Bash', 'Grep'],
      }),
    );

    expect(result.outcome).toBe('model');
    expect(result.fallbackReason).toBeUndefined();
    expect(result.attachments).toHaveLength(1);
    const [attachment] = result.attachments;
    expect(attachment).toMatchObject({
      path: 'feedback_db_tests.md',
      truncated: false,
      header: `Memory (saved yesterday): ${join(home.memoryDir, 'feedback_db_tests.md')}:`,
    });
    expect(attachment!.content).toContain('Use the docker Postgres.');

    const [request] = scripted.server.messageRequests('selector');
    expect(scripted.server.messageRequests()).toHaveLength(1);
    expect(request!.stream).toBe(false);
    expect(request!.body.model).toBe('testkit-small');
    expect(request!.body.max_tokens).toBe(256);
    expect(request!.body.tools ?? []).toEqual([]);
    expect(request!.body.output_config?.format).toEqual({
      type: 'json_schema',
      schema: SELECTION_OUTPUT_JSON_SCHEMA,
    });
    const user = userText(request!);
    expect(
      user.startsWith('Query: should the integration tests mock the database?\n\nAvailable memories:\n'),
    ).toBe(true);
    expect(user).toMatch(/^- \[feedback\] feedback_db_tests\.md \(.+\): Never mock the database/m);
    expect(user).toMatch(/^- \[reference\] reference_grafana\.md /m);
    expect(user).not.toContain('feedback_pnpm.md');
    expect(user).not.toContain('team/deploy.md');
    expect(user.endsWith('\n\nRecently used tools: Bash, Grep')).toBe(true);

    const metrics = await service.metrics.registry.metrics();
    expect(metrics).toContain('engram_recalls_total{outcome="model"} 1');
    expect(metrics).toMatch(/engram_recall_latency_seconds_count\{outcome="model"\} 1/);
  });

  it('ignores picks outside the manifest and keeps at most five', async () => {
    const home = makeHome();
    seedMemories(home);
    for (let i = 0; i < 6; i++) {
      writeMemory(home, `extra_${i}.md`, { name: `Extra ${i}`, description: `extra fact ${i}` });
    }
    writeFileSync(join(home.root, 'outside.md'), '---\nname: secret\ndescription: secret\n---\nTOP SECRET\n');
    selectorRoute([
      jsonReply({
        selected_memories: [
          '../../outside.md',
          'feedback_pnpm.md', // already surfaced: not in the manifest
          'invented.md',
          'extra_0.md',
          'extra_1.md',
          'extra_2.md',
          'extra_3.md',
          'extra_4.md',
          'extra_5.md',
        ],
      }),
    ]);
    const service = await startService(home);
    const result = await recall(
      service,
      payload('tell me all the extra facts', { alreadySurfaced: ['feedback_pnpm.md'] }),
    );
    expect(result.outcome).toBe('model');
    expect(result.attachments.map((a) => a.path)).toEqual([
      'extra_0.md',
      'extra_1.md',
      'extra_2.md',
      'extra_3.md',
      'extra_4.md',
    ]);
    expect(JSON.stringify(result)).not.toContain('TOP SECRET');
  });

  it('falls back to the lexical ranking when the selector is slower than the timeout', async () => {
    const home = makeHome();
    seedMemories(home);
    selectorRoute((r) =>
      jsonReply({ selected_memories: ['reference_grafana.md'] }, { latencyMs: 3_000 + r.index }),
    );
    const service = await startService(home, { selectorTimeoutMs: 300 });
    const [related, unrelated] = await Promise.all([
      recall(service, payload('do we mock the database in integration tests?')),
      recall(service, payload('what is the capital of France?')),
    ]);
    expect(related).toMatchObject({ outcome: 'fallback', fallbackReason: 'timeout' });
    expect(related.attachments.map((a) => a.path)).toEqual(['feedback_db_tests.md']);
    expect(unrelated).toMatchObject({ outcome: 'fallback', fallbackReason: 'timeout', attachments: [] });
    expect(scripted.server.messageRequests('selector')).toHaveLength(2);
    expect(await service.metrics.registry.metrics()).toContain('engram_recalls_total{outcome="fallback"} 2');
  });

  it('falls back on a selector error without SDK retries, and on a reply that is not valid output', async () => {
    const home = makeHome();
    seedMemories(home);
    selectorRoute([
      errors.server(),
      textReply('I think feedback_pnpm.md is relevant', { skipSchemaValidation: true }),
      jsonReply({ files: ['reference_grafana.md'] }, { skipSchemaValidation: true }),
    ]);
    const service = await startService(home);
    const query = 'should I run the installs with npm or pnpm?';
    const afterError = await recall(service, payload(query));
    expect(afterError).toMatchObject({ outcome: 'fallback', fallbackReason: 'selector-error' });
    expect(afterError.attachments.map((a) => a.path)).toEqual(['feedback_pnpm.md']);
    // One request: the SDK did not retry the 500 behind the job's back.
    expect(scripted.server.messageRequests('selector')).toHaveLength(1);

    const notJson = await recall(service, payload(query));
    expect(notJson).toMatchObject({ outcome: 'fallback', fallbackReason: 'invalid-output' });
    expect(notJson.attachments.map((a) => a.path)).toEqual(['feedback_pnpm.md']);

    const wrongShape = await recall(service, payload(query));
    expect(wrongShape).toMatchObject({ outcome: 'fallback', fallbackReason: 'invalid-output' });
    expect(wrongShape.attachments.map((a) => a.path)).toEqual(['feedback_pnpm.md']);
  });

  it('never returns a memory that is a symlink out of the memory directory, even one swapped in during selection', async () => {
    const home = makeHome();
    seedMemories(home);
    const secret = join(home.root, 'secret.md');
    writeFileSync(
      secret,
      '---\nname: Deploy keys\ndescription: deploy keys for production\n---\nTOP SECRET\n',
    );
    symlinkSync(secret, join(home.memoryDir, 'leak.md'));
    const swapped = writeMemory(home, 'swap.md', { name: 'Swap', description: 'deploy keys rotation' });
    const manifests: string[] = [];
    selectorRoute((r) => {
      manifests.push(userText(r));
      // Between the scan and the read, the listed file becomes a link to the secret.
      rmSync(swapped);
      symlinkSync(secret, swapped);
      return jsonReply({ selected_memories: ['leak.md', 'swap.md'] });
    });
    const service = await startService(home);
    const result = await recall(service, payload('where are the deploy keys for production'));
    expect(manifests[0]).toContain('swap.md');
    expect(manifests[0]).not.toContain('leak.md');
    expect(result.outcome).toBe('model');
    expect(result.attachments).toEqual([]);
    expect(JSON.stringify(result)).not.toContain('TOP SECRET');

    // The lexical fallback never sees the link either.
    scripted.server.reset();
    selectorRoute([errors.server()]);
    const fallback = await recall(service, payload('where are the deploy keys for production'));
    expect(fallback.outcome).toBe('fallback');
    expect(JSON.stringify(fallback)).not.toContain('TOP SECRET');
  });

  it('cuts long memories at 200 lines and at 4 KiB with a note pointing at the full file', async () => {
    const home = makeHome();
    const lines = Array.from({ length: 300 }, (_, i) => `line ${i}`).join('\n');
    const longPath = writeMemory(home, 'long.md', { name: 'Long', description: 'many lines' }, `${lines}\n`);
    const bigPath = writeMemory(
      home,
      'big.md',
      { name: 'Big', description: 'many bytes' },
      'é'.repeat(3_000),
    );
    selectorRoute([jsonReply({ selected_memories: ['long.md', 'big.md'] })]);
    const service = await startService(home);
    const result = await recall(service, payload('show me the long and the big memory'));
    const [long, big] = result.attachments;
    expect(long).toMatchObject({ path: 'long.md', truncated: true, limit: 200 });
    expect(long!.content.split('\n> ')[0]!.trimEnd().split('\n')).toHaveLength(200);
    expect(long!.content).toContain(
      `> This memory was cut to its first 200 lines. The whole file is at ${longPath}; use the Read tool to see the rest.`,
    );
    expect(big).toMatchObject({ path: 'big.md', truncated: true });
    const [bigBody] = big!.content.split('\n\n> This memory was cut');
    expect(Buffer.byteLength(bigBody!)).toBeLessThanOrEqual(MAX_MEMORY_BYTES);
    expect(bigBody).not.toContain('\uFFFD');
    expect(big!.content).toContain(
      `> This memory was cut at 4096 bytes. The whole file is at ${bigPath}; use the Read tool to see the rest.`,
    );
  });

  it('computes headers once: two recalls of the same memories give byte-identical attachments', async () => {
    const home = makeHome();
    seedMemories(home);
    const picks = { selected_memories: ['reference_grafana.md', 'feedback_pnpm.md'] };
    selectorRoute([jsonReply(picks), jsonReply(picks)]);
    const service = await startService(home);
    const first = await recall(service, payload('grafana latency and pnpm installs'));
    const second = await recall(service, payload('grafana latency and pnpm installs'));
    expect(second.attachments).toEqual(first.attachments);
    const [grafana, pnpm] = first.attachments;
    expect(grafana!.header).toMatch(/^This memory was last updated 9 days ago\./);
    expect(grafana!.header.endsWith(`Memory: ${join(home.memoryDir, 'reference_grafana.md')}:`)).toBe(true);
    expect(pnpm!.header).toBe(`Memory (saved today): ${join(home.memoryDir, 'feedback_pnpm.md')}:`);
  });

  it('answers empty without asking the model when nothing is left to choose from', async () => {
    const home = makeHome();
    writeMemory(home, 'only.md', { name: 'Only', description: 'the only memory' });
    const service = await startService(home);
    const none = await recall(
      service,
      payload('anything about the only memory', { alreadyRead: ['only.md'] }),
    );
    expect(none).toMatchObject({ outcome: 'empty', attachments: [] });
    rmSync(home.memoryDir, { recursive: true });
    const missingDir = await recall(service, payload('a directory that does not exist'));
    expect(missingDir).toMatchObject({ outcome: 'empty', attachments: [] });
    expect(scripted.server.messageRequests()).toHaveLength(0);
    expect(await service.metrics.registry.metrics()).toContain('engram_recalls_total{outcome="empty"} 2');
  });
});
