import { promises as fs, mkdirSync, mkdtempSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createModelClient } from '@engram/agent-runtime/model/client';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { AgentSession } from '@engram/agent-session/agent-session';
import { mainAgentPolicy } from '@engram/agent-session/permissions';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import { CONSOLIDATION_PROMPT_TITLE } from '@engram/memory-core/dream/consolidation-prompt';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, type RecordedRequest, startModelServer } from '@engram/testkit/model-server';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import type { WorkerService } from '@engram/worker-service/service';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { assertBuilt, engram } from './cli.test-helpers.js';
import { loadAgentConfig } from './config.js';

// autoDream from the foreground: the gate at turn end, and `engram dream --force` following a real
// consolidation to the end; snapshots listed and restored from the CLI.

const isDream = (r: RecordedRequest) => JSON.stringify(r.body.messages).includes(CONSOLIDATION_PROMPT_TITLE);
const memory = (name: string, description: string, body: string) =>
  `---\nname: ${name}\ndescription: ${description}\ntype: feedback\n---\n${body}\n`;

let server: ModelServer;
let service: WorkerService;
let engramHome: string;
let namespace: string;
const closer = new Closer();

beforeAll(async () => {
  assertBuilt();
  server = await startModelServer();
  engramHome = mkdtempSync(join(tmpdir(), 'engram-dream-home-'));
  namespace = uniquePrefix('dream-cli');
  service = await startTestWorkerService({ modelUrl: server.url, engramHome, namespace, queues: 'dream' });
});
afterAll(async () => {
  await service.stop('test');
  await server.close();
});
afterEach(async () => {
  await closer.closeAll();
  server.reset();
});

function env(extra: Record<string, string> = {}) {
  return {
    PATH: process.env.PATH,
    HOME: engramHome,
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: namespace,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: server.url,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
    ...extra,
  };
}

/**
 * A foreground session whose dream gate wants two other sessions, with its own memory queue; the model answers
 * "ok", and a dream fork "Nothing to consolidate.".
 */
async function openGatedSession() {
  const config = loadAgentConfig({ ...env(), ENGRAM_DREAM_MIN_SESSIONS: '2' });
  const queue = new MemoryQueue(config);
  closer.defer(() => queue.close());
  const cwd = mkdtempSync(join(tmpdir(), 'engram-dream-gate-'));
  const deps = {
    config,
    client: createModelClient({ apiKey: 'test', baseURL: server.url }),
    memory: queue,
    dream: { ...config.dream, minSessions: 2 },
  };
  const session = await AgentSession.open(deps, { cwd });
  server.respond((r) => (isDream(r) ? textReply('Nothing to consolidate.') : textReply('ok')));
  return { queue, session };
}

describe('the dream gate at turn end', () => {
  it('stays shut on too few sessions, then on the shared scan throttle', async () => {
    const { session } = await openGatedSession();
    // Only one other session so far: the gate stays shut on the session count.
    mkdirSync(session.paths.transcriptDir, { recursive: true });
    writeFileSync(join(session.paths.transcriptDir, 'aaaa1111.jsonl'), '{}\n');
    const first = await session.runTurn('first prompt here', {
      boundary: ATTENDED,
      canUseTool: mainAgentPolicy({ paths: session.paths, allowedTools: new Set() }),
    });
    expect(first.memory.dream).toEqual({ status: 'skipped', reason: 'dream gate: sessions' });
    // A second other session appears, but the scan is throttled for 10 minutes (shared by every replica).
    writeFileSync(join(session.paths.transcriptDir, 'bbbb2222.jsonl'), '{}\n');
    const second = await session.runTurn('second prompt here', {
      boundary: ATTENDED,
      canUseTool: mainAgentPolicy({ paths: session.paths, allowedTools: new Set() }),
    });
    expect(second.memory.dream).toEqual({ status: 'skipped', reason: 'dream gate: throttle' });
  });

  it('enqueues a dream for a project with enough sessions touched and no consolidation yet', async () => {
    const { queue, session } = await openGatedSession();
    mkdirSync(session.paths.transcriptDir, { recursive: true });
    writeFileSync(join(session.paths.transcriptDir, 'aaaa1111.jsonl'), '{}\n');
    writeFileSync(join(session.paths.transcriptDir, 'bbbb2222.jsonl'), '{}\n');
    const turn = await session.runTurn('first prompt here', {
      boundary: ATTENDED,
      canUseTool: mainAgentPolicy({ paths: session.paths, allowedTools: new Set() }),
    });
    expect(turn.memory.dream.status).toBe('queued');
    const job = await queue.producer.queue('dream').getJob((turn.memory.dream as { jobId: string }).jobId);
    expect(job?.data).toMatchObject({
      triggeredBy: session.sessionId,
      sessionId: session.sessionId,
      leafUuid: turn.leaf.leafUuid,
      minSessions: 2,
    });
    expect([...job!.data.sessionIds].sort()).toEqual(['aaaa1111', 'bbbb2222']);
    // The file's worker service runs that dream: let it finish here, so its fork's model call cannot land in
    // the next test and take a reply scripted there (a fork's first call may wait for its model thread).
    const deadline = Date.now() + 30_000;
    while (!['completed', 'failed'].includes(await job!.getState()) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await job!.getState()).toBe('completed');
  });
});

describe('engram dream', () => {
  it('--force consolidates with visible progress to completion, and the snapshot restores it', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'engram-dream-project-'));
    const paths = JSON.parse(
      (await engram(['memory', 'path', '--json', '--cwd', cwd], { env: env() })).stdout,
    );
    const mem = paths.memoryDir as string;
    mkdirSync(mem, { recursive: true });
    const seed: Record<string, string> = {
      'MEMORY.md':
        '- [Use pnpm](feedback_pnpm.md) — pnpm, not npm\n- [Prefer pnpm](feedback_pnpm_again.md) — pnpm again\n',
      'feedback_pnpm.md': memory(
        'Use pnpm',
        'The user wants pnpm instead of npm for installs',
        'Always pnpm.',
      ),
      'feedback_pnpm_again.md': memory(
        'Prefer pnpm',
        'User prefers pnpm over npm for installs and scripts',
        'pnpm, never npm.',
      ),
    };
    const old = new Date('2026-10-01T00:00:00Z');
    for (const [f, c] of Object.entries(seed)) {
      writeFileSync(join(mem, f), c);
      utimesSync(join(mem, f), old, old);
    }
    const merged = memory(
      'Use pnpm',
      'The user wants pnpm, never npm, for installs and scripts',
      'Always pnpm.\n\nmerged_from: feedback_pnpm_again.md',
    );
    server.route('dream', isDream, [
      {
        ...reply(
          text('Orienting.'),
          toolUse('Read', { file_path: join(mem, 'feedback_pnpm.md') }),
          toolUse('Read', { file_path: join(mem, 'feedback_pnpm_again.md') }),
        ),
        latencyMs: 600,
      },
      reply(
        toolUse('Write', {
          file_path: join(mem, 'feedback_pnpm.md'),
          content: merged.replace('type: feedback', 'type: feedback\nmerged_from: [feedback_pnpm_again.md]'),
        }),
        toolUse('Write', { file_path: join(mem, 'feedback_pnpm_again.md'), content: '' }),
      ),
      textReply('Merged the two pnpm memories.', { latencyMs: 600 }),
    ]);
    const result = await engram(['dream', '--force', '--cwd', cwd], { env: env(), timeoutMs: 60_000 });
    expect(result.code, result.stderr).toBe(0);
    // Intermediate phases are seen while the (slowed) model works, then the full bar at the end.
    expect(result.stderr).toMatch(/\[#*\.+\] (orient|gather|consolidate|prune) /);
    expect(result.stderr).toMatch(/\[#{20}\] done/);
    expect(result.stdout).toContain('Consolidated memory: 0 created, 1 updated, 1 deleted');
    expect(
      readdirSync(mem)
        .filter((f) => f.endsWith('.md'))
        .sort(),
    ).toEqual(['MEMORY.md', 'feedback_pnpm.md']);
    expect(parseIndexEntries(await fs.readFile(join(mem, 'MEMORY.md'), 'utf8')).map((e) => e.file)).toEqual([
      'feedback_pnpm.md',
    ]);

    const history = JSON.parse(
      (await engram(['memory', 'history', '--json', '--cwd', cwd], { env: env() })).stdout,
    );
    const snapshot = history.snapshots.at(-1).id as string;
    const restore = await engram(['memory', 'restore', snapshot, '--cwd', cwd], { env: env() });
    expect(restore.code, restore.stderr).toBe(0);
    expect(restore.stdout).toMatch(/^Restored 3 files from /);
    expect(await fs.readFile(join(mem, 'feedback_pnpm_again.md'), 'utf8')).toBe(
      seed['feedback_pnpm_again.md'],
    );
    const bad = await engram(['memory', 'restore', '../../etc', '--cwd', cwd], { env: env() });
    expect(bad.code).toBe(2);
  });
});
