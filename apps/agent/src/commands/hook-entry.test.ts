import { execFile } from 'node:child_process';
import { existsSync, promises as fs, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { outboxPath } from '@engram/memory-core/extraction/session-record';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { waitUntil } from '@engram/testkit/wait';
import { describe, expect, it } from 'vitest';

// The lean hook entry (`engram hook <event>` as bin/engram.js routes it) run as Claude Code runs it: a process
// per hook with the event's JSON on stdin. Stop answers at once and does its work in a detached background
// process (here with the stack down: the work lands in the session's outbox and the background logs it).

const SRC = fileURLToPath(new URL('../', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const TSX = pathToFileURL(join(REPO_ROOT, 'node_modules/tsx/dist/loader.mjs')).href;

function hook(event: string, input: string, env: NodeJS.ProcessEnv) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(
      process.execPath,
      ['--conditions=source', '--import', TSX, join(SRC, 'bin/engram-hook.ts'), event],
      { env, timeout: 30_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin?.end(input);
  });
}

describe('the lean hook entry', () => {
  it('loads only Node built-ins and its own two modules before it knows there is work', () => {
    for (const file of ['bin/engram-hook.ts', 'commands/hook-entry.ts', 'commands/claude-home.ts']) {
      const source = readFileSync(join(SRC, file), 'utf8');
      const statics = [...source.matchAll(/^import\s[^;]*?from\s+'([^']+)'/gms)].map((m) => m[1]!);
      for (const spec of statics) {
        expect(
          spec.startsWith('node:') || ['../commands/hook-entry.js', './claude-home.js'].includes(spec),
          `${file} imports ${spec} statically`,
        ).toBe(true);
      }
    }
  });

  it('Stop with the stack down: exits 0 at once, the background process parks the extraction in the outbox', async () => {
    const claudeHome = mkdtempSync(join(tmpdir(), 'engram-hook-entry-'));
    const repo = mkdtempSync(join(tmpdir(), 'engram-hook-entry-repo-'));
    await fs.mkdir(join(repo, '.git'));
    const paths = await resolveEngramPaths({ engramHome: claudeHome, cwd: repo });
    const sessionId = crypto.randomUUID();
    await fs.mkdir(paths.transcriptDir, { recursive: true });
    const entry = (e: Record<string, unknown>) =>
      `${JSON.stringify({ isSidechain: false, userType: 'external', cwd: repo, sessionId, version: '2.1.328', timestamp: new Date().toISOString(), ...e })}\n`;
    await fs.writeFile(
      paths.transcriptPath(sessionId),
      entry({
        type: 'user',
        uuid: 'b0a1c3f2-0000-4000-8000-000000000001',
        parentUuid: null,
        message: { role: 'user', content: 'We deploy to region ams.' },
      }) +
        entry({
          type: 'assistant',
          uuid: 'b0a1c3f2-0000-4000-8000-000000000002',
          parentUuid: 'b0a1c3f2-0000-4000-8000-000000000001',
          message: {
            role: 'assistant',
            content: [{ type: 'text', text: 'Noted.' }],
            stop_reason: 'end_turn',
          },
        }),
    );
    const log = join(claudeHome, 'hooks.log');
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: claudeHome,
      CLAUDE_CONFIG_DIR: claudeHome,
      REDIS_URL: 'redis://127.0.0.1:9',
      ENGRAM_ENQUEUE_TIMEOUT_MS: '1000',
      ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
      ENGRAM_HOOK_LOG: log,
      ANTHROPIC_API_KEY: 'test',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
    };
    const input = JSON.stringify({
      session_id: sessionId,
      transcript_path: paths.transcriptPath(sessionId),
      cwd: repo,
      hook_event_name: 'Stop',
    });
    const stop = await hook('Stop', input, env);
    expect(stop.code).toBe(0);
    expect(stop.stdout).toBe('');
    expect(stop.stderr).toMatch(/handed to a background process \(pid \d+\)/);
    await waitUntil(() => existsSync(outboxPath(paths.sessionDir(sessionId))), 'the outbox', {
      timeoutMs: 30_000,
    });
    await waitUntil(() => existsSync(log) && readFileSync(log, 'utf8').includes('outbox'), 'the log line', {
      timeoutMs: 10_000,
    });

    // A one-word prompt and an unknown event end in the foreground with nothing on stdout, exit 0.
    const ups = await hook('UserPromptSubmit', JSON.stringify({ ...JSON.parse(input), prompt: 'hi' }), env);
    expect(ups).toMatchObject({ code: 0, stdout: '' });
    const unknown = await hook('Notification', input, env);
    expect(unknown.code).toBe(0);
    expect(unknown.stderr).toMatch(/no handler for Notification/);
  }, 60_000);
});
