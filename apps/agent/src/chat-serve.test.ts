import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { reply, textReply, toolUse } from '@engram/testkit/replies';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { assertBuilt, engram, isFork, lastUser, textOf } from './cli.test-helpers.js';

// The interactive REPL, driven through its stdin. (The hosted API: src/server/hosted-app.test.ts.)

let server: ModelServer;
let home: string;
beforeAll(async () => {
  assertBuilt();
  server = await startModelServer();
  home = mkdtempSync(join(tmpdir(), 'engram-chat-home-'));
});
afterEach(() => server.reset());
afterAll(() => server.close());

function env() {
  return {
    PATH: process.env.PATH,
    HOME: home,
    ENGRAM_HOME: home,
    ENGRAM_NAMESPACE: uniquePrefix('chat'),
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: server.url,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
    ENGRAM_DRAIN_TIMEOUT_MS: '500',
  };
}

describe('engram chat', () => {
  it('asks before a write outside the memory directory, honours the answer, lists memories and exits', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'engram-chat-project-'));
    const target = join(cwd, 'notes.txt');
    let calls = 0;
    server.respond((r) => {
      if (isFork(r)) return textReply('Nothing to save.');
      calls++;
      if (calls === 1) return reply(toolUse('Write', { file_path: target, content: 'hello' }));
      if (calls === 2)
        return textReply(
          textOf(r.body.messages.at(-1)?.content).includes('declined')
            ? 'OK, I did not write it.'
            : 'Written.',
        );
      return textReply(`second answer to: ${lastUser(r).slice(0, 40)}`);
    });
    const paths = JSON.parse(
      (await engram(['memory', 'path', '--json', '--cwd', cwd], { env: env() })).stdout,
    );
    mkdirSync(paths.memoryDir, { recursive: true });
    writeFileSync(
      join(paths.memoryDir, 'user_role.md'),
      '---\nname: Role\ndescription: Go backend engineer\ntype: user\n---\nGo.\n',
    );
    const result = await engram(['chat', '--cwd', cwd], {
      env: env(),
      input: 'please save hello into notes.txt\nn\n/memory\nwhat next, then?\n/exit\n',
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/engram chat — session [0-9a-f-]{36}/);
    expect(result.stdout).toContain(`Allow Write: ${target}? [y/N]`);
    expect(result.stdout).toContain('OK, I did not write it.');
    expect(existsSync(target)).toBe(false);
    expect(result.stdout).toContain('[user] user_role.md');
    expect(result.stdout).toContain('second answer to: what next, then?');
  });
});
