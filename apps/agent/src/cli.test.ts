import { existsSync, promises as fs, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readOutbox } from '@engram/memory-core/extraction/session-record';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, type RecordedRequest, startModelServer } from '@engram/testkit/model-server';
import { startPrivateRedis } from '@engram/testkit/private-redis';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import type { WorkerService } from '@engram/worker-service/service';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { assertBuilt, engram, isFork, lastUser, textOf } from './cli.test-helpers.js';

// The `engram` binary as a subprocess, against real Redis, real workers and the scripted model server.

const MEMORY = [
  '---',
  'name: Use pnpm',
  'description: The user wants pnpm, never npm, in this repo',
  'type: feedback',
  '---',
  'Use pnpm.',
  '',
  '**Why:** npm breaks their workspace links.',
  '**How to apply:** pnpm install / pnpm test.',
  '',
].join('\n');

let server: ModelServer;
let service: WorkerService;
let engramHome: string;
let home: string;
let namespace: string;
const closer = new Closer();

/** Main-agent replies come from `mainReplies`; the extraction fork writes the pnpm memory when asked to. */
let mainReplies: (r: RecordedRequest) => ScriptStep;

beforeAll(async () => {
  assertBuilt();
  server = await startModelServer();
  engramHome = mkdtempSync(join(tmpdir(), 'engram-cli-home-'));
  home = mkdtempSync(join(tmpdir(), 'engram-cli-user-'));
  namespace = uniquePrefix('cli');
  service = await startTestWorkerService({ modelUrl: server.url, engramHome, namespace, queues: 'extract' });
});
afterAll(async () => {
  await service.stop('test');
  await server.close();
});
beforeEach(() => {
  mainReplies = () => textReply('Noted.');
  server.respond((r) => {
    if (!isFork(r)) return mainReplies(r);
    if (lastUser(r).includes('You are now the memory extraction subagent')) {
      const memoryDir = /persistent, file-based memory at `([^`]+)`/.exec(JSON.stringify(r.body.system))?.[1];
      if (!lastUser(r).includes('pnpm') && !JSON.stringify(r.body.messages).includes('pnpm'))
        return textReply('Nothing to save.');
      return reply(
        text('Saving.'),
        toolUse('Write', { file_path: `${memoryDir}/feedback_pnpm.md`, content: MEMORY }),
      );
    }
    return textReply('Saved.');
  });
});
afterEach(async () => {
  await closer.closeAll();
  server.reset();
});

function env(extra: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  return {
    PATH: process.env.PATH,
    HOME: home,
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: namespace,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: server.url,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    ENGRAM_DRAIN_TIMEOUT_MS: '15000',
    ...extra,
  };
}

function project(): string {
  return mkdtempSync(join(tmpdir(), 'engram-cli-project-'));
}

describe('engram run', () => {
  it('answers, then drains its extraction so the memory file exists when the process has exited', async () => {
    const cwd = project();
    const result = await engram(
      [
        'run',
        '-p',
        'Always use pnpm here, never npm — npm breaks our links.',
        '--cwd',
        cwd,
        '--output-format',
        'json',
      ],
      { env: env() },
    );
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout);
    expect(out.answer).toBe('Noted.');
    expect(out.memory.extract.status).toBe('queued');
    expect(out.memory.status).toBe('done');
    expect(out.memory.drained).toBe(true);
    expect(out.memory.receipts[0].memories).toEqual([
      { path: 'feedback_pnpm.md', type: 'feedback', action: 'created' },
    ]);
    const paths = JSON.parse(
      (await engram(['memory', 'path', '--json', '--cwd', cwd], { env: env() })).stdout,
    );
    expect(existsSync(join(paths.memoryDir, 'feedback_pnpm.md'))).toBe(true);

    // A new session in the same project sees the pointer in its first user message.
    server.reset();
    mainReplies = () => textReply('You use pnpm here.');
    server.respond((r) => (isFork(r) ? textReply('Nothing to save.') : mainReplies(r)));
    const second = await engram(['run', '-p', 'Which package manager do I use?', '--cwd', cwd], {
      env: env(),
    });
    expect(second.code).toBe(0);
    expect(second.stdout.trim()).toBe('You use pnpm here.');
    const first = server.messageRequests().find((r) => !isFork(r))!;
    expect(textOf(first.body.messages[0]?.content)).toContain('- [Use pnpm](feedback_pnpm.md)');
  });

  it('prints the answer, exits 0 and says the work waits in the outbox when Redis is down (nothing lost)', async () => {
    const cwd = project();
    const result = await engram(['run', '-p', 'hello there', '--cwd', cwd], {
      env: env({ REDIS_URL: 'redis://127.0.0.1:1' }),
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe('Noted.');
    expect(result.stderr).toContain("memory work not queued yet, kept in the session's outbox");
    const json = await engram(['run', '-p', 'hello there', '--cwd', cwd, '--output-format', 'json'], {
      env: env({ REDIS_URL: 'redis://127.0.0.1:1' }),
    });
    expect(json.code, json.stderr).toBe(0);
    expect(json.stderr).toContain("kept in the session's outbox");
    const out = JSON.parse(json.stdout);
    expect(out.answer).toBe('Noted.');
    expect(out.memory.status).toBe('not-queued');
    expect(out.memory.kept).toBe(true);
    expect(out.memory.reason).toMatch(/127\.0\.0\.1:1|ECONNREFUSED|unavailable|timed out/i);
    // Durable: the extraction is in the session's outbox on disk (paths asked with the queue still down: a CLI
    // that reaches a queue hands waiting outboxes over).
    const paths = JSON.parse(
      (
        await engram(['memory', 'path', '--json', '--cwd', cwd], {
          env: env({ REDIS_URL: 'redis://127.0.0.1:1' }),
        })
      ).stdout,
    );
    const sessionDir = join(paths.transcriptDir, out.sessionId);
    expect((await readOutbox(sessionDir)).map((i) => i.kind)).toContain('extract');
  });

  it('exits 3 with status "failed" (never "pending") when the extraction job fails for good', async () => {
    server.respond((r) =>
      isFork(r)
        ? { kind: 'error', status: 401, type: 'authentication_error', message: 'invalid x-api-key' }
        : textReply('Noted.'),
    );
    const result = await engram(
      ['run', '-p', 'Always use pnpm here.', '--cwd', project(), '--output-format', 'json'],
      { env: env() },
    );
    expect(result.code, result.stderr).toBe(3);
    const out = JSON.parse(result.stdout);
    expect(out.memory.status).toBe('failed');
    expect(out.memory.reason).toContain('invalid x-api-key');
    expect(out.memory.drained).toBe(false);
    const text = await engram(['run', '-p', 'Always use pnpm here.', '--cwd', project()], { env: env() });
    expect(text.code).toBe(3);
    expect(text.stderr).toMatch(/memory extraction failed after 1 attempt: .*invalid x-api-key/);
    expect(text.stderr).not.toContain('pending');
  });

  it('loads CLAUDE.md files in the documented order and a paths-scoped rule only after a matching file was read', async () => {
    const root = project();
    const sub = join(root, 'svc');
    mkdirSync(join(root, '.claude', 'rules'), { recursive: true });
    mkdirSync(join(home, '.claude'), { recursive: true });
    mkdirSync(join(sub, 'db'), { recursive: true });
    const managed = join(root, 'managed-CLAUDE.md');
    writeFileSync(managed, 'RULE-MANAGED');
    writeFileSync(join(home, '.claude', 'CLAUDE.md'), 'RULE-USER');
    writeFileSync(join(root, 'CLAUDE.md'), 'RULE-PROJECT-ROOT');
    writeFileSync(join(root, '.claude', 'CLAUDE.md'), 'RULE-PROJECT-DOTCLAUDE');
    writeFileSync(join(root, '.claude', 'rules', 'style.md'), 'RULE-PROJECT-RULES');
    writeFileSync(
      join(root, '.claude', 'rules', 'sql.md'),
      '---\npaths:\n  - "svc/db/**/*.sql"\n---\nRULE-SQL-SCOPED',
    );
    writeFileSync(join(sub, 'CLAUDE.md'), 'RULE-PROJECT-SUB');
    writeFileSync(join(root, 'CLAUDE.local.md'), 'RULE-LOCAL');
    writeFileSync(join(sub, 'db', 'users.sql'), 'select 1;');
    // Make root a git repository so it is the project root for a session launched in svc/.
    mkdirSync(join(root, '.git'));
    writeFileSync(join(root, '.git', 'HEAD'), 'ref: refs/heads/main\n');
    let calls = 0;
    mainReplies = () => {
      calls++;
      return calls === 1
        ? reply(toolUse('Read', { file_path: join(sub, 'db', 'users.sql') }))
        : textReply('Read it.');
    };
    const result = await engram(['run', '-p', 'look at the users table', '--cwd', sub], {
      env: env({ ENGRAM_MANAGED_CLAUDE_MD: managed }),
    });
    expect(result.code).toBe(0);
    const mains = server.messageRequests().filter((r) => !isFork(r));
    const context = textOf(mains[0]!.body.messages[0]?.content);
    const order = [
      'RULE-MANAGED',
      'RULE-USER',
      'RULE-PROJECT-ROOT',
      'RULE-PROJECT-DOTCLAUDE',
      'RULE-PROJECT-RULES',
      'RULE-PROJECT-SUB',
      'RULE-LOCAL',
    ].map((marker) => context.indexOf(marker));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(JSON.stringify(mains[0]!.body.messages)).not.toContain('RULE-SQL-SCOPED');
    expect(JSON.stringify(mains[1]!.body.messages)).toContain('RULE-SQL-SCOPED');
  });

  it('tells the user when MEMORY.md overflows its caps, naming how many entries were cut', async () => {
    const cwd = project();
    const paths = JSON.parse(
      (await engram(['memory', 'path', '--json', '--cwd', cwd], { env: env() })).stdout,
    );
    mkdirSync(paths.memoryDir, { recursive: true });
    const lines = Array.from({ length: 230 }, (_, i) => `- [Note ${i}](note_${i}.md) — fact number ${i}`);
    writeFileSync(paths.index, `${lines.join('\n')}\n`);
    const result = await engram(['run', '-p', 'hi there', '--cwd', cwd], { env: env() });
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/MEMORY\.md is 230 lines \(limit 200\).*30 memory entries were cut/);
  });
});

describe('engram memory', () => {
  it('forget removes the file and its index pointer, and list shows what is left', async () => {
    const cwd = project();
    const paths = JSON.parse(
      (await engram(['memory', 'path', '--json', '--cwd', cwd], { env: env() })).stdout,
    );
    mkdirSync(paths.memoryDir, { recursive: true });
    writeFileSync(join(paths.memoryDir, 'feedback_pnpm.md'), MEMORY);
    writeFileSync(
      join(paths.memoryDir, 'user_role.md'),
      '---\nname: Role\ndescription: Go developer\ntype: user\n---\nGo.\n',
    );
    writeFileSync(
      paths.index,
      '# Index\n- [Use pnpm](feedback_pnpm.md) — pnpm\n- [Role](user_role.md) — Go developer\n',
    );
    const forget = await engram(['memory', 'forget', 'feedback_pnpm.md', '--cwd', cwd], { env: env() });
    expect(forget.code).toBe(0);
    expect(existsSync(join(paths.memoryDir, 'feedback_pnpm.md'))).toBe(false);
    const index = await fs.readFile(paths.index, 'utf8');
    expect(parseIndexEntries(index).map((e) => e.file)).toEqual(['user_role.md']);
    expect(index.startsWith('# Index\n')).toBe(true);
    const list = JSON.parse(
      (await engram(['memory', 'list', '--json', '--cwd', cwd], { env: env() })).stdout,
    );
    expect(list.memories.map((m: { file: string }) => m.file)).toEqual(['user_role.md']);
    const missing = await engram(['memory', 'forget', 'nope.md', '--cwd', cwd], { env: env() });
    expect(missing.code).toBe(1);
    const escaped = await engram(['memory', 'show', '../../etc/passwd.md', '--cwd', cwd], { env: env() });
    expect(escaped.code).toBe(2);
    expect(escaped.stderr).toContain('leaves the memory directory');
  });
});

describe('engram doctor', () => {
  it('fails readably on a Redis with allkeys-lru, naming the fix', async () => {
    const redis = await startPrivateRedis(closer, { prefix: 'engram-doctor-redis-' });
    const client = new Redis(redis.url);
    await client.config('SET', 'maxmemory-policy', 'allkeys-lru');
    client.disconnect();
    const result = await engram(['doctor'], { env: env({ REDIS_URL: redis.url }) });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(
      /FAIL {2}queue engine: Redis [\d.]+ at redis:\/\/127\.0\.0\.1:\d+\/? \(configured\), maxmemory-policy allkeys-lru/,
    );
    expect(result.stdout).toContain('CONFIG SET maxmemory-policy noeviction');
  });

  it('reports every check ok on a healthy setup with workers running', async () => {
    const result = await engram(['doctor', '--json'], { env: env() });
    const report = JSON.parse(result.stdout) as { checks: Array<{ ok: boolean; name: string }> };
    const byName = Object.fromEntries(report.checks.map((c) => [c.name, c.ok]));
    expect(byName['queue engine']).toBe(true);
    expect(byName.ENGRAM_HOME).toBe(true);
    expect(byName.model).toBe(true);
    expect(byName['workers: extract']).toBe(true);
    // This test's worker service consumes only the extract queue: doctor says so for the others.
    expect(byName['workers: recall']).toBe(false);
  });
});

describe('configuration and usage errors', () => {
  it('exits 2 with a readable message for a bad option or configuration', async () => {
    const noPrompt = await engram(['run'], { env: env() });
    expect(noPrompt.code).toBe(2);
    expect(noPrompt.stderr).toContain("required option '-p, --prompt <text>'");
    const badUrl = await engram(['run', '-p', 'x'], { env: env({ REDIS_URL: 'http://nope' }) });
    expect(badUrl.code).toBe(2);
    expect(badUrl.stderr).toContain('REDIS_URL must start with redis://');
    const noKey = await engram(['run', '-p', 'x'], {
      env: env({ ANTHROPIC_API_KEY: undefined, ANTHROPIC_BASE_URL: undefined }),
    });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('ANTHROPIC_API_KEY is not set');
  });

  it('exits 1 when the model fails for good', async () => {
    mainReplies = () => ({
      kind: 'error',
      status: 401,
      type: 'authentication_error',
      message: 'invalid x-api-key',
    });
    const result = await engram(['run', '-p', 'hello there', '--cwd', project()], { env: env() });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('invalid x-api-key');
  });
});

describe('engram demo', () => {
  it('runs with no API key, prints the saved memory file, then recalls it in a second session', async () => {
    const result = await engram(['demo'], {
      env: {
        PATH: process.env.PATH,
        HOME: home,
        REDIS_URL: inject('redisUrl'),
        ENGRAM_NAMESPACE: uniquePrefix('demo'),
      },
      timeoutMs: 60_000,
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('SCRIPTED');
    expect(result.stdout).toContain('Saved 1 memory: feedback_pnpm.md');
    expect(result.stdout).toContain(
      '**How to apply:** run `pnpm install` / `pnpm test`; if a doc says npm, translate it.',
    );
    // Session 2: the memory is recalled by the side query and injected; the scripted answer proves it arrived.
    expect(result.stdout).toContain('Recalled 1 memory (feedback_pnpm.md)');
    expect(result.stdout).toContain('workspace links (recalled from memory).\n');
    // It keeps its memory where the command it prints last finds it, and removes its throwaway engine data.
    const command = /See it with:\n {2}npx engram (memory list --cwd (\S+))\n?$/.exec(result.stdout);
    expect(command, result.stdout.slice(-400)).not.toBeNull();
    const list = await engram(['memory', 'list', '--json', '--cwd', command![2]!], {
      env: { PATH: process.env.PATH, HOME: home },
    });
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout).memories.map((m: { file: string }) => m.file)).toEqual([
      'feedback_pnpm.md',
    ]);
    expect(readdirSync(tmpdir()).filter((f) => f.startsWith('engram-scratch-'))).toEqual([]);
  }, 90_000); // the demo process itself is allowed 60 s on a busy machine
});
