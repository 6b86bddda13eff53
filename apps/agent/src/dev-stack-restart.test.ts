import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@engram/queue/local-redis';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, ENGRAM_BIN, engram } from './cli.test-helpers.js';

// Issue 29, Done when: the dev stack restarted under a running `engram serve` and `engram chat` keeps working.
// The keyless playground (`engram dev --scripted-model`), a served tenant and an interactive chat attached to
// it; the stack is stopped and started again (same ports: dev-ports.json); the next served turn and the next
// chat turn succeed without restarting either client.

const closer = new Closer();
beforeAll(() => assertBuilt());
afterEach(async () => {
  await closer.closeAll();
});

interface Proc {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
}

function start(
  args: string[],
  env: Record<string, string | undefined>,
  opts: { stdin?: boolean } = {},
): Proc {
  const child = spawn(process.execPath, [ENGRAM_BIN, ...args], {
    env: { TMPDIR: process.env.TMPDIR, ...env } as NodeJS.ProcessEnv,
    stdio: [opts.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr!.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  closer.defer(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      // SIGINT first: `engram dev` then stops its redis-server (a SIGKILL would leave it running, orphaned).
      process.kill(-child.pid!, 'SIGINT');
      const gone = await Promise.race([
        exited.then(() => true),
        new Promise((r) => setTimeout(r, 15_000, false)),
      ]);
      if (!gone) {
        process.kill(-child.pid!, 'SIGKILL');
        await exited;
      }
    }
  });
  return { child, out: () => out, err: () => err, exited };
}

async function until(what: string, check: () => boolean, proc: Proc, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (proc.child.exitCode !== null)
      throw new Error(`${what}: process exited\n${proc.out()}\n${proc.err()}`);
    if (Date.now() > deadline)
      throw new Error(`${what}: timed out\nstdout: ${proc.out()}\nstderr: ${proc.err()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function startDev(env: Record<string, string | undefined>): Promise<Proc> {
  const dev = start(['dev', '--port', '0', '--scripted-model'], env);
  await until('engram dev ready', () => dev.out().includes('Engram dev stack is running.'), dev);
  return dev;
}

async function stopDev(dev: Proc): Promise<number | null> {
  process.kill(-dev.child.pid!, 'SIGINT');
  return dev.exited;
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

async function servedTurn(url: string, key: string, session: string, prompt: string) {
  const res = await fetch(`${url}/v1/sessions/${session}/turns`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, wait: 10 }),
  });
  return { status: res.status, body: (await res.json()) as { answer?: string; error?: unknown } };
}

describe('a restarted dev stack under a running serve and chat', () => {
  it('the next served turn and the next chat turn succeed without restarting serve or chat', async () => {
    const home = mkdtempSync(join(tmpdir(), 'engram-dev-restart-'));
    const engramHome = join(home, '.engram');
    const env = {
      PATH: process.env.PATH,
      HOME: home,
      ENGRAM_HOME: engramHome,
      ENGRAM_NAMESPACE: uniquePrefix('dev-restart'),
      ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
      ENGRAM_DRAIN_TIMEOUT_MS: '500',
      LOG_LEVEL: 'error',
    };
    // Never 6379 on a shared machine: the home's record names a free port, as a first run would have left it.
    mkdirSync(engramHome, { recursive: true });
    writeFileSync(join(engramHome, 'dev-ports.json'), JSON.stringify({ redis: await freePort() }));

    const first = await startDev(env);
    const stackBefore = readFileSync(join(engramHome, 'dev-stack.json'), 'utf8');

    const workspace = join(home, 'workspaces', 'acme');
    const added = await engram(['tenants', 'add', 'acme', '--workspace', workspace, '--create'], { env });
    expect(added.code, added.stderr).toBe(0);
    const key = added.stdout.trimEnd().split('\n').at(-1)!;

    const serve = start(['serve', '--port', '0'], env);
    await until('serve listening', () => /listening on (http:\/\/\S+)/.test(serve.err()), serve);
    const url = /listening on (http:\/\/\S+)/.exec(serve.err())![1]!;
    const created = await fetch(`${url}/v1/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ cwd: workspace }),
    });
    expect(created.status).toBe(201);
    const session = ((await created.json()) as { id: string }).id;

    const project = mkdtempSync(join(tmpdir(), 'engram-dev-restart-project-'));
    const chat = start(['chat', '--cwd', project], env, { stdin: true });
    await until('chat prompt', () => count(chat.out(), '> ') >= 1, chat);
    const say = async (line: string, answers: number) => {
      chat.child.stdin!.write(`${line}\n`);
      await until(`chat answer ${answers}`, () => count(chat.out(), 'scripted playground') >= answers, chat);
      await until('chat prompt again', () => count(chat.out(), '> ') >= answers + 1, chat);
    };

    // Before the restart: both clients work.
    const before = await servedTurn(url, key, session, 'hello before the restart');
    expect(before.status, JSON.stringify(before.body)).toBe(200);
    expect(before.body.answer).toContain('scripted playground');
    expect(JSON.stringify(before.body)).not.toContain('not-queued');
    await say('hello from chat before the restart', 1);

    // The stack goes away and comes back (Ctrl-C, then `engram dev` again on the same home).
    expect(await stopDev(first)).toBe(0);
    const second = await startDev(env);
    const stackAfter = JSON.parse(readFileSync(join(engramHome, 'dev-stack.json'), 'utf8'));
    const old = JSON.parse(stackBefore);
    expect(stackAfter.backend.url).toBe(old.backend.url);
    expect(stackAfter.scriptedModel).toBe(old.scriptedModel);

    // After it: the same serve and the same chat, no restart of either.
    const after = await servedTurn(url, key, session, 'hello after the restart');
    expect(after.status, JSON.stringify(after.body)).toBe(200);
    expect(after.body.answer).toContain('scripted playground');
    expect(JSON.stringify(after.body)).not.toContain('not-queued');
    await say('hello from chat after the restart', 2);
    // No turn failed (chat prints `engram: <message>` for a failed turn) and no work was left unqueued.
    const complaints = chat
      .err()
      .split('\n')
      .filter((l) => l.startsWith('engram: ') && !l.includes('using the scripted playground model'));
    expect(complaints).toEqual([]);
    // Its memory work is queued, or (its own connection still in its reconnect backoff) kept in the session's
    // outbox and handed over a moment later: never lost.
    const unqueued = chat
      .err()
      .split('\n')
      .filter((l) => l.includes('memory work was not queued'));
    for (const line of unqueued) expect(line).toContain("Kept in the session's outbox");

    chat.child.stdin!.end('/exit\n');
    expect(await chat.exited).toBe(0);
    process.kill(serve.child.pid!, 'SIGTERM');
    await serve.exited;
    expect(await stopDev(second)).toBe(0);
  }, 240_000);
});
