import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import type { WorkerService } from '@engram/worker-service/service';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { assertBuilt, ENGRAM_BIN, engram } from './cli.test-helpers.js';

// What a new user meets first: every error they can cause says what happened and what to do, with the
// documented exit code; one `engram dev` per ENGRAM_HOME; the keyless scripted-model stack; a dream whose
// model is unreachable fails before it snapshots anything; Ctrl-C stops a stack cleanly.

beforeAll(() => assertBuilt());

const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

function baseEnv(home: string, extra: Record<string, string | undefined> = {}) {
  return {
    PATH: process.env.PATH,
    HOME: home,
    ENGRAM_HOME: join(home, '.engram'),
    ENGRAM_NAMESPACE: uniquePrefix('first-run'),
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    LOG_LEVEL: 'error',
    ...extra,
  };
}

function freshHome(): string {
  return mkdtempSync(join(tmpdir(), 'engram-first-run-'));
}

interface Dev {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** `engram dev` in its own process group (as a terminal runs it), until its ready line or its exit. */
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
  stops.push(async () => {
    if (child.exitCode === null) {
      process.kill(-child.pid!, 'SIGINT');
      await exited;
    }
  });
  return { child, output: () => out, exited };
}

/** Ctrl-C as a terminal sends it: SIGINT to the whole foreground process group. */
async function ctrlC(dev: Dev): Promise<number | null> {
  process.kill(-dev.child.pid!, 'SIGINT');
  return dev.exited;
}

describe('errors a user can cause', () => {
  it('memory show of a missing file names it and the command that lists what there is (exit 1)', async () => {
    const home = freshHome();
    const cwd = mkdtempSync(join(tmpdir(), 'engram-first-run-project-'));
    const result = await engram(['memory', 'show', 'nonexistent.md', '--cwd', cwd], { env: baseEnv(home) });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^engram: no memory named nonexistent\.md in \S+memory\. `engram memory list/,
    );
    expect(result.stderr).not.toContain('ENOENT');
    const edit = await engram(['memory', 'edit', 'nonexistent.md', '--cwd', cwd], {
      env: { ...baseEnv(home), EDITOR: 'true' },
    });
    expect(edit.code).toBe(1);
    expect(edit.stderr).toContain('no memory named nonexistent.md');
  });

  it('ENGRAM_HOME pointing at a file is a configuration error for list, run and dev (exit 2)', async () => {
    const home = freshHome();
    const file = join(home, 'engram-home-file');
    writeFileSync(file, 'not a directory');
    const env = baseEnv(home, { ENGRAM_HOME: file, ANTHROPIC_API_KEY: 'k' });
    for (const args of [
      ['memory', 'list'],
      ['run', '-p', 'hi'],
      ['dev', '--port', '0'],
    ]) {
      const result = await engram(args, { env });
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toContain(`ENGRAM_HOME is ${file}, but that is a file.`);
      expect(result.stderr).toContain('Point ENGRAM_HOME at a directory');
      expect(result.stdout).not.toContain('No memories yet');
    }
  });

  it('a session id the job payloads would refuse is refused by the CLI up front (exit 2)', async () => {
    const home = freshHome();
    const result = await engram(['run', '-p', 'hi', '--session', 'a.b'], {
      env: baseEnv(home, { ANTHROPIC_API_KEY: 'k', REDIS_URL: inject('redisUrl') }),
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Session id must be 1–128 characters of [A-Za-z0-9_-]');
  });

  it('a busy --port says so and names the flag that changes it (exit 2)', async () => {
    const busy: Server = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', () => resolve()));
    stops.push(() => new Promise((resolve) => busy.close(resolve)));
    const port = (busy.address() as { port: number }).port;
    const home = freshHome();
    const result = await engram(['dev', '--port', String(port)], {
      env: baseEnv(home, { REDIS_URL: inject('redisUrl') }),
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`port ${port} on 127.0.0.1 is already in use`);
    expect(result.stderr).toContain('choose another with `engram dev --port <n>`');
    expect(result.stderr).not.toContain('EADDRINUSE');
    expect(existsSync(join(home, '.engram', 'dev-stack.json'))).toBe(false);
  });
});

describe('local stacks', () => {
  it('one dev-stack.json owner: a second engram dev on the same home refuses and leaves the first alone', async () => {
    const home = freshHome();
    const env = baseEnv(home, { REDIS_URL: inject('redisUrl') });
    const first = await startDev(['--port', '0'], env);
    expect(first.output()).toContain('Engram dev stack is running.');
    const record = readFileSync(join(home, '.engram', 'dev-stack.json'), 'utf8');
    const second = await engram(['dev', '--port', '0'], { env, timeoutMs: 60_000 });
    expect(second.code).toBe(2);
    expect(second.stderr).toContain(`another \`engram dev\` (pid ${first.child.pid}`);
    expect(second.stderr).toContain('start this one with another ENGRAM_HOME');
    expect(readFileSync(join(home, '.engram', 'dev-stack.json'), 'utf8')).toBe(record);
    expect(await ctrlC(first)).toBe(0);
    expect(existsSync(join(home, '.engram', 'dev-stack.json'))).toBe(false);
  }, 120_000);

  it('Ctrl-C to the whole process group stops a redis-server-child stack cleanly (exit 0, no error)', async () => {
    const home = freshHome();
    const dev = await startDev(['--port', '0'], baseEnv(home));
    expect(dev.output()).toContain('BullMQ on Redis (redis-server-child)');
    expect(await ctrlC(dev)).toBe(0);
    expect(dev.output()).not.toMatch(/Unhandled|ECONNREFUSED|Connection is closed|Error:/);
  }, 120_000);

  it('keyless: engram dev --scripted-model wires workers and agents to a labelled scripted model; a memory is saved and recalled', async () => {
    const home = freshHome();
    const cwd = mkdtempSync(join(tmpdir(), 'engram-first-run-project-'));
    const env = baseEnv(home, { REDIS_URL: inject('redisUrl'), ENGRAM_DRAIN_TIMEOUT_MS: '30000' });
    const dev = await startDev(['--port', '0', '--scripted-model'], env);
    expect(dev.output()).toMatch(/model {8}: http:\/\/127\.0\.0\.1:\d+ \[scripted playground model/);

    const save = await engram(
      ['run', '-p', 'Always use pnpm in this repo, never npm.', '--cwd', cwd, '--output-format', 'json'],
      { env, timeoutMs: 60_000 },
    );
    expect(save.code, save.stderr).toBe(0);
    const saved = JSON.parse(save.stdout);
    expect(saved.model).toBe('scripted-playground');
    expect(saved.answer).toContain('[scripted playground model');
    expect(saved.memory.status).toBe('done');
    const file = saved.memory.receipts[0].memories[0].path as string;
    expect(file).toMatch(/^feedback_.*pnpm.*\.md$/);

    const recall = await engram(['run', '-p', 'Should I use pnpm or npm to install?', '--cwd', cwd], {
      env,
      timeoutMs: 60_000,
    });
    expect(recall.code, recall.stderr).toBe(0);
    expect(recall.stderr).toContain('using the scripted playground model');
    expect(recall.stderr).toContain(`Recalled 1 memory (${file})`);
    expect(recall.stdout).toContain('From memory: Always use pnpm in this repo, never npm.');
    expect(await ctrlC(dev)).toBe(0);
  }, 180_000);

  it('without a key or --scripted-model, engram dev says the workers have no model', async () => {
    const home = freshHome();
    const dev = await startDev(['--port', '0'], baseEnv(home, { REDIS_URL: inject('redisUrl') }));
    expect(dev.output()).toContain(
      'ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL are unset, so memory jobs will fail',
    );
    expect(await ctrlC(dev)).toBe(0);
  }, 120_000);
});

describe('engram dream with an unreachable model', () => {
  it('fails fast, before taking any snapshot, and says what to check (exit 1)', async () => {
    const home = freshHome();
    const env = baseEnv(home, {
      REDIS_URL: inject('redisUrl'),
      ANTHROPIC_API_KEY: 'k',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:1',
    });
    const service: WorkerService = await startTestWorkerService({
      modelUrl: 'http://127.0.0.1:1',
      engramHome: env.ENGRAM_HOME,
      namespace: env.ENGRAM_NAMESPACE,
      queues: 'dream',
    });
    stops.push(() => service.stop('test'));
    const cwd = mkdtempSync(join(tmpdir(), 'engram-first-run-project-'));
    const paths = JSON.parse((await engram(['memory', 'path', '--json', '--cwd', cwd], { env })).stdout);
    mkdirSync(paths.memoryDir, { recursive: true });
    writeFileSync(
      join(paths.memoryDir, 'feedback_pnpm.md'),
      '---\nname: pnpm\ndescription: use pnpm\ntype: feedback\n---\nUse pnpm.\n',
    );
    const dream = await engram(['dream', '--force', '--cwd', cwd], { env, timeoutMs: 60_000 });
    expect(dream.code).toBe(1);
    expect(dream.stderr).toMatch(/consolidation failed: .*MODEL_UNREACHABLE.*127\.0\.0\.1:1 is unreachable/);
    expect(dream.stderr).toContain('nothing was changed');
    const history = JSON.parse((await engram(['memory', 'history', '--json', '--cwd', cwd], { env })).stdout);
    expect(history.snapshots).toEqual([]);
  }, 90_000);
});
