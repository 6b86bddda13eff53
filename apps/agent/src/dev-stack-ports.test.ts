import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryQueue, QueueNotConfiguredError } from '@engram/memory-client/memory-queue';
import { readOutbox } from '@engram/memory-core/extraction/session-record';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import { freePort } from '@engram/queue/local-redis';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { startPrivateRedis } from '@engram/testkit/private-redis';
import { textReply } from '@engram/testkit/replies';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, ENGRAM_BIN, engram } from './cli.test-helpers.js';
import { loadAgentConfig } from './config.js';

// Issue 29 item 3: a restarted `engram dev` keeps its ports, so clients that read dev-stack.json once find it
// again; a CLI attaches only to its own home's stack or an explicit REDIS_URL, never to whatever answers on
// the default URL (another home's stack).

const closer = new Closer();
let model: ModelServer;
beforeAll(async () => {
  assertBuilt();
  model = await startModelServer({ fallback: () => textReply('ok') });
});
afterAll(async () => {
  await model.close();
});
afterEach(async () => {
  await closer.closeAll();
});

function freshHome(): string {
  return mkdtempSync(join(tmpdir(), 'engram-dev-ports-'));
}

function baseEnv(home: string, extra: Record<string, string | undefined> = {}) {
  return {
    PATH: process.env.PATH,
    HOME: home,
    ENGRAM_HOME: join(home, '.engram'),
    ENGRAM_NAMESPACE: uniquePrefix('dev-ports'),
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    LOG_LEVEL: 'error',
    ...extra,
  };
}

interface Dev {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

async function startDev(args: string[], env: Record<string, string | undefined>): Promise<Dev> {
  const child = spawn(process.execPath, [ENGRAM_BIN, 'dev', ...args], {
    env: { TMPDIR: process.env.TMPDIR, ...env } as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const deadline = Date.now() + 60_000;
  while (!out.includes('Engram dev stack is running.') && child.exitCode === null && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 50));
  closer.defer(async () => {
    if (child.exitCode === null) {
      process.kill(-child.pid!, 'SIGINT');
      await exited;
    }
  });
  if (!out.includes('Engram dev stack is running.')) throw new Error(`engram dev did not start:\n${out}`);
  return { child, output: () => out, exited };
}

async function stopDev(dev: Dev): Promise<number | null> {
  process.kill(-dev.child.pid!, 'SIGINT');
  return dev.exited;
}

function devStack(home: string): { backend: { url: string }; scriptedModel: string } {
  return JSON.parse(readFileSync(join(home, '.engram', 'dev-stack.json'), 'utf8'));
}

describe('engram dev keeps its ports across restarts', () => {
  it('start, stop, start on one home: the same Redis and scripted-model ports; a new one only when taken', async () => {
    const home = freshHome();
    const env = baseEnv(home);
    // Never 6379 on a shared machine: the home's record names a free port, as a first run would have left it.
    const redisPort = await freePort();
    mkdirSync(join(home, '.engram'), { recursive: true });
    writeFileSync(join(home, '.engram', 'dev-ports.json'), JSON.stringify({ redis: redisPort }));

    const first = await startDev(['--port', '0', '--scripted-model'], env);
    expect(first.output()).toContain('BullMQ on Redis (redis-server-child)');
    const before = devStack(home);
    expect(new URL(before.backend.url).port).toBe(String(redisPort));
    expect(await stopDev(first)).toBe(0);

    const second = await startDev(['--port', '0', '--scripted-model'], env);
    const after = devStack(home);
    expect(after.backend.url).toBe(before.backend.url);
    expect(after.scriptedModel).toBe(before.scriptedModel);
    expect(await stopDev(second)).toBe(0);

    // The recorded Redis port is taken by someone else meanwhile: a free one, recorded for next time.
    const squatter: Server = createServer();
    await new Promise<void>((resolve) => squatter.listen(redisPort, '127.0.0.1', () => resolve()));
    closer.defer(() => new Promise((resolve) => squatter.close(resolve)));
    const third = await startDev(['--port', '0', '--scripted-model'], env);
    const moved = devStack(home);
    expect(new URL(moved.backend.url).port).not.toBe(String(redisPort));
    expect(moved.scriptedModel).toBe(before.scriptedModel);
    const ports = JSON.parse(readFileSync(join(home, '.engram', 'dev-ports.json'), 'utf8'));
    expect(ports).toEqual({
      redis: Number(new URL(moved.backend.url).port),
      scriptedModel: Number(new URL(before.scriptedModel).port),
    });
    expect(await stopDev(third)).toBe(0);
  }, 240_000);
});

describe('a CLI attaches only to its own home stack or an explicit REDIS_URL', () => {
  async function keys(url: string): Promise<string[]> {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
    try {
      return await client.keys('*');
    } finally {
      client.disconnect();
    }
  }

  it('an implicit default backend is never connected to: the work waits in the outbox (REDIS_URL: queued)', async () => {
    // "Another home's stack" answering at the default URL: a private Redis the implicit backend points at.
    const other = await startPrivateRedis(closer, { prefix: 'engram-other-home-redis-' });
    const home = freshHome();
    const env = baseEnv(home, { ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: model.url });
    const base = loadAgentConfig(env);
    expect(base.backend).toMatchObject({ kind: 'redis', implicit: true });
    const projectRoot = mkdtempSync(join(tmpdir(), 'engram-dev-ports-project-'));
    const transcriptDir = sanitizePath(projectRoot);
    const payload = {
      sessionId: 'session-1',
      projectDir: sanitizePath(projectRoot),
      transcriptDir,
      leafUuid: '00000000-0000-4000-8000-000000000001',
      leafSeq: 1,
      requestedAt: new Date().toISOString(),
    };

    const implicit = new MemoryQueue({ ...base, backend: { kind: 'redis', url: other.url, implicit: true } });
    const outcome = await implicit.enqueue('extract', payload);
    await expect(implicit.engine.state.getJson('anything')).rejects.toBeInstanceOf(QueueNotConfiguredError);
    await implicit.close();
    expect(outcome).toMatchObject({ status: 'not-queued', kept: true });
    expect(outcome.status === 'not-queued' && outcome.reason).toContain('`npm run dev`');
    const sessionDir = join(base.engramHome, 'projects', transcriptDir, 'session-1');
    expect((await readOutbox(sessionDir)).map((i) => i.kind)).toEqual(['extract']);
    expect(await keys(other.url)).toEqual([]);

    // Positive control: the same Redis named explicitly is used.
    const explicit = new MemoryQueue({
      ...base,
      backend: { kind: 'redis', url: other.url, implicit: false },
    });
    const queued = await explicit.enqueue('extract', { ...payload, sessionId: 'session-2' });
    await explicit.close();
    expect(queued.status).toBe('queued');
    expect((await keys(other.url)).some((k) => k.startsWith(base.namespace))).toBe(true);
  });

  it('run, dream, doctor and serve on a fresh home without REDIS_URL say how to get a queue; REDIS_URL works', async () => {
    const home = freshHome();
    const cwd = mkdtempSync(join(tmpdir(), 'engram-dev-ports-project-'));
    const env = baseEnv(home, { ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: model.url });

    const run = await engram(['run', '-p', 'hello', '--cwd', cwd, '--output-format', 'json'], {
      env,
      timeoutMs: 60_000,
    });
    // Kept in the outbox, so nothing was lost: exit 0 (3 is for memory work that was lost).
    expect(run.code, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout);
    expect(result.memory.kept).toBe(true);
    expect(result.answer).toBe('ok');
    expect(result.memory.status).toBe('not-queued');
    expect(result.memory.reason).toContain(`no \`engram dev\` is running for ENGRAM_HOME ${env.ENGRAM_HOME}`);
    expect(result.memory.reason).toContain("Kept in the session's outbox");

    const dream = await engram(['dream', '--force', '--cwd', cwd], { env });
    expect(dream.code).toBe(2);
    expect(dream.stderr).toContain('engram dream: no queue engine');
    expect(dream.stderr).toContain('`npm run dev`');

    const doctor = await engram(['doctor', '--json'], { env });
    const checks = JSON.parse(doctor.stdout).checks as Array<{ ok: boolean; name: string; fix?: string }>;
    const queue = checks.find((c) => c.name === 'queue engine');
    expect(queue).toMatchObject({ ok: false });
    expect(queue?.fix).toContain('or set REDIS_URL');

    const serve = await engram(['serve', '--port', '0'], { env });
    expect(serve.code).toBe(2);
    expect(serve.stderr).toContain('engram serve: no queue engine');

    // Positive control: an explicit REDIS_URL is used (doctor reaches it; run queues its extraction).
    const redis = await startPrivateRedis(closer, { prefix: 'engram-explicit-redis-' });
    const explicit = { ...env, REDIS_URL: redis.url, ENGRAM_DRAIN_TIMEOUT_MS: '0' };
    const doctorOk = await engram(['doctor', '--json'], { env: explicit });
    const queueOk = (JSON.parse(doctorOk.stdout).checks as Array<{ ok: boolean; name: string }>).find(
      (c) => c.name === 'queue engine',
    );
    expect(queueOk?.ok).toBe(true);
    const runOk = await engram(['run', '-p', 'hello again', '--cwd', cwd, '--output-format', 'json'], {
      env: explicit,
      timeoutMs: 60_000,
    });
    expect(JSON.parse(runOk.stdout).memory.status).not.toBe('not-queued');
  }, 180_000);
});
