import { spawn } from 'node:child_process';
import { accessSync, constants, existsSync, lstatSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, ENGRAM_BIN, engram, isFork, lastUser } from './cli.test-helpers.js';

// Zero-install mode: `engram dev` on a machine with no redis-server and no REDIS_URL runs BullMQ on an
// embedded PostgreSQL, and `engram run` in another process finds it and gets its memory extracted.

const MEMORY =
  '---\nname: Use pnpm\ndescription: The user wants pnpm, never npm\ntype: feedback\n---\nUse pnpm.\n';

/** PATH without any directory that holds a redis-server binary. */
function pathWithoutRedis(): string {
  return (process.env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => {
      try {
        accessSync(join(dir, 'redis-server'), constants.X_OK);
        return false;
      } catch {
        return true;
      }
    })
    .join(delimiter);
}

let server: ModelServer;
beforeAll(async () => {
  assertBuilt();
  server = await startModelServer();
});
afterAll(() => server.close());

describe('zero-install local mode', () => {
  it('engram dev with no redis-server and no REDIS_URL runs on embedded PostgreSQL; engram run gets its memory extracted', async () => {
    server.respond((r) => {
      if (!isFork(r)) return textReply('pnpm it is.');
      if (lastUser(r).includes('You are now the memory extraction subagent')) {
        const memoryDir = /persistent, file-based memory at `([^`]+)`/.exec(
          JSON.stringify(r.body.system),
        )?.[1];
        return reply(
          text('Saving.'),
          toolUse('Write', { file_path: `${memoryDir}/feedback_pnpm.md`, content: MEMORY }),
        );
      }
      return textReply('Saved.');
    });
    // mkdtemp makes it 0700, like /root/.engram: running as root, PostgreSQL runs as "postgres", which cannot
    // walk this path, and its data must still be in ENGRAM_HOME/pg.
    const engramHome = mkdtempSync(join(tmpdir(), 'engram-zero-'));
    expect(statSync(engramHome).mode & 0o777).toBe(0o700);
    const cwd = mkdtempSync(join(tmpdir(), 'engram-zero-project-'));
    const env = {
      PATH: pathWithoutRedis(),
      HOME: engramHome,
      ENGRAM_HOME: engramHome,
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: server.url,
      ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
      ENGRAM_DRAIN_TIMEOUT_MS: '30000',
      LOG_LEVEL: 'error',
    };
    // Its own process group, as a terminal runs it, so Ctrl-C below reaches the whole group.
    const dev = spawn(process.execPath, [ENGRAM_BIN, 'dev', '--port', '0'], {
      env: { TMPDIR: process.env.TMPDIR, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let devOut = '';
    dev.stdout.on('data', (c: Buffer) => {
      devOut += c.toString();
    });
    dev.stderr.on('data', (c: Buffer) => {
      devOut += c.toString();
    });
    const exited = new Promise<number | null>((resolve) => dev.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 60_000;
      while (
        !devOut.includes('Engram dev stack is running') &&
        Date.now() < deadline &&
        dev.exitCode === null
      ) {
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(devOut).toContain('Engram dev stack is running');
      expect(devOut).toContain('BullMQ on embedded PostgreSQL');
      expect(devOut).toContain('set REDIS_URL=redis://127.0.0.1:6379');

      const run = await engram(
        ['run', '-p', 'Always use pnpm here, never npm.', '--cwd', cwd, '--output-format', 'json'],
        {
          env,
          timeoutMs: 60_000,
        },
      );
      expect(run.code, run.stderr).toBe(0);
      const out = JSON.parse(run.stdout);
      expect(out.memory.extract.status).toBe('queued');
      expect(out.memory.drained).toBe(true);
      const paths = JSON.parse((await engram(['memory', 'path', '--json', '--cwd', cwd], { env })).stdout);
      expect(existsSync(join(paths.memoryDir, 'feedback_pnpm.md'))).toBe(true);
      // The queue's data is in ENGRAM_HOME/pg itself (a directory, not a link elsewhere), and the home kept its mode.
      expect(lstatSync(join(engramHome, 'pg')).isDirectory()).toBe(true);
      expect(existsSync(join(engramHome, 'pg', 'cluster', 'PG_VERSION'))).toBe(true);
      expect(statSync(engramHome).mode & 0o777).toBe(0o700);
      expect(devOut).toContain(join(engramHome, 'pg'));
    } finally {
      // Ctrl-C as a terminal sends it (to the group, PostgreSQL included): the workers close first, cleanly.
      process.kill(-dev.pid!, 'SIGINT');
      expect(await exited).toBe(0);
      expect(devOut).not.toMatch(/57P01|terminating connection|Unhandled/);
      rmSync(engramHome, { recursive: true, force: true });
    }
  }, 120_000);
});
