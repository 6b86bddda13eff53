import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createModelClient } from '@engram/agent-runtime/model/client';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { textReply } from '@engram/testkit/replies';
import { describe, expect, inject, it } from 'vitest';
import { loadAgentConfig } from '../config.js';
import { MemoryQueue } from '../memory/memory-queue.js';
import { AgentSession } from './agent-session.js';
import { mainAgentPolicy } from './permissions.js';

// After a memory job changed files, the session's next model call carries a short notice naming them, once.

const scripted = useModelServer();
const { closer } = scripted;

describe('memory change notice in the foreground', () => {
  it('the next model call names the files a memory job saved; later calls do not repeat it', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-notice-home-'));
    const cfg = loadAgentConfig({
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
    await session.runTurn('We never mock the database in tests.', { canUseTool });
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
    await session.runTurn('What next?', { canUseTool });
    await session.runTurn('And then?', { canUseTool });
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
});
