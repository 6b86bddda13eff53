import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createModelClient } from '@engram/agent-runtime/model/client';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import { ProjectChanges, projectChangesScope } from '@engram/queue/state/project-changes';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { textReply } from '@engram/testkit/replies';
import { describe, expect, inject, it } from 'vitest';
import { AgentSession } from './agent-session.js';
import { loadAgentSessionConfig } from './config.js';
import { mainAgentPolicy } from './permissions.js';

// After a memory job changed files, the session's next model call carries a short notice naming them, once.

const scripted = useModelServer();
const { closer } = scripted;

describe('memory change notice in the foreground', () => {
  it('the next model call names the files a memory job saved; later calls do not repeat it', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-notice-home-'));
    const cfg = loadAgentSessionConfig({
      HOME: home,
      ENGRAM_HOME: home,
      ENGRAM_NAMESPACE: uniquePrefix('notice'),
      REDIS_URL: inject('redisUrl'),
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: scripted.server.url,
      ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
    });
    const memory = new MemoryQueue(cfg);
    closer.defer(() => memory.close());
    const cwd = join(home, 'project');
    mkdirSync(cwd, { recursive: true });
    const session = await AgentSession.open(
      {
        config: cfg,
        client: createModelClient({ apiKey: 'test', baseURL: scripted.server.url, maxRetries: 0 }),
        memory,
      },
      { cwd },
    );
    const canUseTool = mainAgentPolicy({ paths: session.paths, allowedTools: new Set() });
    scripted.server.script(textReply('one'), textReply('two'), textReply('three'));
    await session.runTurn('We never mock the database in tests.', { boundary: ATTENDED, canUseTool });
    await session.recordReceipts([
      {
        fromSeq: 0,
        toSeq: 3,
        atMs: Date.now(),
        memories: [
          { path: 'no-database-mocks.md', type: 'feedback', action: 'created' },
          { path: 'team/testing.md', action: 'updated' },
        ],
      },
    ]);
    await session.runTurn('What next?', { boundary: ATTENDED, canUseTool });
    await session.runTurn('And then?', { boundary: ATTENDED, canUseTool });
    const requests = scripted.server.messageRequests().map((r) => JSON.stringify(r.body.messages));
    expect(requests).toHaveLength(3);
    expect(requests[0]).not.toContain('background memory work');
    expect(requests[1]).toContain(
      "Engram's background memory work changed these memory files since your last reply: " +
        'no-database-mocks.md (created), team/testing.md (updated).',
    );
    // Announced once: the third request still holds the second's notice in its history, but no new one.
    expect(requests[2]!.split('background memory work').length - 1).toBe(1);
  });

  it('consolidation and team-pull changes reach the next model call of every session of the project, once', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-notice-home-'));
    const cfg = loadAgentSessionConfig({
      HOME: home,
      ENGRAM_HOME: home,
      ENGRAM_NAMESPACE: uniquePrefix('notice'),
      REDIS_URL: inject('redisUrl'),
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: scripted.server.url,
      ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
    });
    const memory = new MemoryQueue(cfg);
    closer.defer(() => memory.close());
    const cwd = join(home, 'project');
    mkdirSync(cwd, { recursive: true });
    const deps = {
      config: cfg,
      client: createModelClient({ apiKey: 'test', baseURL: scripted.server.url, maxRetries: 0 }),
      memory,
    };
    const open = (sessionId?: string) =>
      AgentSession.open(deps, { cwd, ...(sessionId ? { sessionId } : {}) });
    const a = await open();
    const canUseTool = mainAgentPolicy({ paths: a.paths, allowedTools: new Set() });
    // The feed as the dream and team-sync workers address it: the project directory from the job payload.
    const feed = new ProjectChanges(
      memory.engine.state,
      projectChangesScope({ projectDir: sanitizePath(a.paths.projectRoot) }),
    );
    const lastRequest = () =>
      JSON.stringify(scripted.server.messageRequests().at(-1)?.body.messages.slice(-2));
    scripted.server.script(...Array.from({ length: 8 }, (_, i) => textReply(`reply ${i}`)));

    await a.runTurn('Start.', { boundary: ATTENDED, canUseTool });
    await feed.record('dream', [
      { path: 'feedback_pnpm.md', action: 'updated' },
      { path: 'feedback_pnpm_again.md', action: 'deleted' },
    ]);
    await a.runTurn('Next.', { boundary: ATTENDED, canUseTool });
    expect(lastRequest()).toContain(
      'changed these memory files since your last reply: feedback_pnpm.md (updated), feedback_pnpm_again.md (deleted).',
    );
    await a.runTurn('Again.', { boundary: ATTENDED, canUseTool });
    expect(lastRequest()).not.toContain('background memory work');

    // A session opened after the consolidation loaded its result with the index: nothing to announce.
    const b = await open();
    await b.runTurn('Hello from b.', { boundary: ATTENDED, canUseTool });
    expect(lastRequest()).not.toContain('background memory work');

    // A team pull is announced to both open sessions.
    await feed.record('team-pull', [{ path: 'team/deploy.md', action: 'created' }]);
    await a.runTurn('a again.', { boundary: ATTENDED, canUseTool });
    expect(lastRequest()).toContain('since your last reply: team/deploy.md (created).');
    await b.runTurn('b again.', { boundary: ATTENDED, canUseTool });
    expect(lastRequest()).toContain('since your last reply: team/deploy.md (created).');

    // A session resumed later hears of what changed while it was away.
    await feed.record('dream', [{ path: 'project_deploy.md', action: 'updated' }]);
    const resumed = await open(a.sessionId);
    await resumed.runTurn('Back.', { boundary: ATTENDED, canUseTool });
    expect(lastRequest()).toContain('since your last reply: project_deploy.md (updated).');
    // The transcript shows what was announced (not model-visible itself).
    const { entries } = await resumed.liveChain();
    const saved = entries.filter((e) => e.type === 'system' && e.subtype === 'memory_saved');
    expect(saved.map((e) => (e as { content?: string }).content)).toEqual([
      'Consolidation changed 2 memory files: feedback_pnpm.md (updated), feedback_pnpm_again.md (deleted)',
      'Team pull wrote 1 memory file: team/deploy.md (created)',
      'Consolidation changed 1 memory file: project_deploy.md (updated)',
    ]);
  });
});
