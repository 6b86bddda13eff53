import { existsSync, promises as fs, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { outboxPath } from '@engram/memory-core/extraction/session-record';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { startPrivateRedis } from '@engram/testkit/private-redis';
import { waitUntil } from '@engram/testkit/wait';
import { scriptExtractionFork } from '@engram/worker-service/testing/foreground.test-helpers';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { describe, expect, it } from 'vitest';
import { loadAgentConfig } from '../config.js';
import { runHook } from './hook.js';

// `engram hook Stop` on a transcript in Claude Code's own shape and layout (ENGRAM_HOME = Claude Code's config
// directory): a real worker on a real Redis extracts into Claude Code's memory directory; with Redis down the
// hook answers at once, parks the work in the session's outbox, and the reconciliation sweep recovers it.

const scripted = useModelServer();
const { closer } = scripted;

const FACT = '---\nname: Deploy region\ndescription: Deploys go to region ams\ntype: project\n---\nams.\n';

function scriptExtraction(runs: { n: number }) {
  scriptExtractionFork(scripted.server, () => {
    runs.n++;
    return { file: 'project_deploy.md', content: FACT };
  });
}

/** A Claude Code 2.1.328-shaped session: typed prompt, then (maybe later) the reply and turn bookkeeping. */
function ccEntry(sessionId: string, cwd: string, e: Record<string, unknown>): string {
  return `${JSON.stringify({
    parentUuid: null,
    isSidechain: false,
    userType: 'external',
    cwd,
    sessionId,
    version: '2.1.328',
    gitBranch: 'main',
    entrypoint: 'sdk-cli',
    timestamp: new Date().toISOString(),
    ...e,
  })}\n`;
}

async function claudeProject(claudeHome: string) {
  const repo = mkdtempSync(join(tmpdir(), 'engram-hook-repo-'));
  await fs.mkdir(join(repo, '.git'));
  const paths = await resolveEngramPaths({ engramHome: claudeHome, cwd: repo });
  const sessionId = crypto.randomUUID();
  await fs.mkdir(paths.transcriptDir, { recursive: true });
  const transcript = paths.transcriptPath(sessionId);
  const prompt = ccEntry(sessionId, repo, {
    type: 'user',
    uuid: 'e0a1c3f2-0000-4000-8000-000000000001',
    promptId: 'p1',
    message: { role: 'user', content: 'Remember that we deploy to region ams.' },
  });
  const answer =
    ccEntry(sessionId, repo, {
      type: 'assistant',
      uuid: 'e0a1c3f2-0000-4000-8000-000000000002',
      parentUuid: 'e0a1c3f2-0000-4000-8000-000000000001',
      requestId: 'req_1',
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'claude-sonnet-4-5',
        content: [{ type: 'text', text: 'Noted: region ams.' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 10, output_tokens: 5 },
      },
    }) +
    ccEntry(sessionId, repo, {
      type: 'system',
      subtype: 'turn_duration',
      uuid: 'e0a1c3f2-0000-4000-8000-000000000003',
      parentUuid: 'e0a1c3f2-0000-4000-8000-000000000002',
      durationMs: 900,
    });
  const input = JSON.stringify({
    session_id: sessionId,
    transcript_path: transcript,
    cwd: repo,
    hook_event_name: 'Stop',
    stop_hook_active: false,
  });
  return { paths, sessionId, transcript, prompt, answer, input };
}

function hookConfig(claudeHome: string, redisUrl: string, namespace: string) {
  return loadAgentConfig({
    HOME: claudeHome,
    ENGRAM_HOME: claudeHome,
    ENGRAM_NAMESPACE: namespace,
    REDIS_URL: redisUrl,
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: scripted.server.url,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
    ENGRAM_ENQUEUE_TIMEOUT_MS: '1500',
  });
}

async function indexFiles(memoryIndexPath: string): Promise<string[]> {
  return parseIndexEntries(await fs.readFile(memoryIndexPath, 'utf8').catch(() => '')).map((e) => e.file);
}

describe('engram hook Stop', () => {
  it("extracts from Claude Code's transcript into Claude Code's memory directory, waiting for the late reply", async () => {
    const runs = { n: 0 };
    scriptExtraction(runs);
    const redis = await startPrivateRedis(closer, { prefix: 'engram-hook-redis-' });
    const claudeHome = mkdtempSync(join(tmpdir(), 'engram-hook-claude-'));
    const namespace = uniquePrefix('hook');
    await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: claudeHome,
      queues: 'extract',
      closer,
      backendEnv: { REDIS_URL: redis.url },
      namespace,
    });
    const s = await claudeProject(claudeHome);
    // Claude Code fires Stop before the reply lands; it follows ~0.1 s later.
    await fs.writeFile(s.transcript, s.prompt);
    const late = new Promise((r) => setTimeout(r, 150)).then(() => fs.appendFile(s.transcript, s.answer));
    const result = await runHook(hookConfig(claudeHome, redis.url, namespace), 'Stop', s.input);
    await late;
    expect(result.stdout).toBe('');
    expect(result.note).toMatch(/memory extraction queued/);

    const { MemoryQueue } = await import('@engram/memory-client/memory-queue');
    const q = new MemoryQueue(hookConfig(claudeHome, redis.url, namespace));
    closer.defer(() => q.close());
    const jobId = /job ([^)]+)\)/.exec(result.note)![1]!;
    await waitUntil(async () => (await q.jobOutcome('extract', jobId)).finished, 'extract job', {
      timeoutMs: 45_000,
    });
    // The leaf is the reply that landed after Stop fired (line 2), not the prompt Stop saw first.
    expect(await q.jobOutcome('extract', jobId)).toMatchObject({
      result: {
        outcome: 'extracted',
        toSeq: 2,
        memories: [{ path: 'project_deploy.md', action: 'created' }],
      },
    });
    await waitUntil(async () => (await indexFiles(s.paths.memoryIndexPath)).length === 1, 'memory saved', {
      timeoutMs: 5_000,
    });
    expect(s.paths.memoryDir).toBe(join(s.paths.projectDir, 'memory'));
    expect(s.paths.projectDir.startsWith(join(claudeHome, 'projects'))).toBe(true);
    expect(await fs.readFile(join(s.paths.memoryDir, 'project_deploy.md'), 'utf8')).toContain('ams');
    expect(runs.n).toBe(1);

    // The same turn's Stop again (Claude Code re-fires after a blocked Stop): the cursor covers it, no new fork.
    const again = await runHook(hookConfig(claudeHome, redis.url, namespace), 'Stop', s.input);
    expect(again.note).toMatch(/queued/);
    await new Promise((r) => setTimeout(r, 1500));
    expect(runs.n).toBe(1);
  }, 90_000);

  it('with the stack down: answers at once, parks the work in the outbox, and the sweep recovers it', async () => {
    const runs = { n: 0 };
    scriptExtraction(runs);
    const redis = await startPrivateRedis(closer, { prefix: 'engram-hook-down-', persist: true });
    const claudeHome = mkdtempSync(join(tmpdir(), 'engram-hook-down-'));
    const namespace = uniquePrefix('hookdown');
    const s = await claudeProject(claudeHome);
    await fs.writeFile(s.transcript, s.prompt + s.answer);
    await redis.stop();

    const started = Date.now();
    const result = await runHook(hookConfig(claudeHome, redis.url, namespace), 'Stop', s.input);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(result.note).toMatch(/Kept in the session's outbox/);
    expect(existsSync(outboxPath(s.paths.sessionDir(s.sessionId)))).toBe(true);

    await redis.start();
    await startTestWorkerService({
      modelUrl: scripted.server.url,
      engramHome: claudeHome,
      queues: 'extract,reconcile',
      closer,
      backendEnv: { REDIS_URL: redis.url },
      namespace,
      env: { ENGRAM_RECONCILE_INTERVAL_MS: '500', ENGRAM_RECONCILE_QUIET_MS: '200' },
    });
    await waitUntil(async () => (await indexFiles(s.paths.memoryIndexPath)).length === 1, 'recovered', {
      timeoutMs: 60_000,
      ignoreErrors: true,
    });
    expect(runs.n).toBe(1);
  }, 120_000);

  it('refuses a transcript outside ENGRAM_HOME and bad input with a reason, doing nothing', async () => {
    const claudeHome = mkdtempSync(join(tmpdir(), 'engram-hook-bad-'));
    const s = await claudeProject(claudeHome);
    const config = hookConfig(claudeHome, 'redis://127.0.0.1:1', 'x');
    const elsewhere = JSON.stringify({ ...JSON.parse(s.input), transcript_path: '/etc/passwd' });
    expect((await runHook(config, 'Stop', elsewhere)).note).toMatch(/not under ENGRAM_HOME/);
    expect((await runHook(config, 'Stop', 'not json')).note).toMatch(/not JSON/);
    expect(existsSync(s.paths.sessionDir(s.sessionId))).toBe(false);
  });
});
