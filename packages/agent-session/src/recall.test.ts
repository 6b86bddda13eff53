import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createModelClient } from '@engram/agent-runtime/model/client';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { createCompactBoundary } from '@engram/agent-runtime/transcript/chain';
import {
  createAssistantEntry,
  createAttachmentEntry,
  createUserEntry,
} from '@engram/agent-runtime/transcript/entry';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import { RELEVANT_MEMORIES_ATTACHMENT_KIND } from '@engram/memory-core/recall/prefetch';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, type RecordedRequest, startModelServer } from '@engram/testkit/model-server';
import { jsonReply, reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitUntil } from '@engram/testkit/wait';
import type { WorkerService } from '@engram/worker-service/service';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { AgentSession } from './agent-session.js';
import { loadAgentSessionConfig } from './config.js';
import { mainAgentPolicy } from './permissions.js';

// Prefetch recall from the foreground's side: enqueued at turn start, never awaited, injected after the tool
// results of the request during which it finished, budgeted per context, reset by compaction.

let server: ModelServer;
let service: WorkerService;
let engramHome: string;
let namespace: string;
const closer = new Closer();

const SMALL = 'claude-haiku-5-5';
const TESTING_MEMORY =
  '---\nname: Integration tests hit a real database\ndescription: Never mock the database in integration tests; a mocked migration once hid a broken prod deploy\ntype: feedback\n---\nIntegration tests use the real database.\n\n**Why:** mocks passed while a migration broke production.\n**How to apply:** spin up the test database; no DB mocks.\n';

beforeAll(async () => {
  server = await startModelServer();
  engramHome = mkdtempSync(join(tmpdir(), 'engram-recall-home-'));
  namespace = uniquePrefix('recall-fg');
  service = await startTestWorkerService({
    modelUrl: server.url,
    engramHome,
    namespace,
    queues: 'recall',
    env: { ENGRAM_SMALL_MODEL: SMALL },
  });
});
afterAll(async () => {
  await service.stop('test');
  await server.close();
});
afterEach(async () => {
  await closer.closeAll();
  server.reset();
});

async function openSession() {
  const config = loadAgentSessionConfig({
    HOME: engramHome,
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: namespace,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: server.url,
    ENGRAM_SMALL_MODEL: SMALL,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
  });
  const memory = new MemoryQueue(config);
  closer.defer(() => memory.close());
  const cwd = mkdtempSync(join(tmpdir(), 'engram-recall-project-'));
  const session = await AgentSession.open(
    { config, client: createModelClient({ apiKey: 'test', baseURL: server.url }), memory },
    { cwd },
  );
  mkdirSync(session.paths.memoryDir, { recursive: true });
  writeFileSync(join(session.paths.memoryDir, 'feedback_testing.md'), TESTING_MEMORY);
  writeFileSync(
    join(session.paths.memoryDir, 'user_role.md'),
    '---\nname: Role\ndescription: Backend Go engineer\ntype: user\n---\nGo.\n',
  );
  writeFileSync(
    join(session.paths.memoryDir, 'project_billing.md'),
    '---\nname: Billing rewrite\ndescription: Billing service rewrite is driven by a compliance deadline\ntype: project\n---\nx\n',
  );
  return { session, memory };
}

const policy = (session: AgentSession) => mainAgentPolicy({ paths: session.paths, allowedTools: new Set() });
const isSelector = (r: RecordedRequest) => r.body.model === SMALL;
const mains = () => server.messageRequests().filter((r) => !isSelector(r));

describe('prefetch recall in the foreground', () => {
  it('injects the result into the request after the one during which the job finished, never earlier', async () => {
    const { session, memory } = await openSession();
    server.route('selector', isSelector, [jsonReply({ selected_memories: ['feedback_testing.md'] })]);
    let n = 0;
    server.respond((): ScriptStep => {
      n++;
      // The first main request is slow, so recall finishes while it is in flight.
      return n === 1
        ? { ...reply(text('Looking.'), toolUse('Glob', { pattern: '*.ts' })), latencyMs: 500 }
        : textReply('Done.');
    });
    const turn = await session.runTurn('how should I write the integration tests for the billing service', {
      boundary: ATTENDED,
      canUseTool: policy(session),
    });
    expect(turn.memory.recall).toMatchObject({
      status: 'injected',
      outcome: 'model',
      paths: ['feedback_testing.md'],
    });
    const [first, second] = mains();
    expect(JSON.stringify(first!.body.messages)).not.toContain('Integration tests use the real database');
    expect(JSON.stringify(second!.body.messages)).toContain('Integration tests use the real database');
    // Injected after the tool results, as its own system-reminder.
    const lastMessage = JSON.stringify(second!.body.messages.at(-1));
    expect(lastMessage.indexOf('tool_result')).toBeLessThan(
      lastMessage.indexOf('Integration tests use the real database'),
    );
    // Ordering (not timing): the job finished before the second request, which is the first one that looked;
    // the first request never carries a recall (it goes out at once, before any result could be checked).
    const job = await memory.producer.queue('recall').getJob((turn.memory.recall as { jobId: string }).jobId);
    expect(job?.finishedOn).toBeLessThanOrEqual(second!.receivedAt);
    // The selector saw the query.
    const selector = server.messageRequests('selector')[0]!;
    expect(JSON.stringify(selector.body.messages)).toContain(
      'Query: how should I write the integration tests',
    );
  });

  it('never makes the turn wait: a recall still running when the turn ends is dropped', async () => {
    const { session } = await openSession();
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    server.route('selector', isSelector, async () => {
      await gate;
      return jsonReply({ selected_memories: ['feedback_testing.md'] });
    });
    let n = 0;
    server.respond(() =>
      ++n === 1 ? reply(toolUse('Glob', { pattern: '*.ts' })) : textReply('Finished without it.'),
    );
    // If the turn waited for recall, this would never resolve (the selector is held until after the turn).
    const turn = await session.runTurn('what do we know about the integration test setup', {
      boundary: ATTENDED,
      canUseTool: policy(session),
    });
    release();
    expect(turn.answer).toBe('Finished without it.');
    expect(turn.memory.recall.status).toBe('dropped');
    expect(JSON.stringify(mains().map((r) => r.body.messages))).not.toContain(
      'Integration tests use the real database',
    );
  });

  it('sends the already-surfaced and already-read memories and the recent tools; the selector is not offered them', async () => {
    const { session } = await openSession();
    const stamp = { sessionId: session.sessionId, cwd: session.paths.cwd };
    const user = createUserEntry({ ...stamp, parentUuid: null }, 'earlier question about tests');
    const call = createAssistantEntry(
      { ...stamp, parentUuid: user.uuid },
      {
        content: [
          { type: 'tool_use', id: 'toolu_bash', name: 'Bash', input: { command: 'ls' } },
          {
            type: 'tool_use',
            id: 'toolu_read',
            name: 'Read',
            input: { file_path: join(session.paths.memoryDir, 'user_role.md') },
          },
        ],
      },
    );
    const results = createUserEntry({ ...stamp, parentUuid: call.uuid }, [
      { type: 'tool_result', tool_use_id: 'toolu_bash', content: 'a.ts' },
      { type: 'tool_result', tool_use_id: 'toolu_read', content: 'Go.' },
    ]);
    const answer = createAssistantEntry(
      { ...stamp, parentUuid: results.uuid },
      { content: [{ type: 'text', text: 'ok' }] },
    );
    const surfaced = createAttachmentEntry(
      { ...stamp, parentUuid: answer.uuid },
      'Memory: feedback_testing.md …',
      {
        attachmentKind: RELEVANT_MEMORIES_ATTACHMENT_KIND,
        memories: [{ path: 'feedback_testing.md', mtimeMs: Date.now(), bytes: 300, truncated: false }],
      },
    );
    await session.store.append([user, call, results, answer, surfaced]);
    server.route('selector', isSelector, [jsonReply({ selected_memories: ['project_billing.md'] })]);
    let n = 0;
    server.respond(() =>
      ++n === 1 ? { ...reply(toolUse('Glob', { pattern: '*' })), latencyMs: 300 } : textReply('ok'),
    );
    const turn = await session.runTurn('remind me why the billing rewrite is urgent', {
      boundary: ATTENDED,
      canUseTool: policy(session),
    });
    const selectorText = JSON.stringify(server.messageRequests('selector')[0]?.body.messages ?? '');
    expect(selectorText).toContain('Query: remind me why the billing rewrite is urgent');
    expect(selectorText).toContain('project_billing.md');
    expect(selectorText).not.toContain('feedback_testing.md');
    expect(selectorText).not.toContain('user_role.md');
    expect(selectorText).toContain('Recently used tools: Bash');
    expect(turn.memory.recall).toMatchObject({ status: 'injected', paths: ['project_billing.md'] });
  });

  it('stops prefetching once 60 KiB were injected in this context, and starts again after compaction', async () => {
    const { session } = await openSession();
    const stamp = { sessionId: session.sessionId, cwd: session.paths.cwd };
    const user = createUserEntry({ ...stamp, parentUuid: null }, 'earlier');
    const big = createAttachmentEntry({ ...stamp, parentUuid: user.uuid }, 'x'.repeat(100), {
      attachmentKind: RELEVANT_MEMORIES_ATTACHMENT_KIND,
      memories: [{ path: 'old.md', mtimeMs: Date.now(), bytes: 61_440, truncated: false }],
    });
    await session.store.append([user, big]);
    server.route('selector', isSelector, [jsonReply({ selected_memories: [] })], { sticky: true });
    server.respond(() => textReply('ok'));
    const over = await session.runTurn('does the budget stop recall now', {
      boundary: ATTENDED,
      canUseTool: policy(session),
    });
    expect(over.memory.recall).toEqual({ status: 'skipped', reason: 'over-budget' });
    expect(server.messageRequests('selector')).toHaveLength(0);

    const { chain } = await session.liveChain();
    const boundary = createCompactBoundary({
      sessionId: session.sessionId,
      cwd: session.paths.cwd,
      logicalParentUuid: chain.at(-1)!.uuid,
      trigger: 'manual',
      preTokens: 70_000,
    });
    const summary = createUserEntry(
      { ...stamp, parentUuid: boundary.uuid },
      'Summary of the earlier conversation.',
      {
        isCompactSummary: true,
      },
    );
    await session.store.append([boundary, summary]);
    const after = await session.runTurn('and after compaction does recall run again', {
      boundary: ATTENDED,
      canUseTool: policy(session),
    });
    expect(after.memory.recall.status).not.toBe('skipped');
    await new Promise((r) => setTimeout(r, 200));
    expect(server.messageRequests('selector').length).toBeGreaterThan(0);
  });

  it('never puts a secret from the prompt into the recall job', async () => {
    const { session } = await openSession();
    const token = `ghp_${'a1B2c3D4e5'.repeat(3)}f6G7h8`; // built at run time: no secret-looking literal in the repo
    server.route('selector', isSelector, [jsonReply({ selected_memories: [] })]);
    server.respond(() => textReply('ok'));
    await session.runTurn(`why does the deploy fail with token ${token} set`, {
      boundary: ATTENDED,
      canUseTool: policy(session),
    });
    await waitUntil(() => server.messageRequests('selector').length === 1, 'the selector request');
    const selectorText = JSON.stringify(server.messageRequests('selector')[0]!.body.messages);
    expect(selectorText).toContain('[REDACTED]');
    expect(selectorText).not.toContain(token);
  });

  it('skips single-word prompts', async () => {
    const { session } = await openSession();
    server.respond(() => textReply('hi'));
    const turn = await session.runTurn('hello', { boundary: ATTENDED, canUseTool: policy(session) });
    expect(turn.memory.recall).toEqual({ status: 'skipped', reason: 'single-word' });
  });
});
