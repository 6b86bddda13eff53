import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';

// The README on a fresh clone, literally: `npm run dev` with no node_modules installs the workspace itself
// (the predev step), builds and prints the stack's ready line; right after that install, `npx engram
// --version`, `npx engram demo` and the command the demo prints work, and the last finds the demo's memory.
// (`npm test` on a fresh clone is what `.ci/run` does on every CI run: it calls nothing but `npm test`.)

const here = fileURLToPath(new URL('.', import.meta.url));
let clone: string;
let home: string;
let env: NodeJS.ProcessEnv;

function run(
  command: string,
  args: string[],
  opts: { timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: clone, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} timed out\n${stdout}\n${stderr}`));
    }, opts.timeoutMs ?? 120_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

beforeAll(() => {
  const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { cwd: here, encoding: 'utf8' }).trim();
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  const base = mkdtempSync(join(tmpdir(), 'engram-fresh-clone-'));
  clone = join(base, 'engram');
  home = join(base, 'home');
  execFileSync('git', ['clone', '--quiet', '--no-checkout', root, clone]);
  execFileSync('git', ['-C', clone, 'checkout', '--quiet', head]);
  expect(existsSync(join(clone, 'node_modules'))).toBe(false);
  const cache = process.env.npm_config_cache || join(homedir(), '.npm');
  env = {
    PATH: process.env.PATH,
    TMPDIR: process.env.TMPDIR,
    HOME: home,
    // The machine's npm cache (HOME is a fresh one), so the install needs no network for cached packages.
    npm_config_cache: cache,
    npm_config_prefer_offline: 'true',
    REDIS_URL: inject('redisUrl'),
    ENGRAM_NAMESPACE: `fresh-${process.pid}`,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    TURBO_TELEMETRY_DISABLED: '1',
    // This checkout's turbo cache: `npm test` has just built this commit, so the clone's build replays those
    // outputs (~2 minutes of CPU saved on 2 cores). turbo keys each package's build by the hash of its files in
    // the clone, so a file the commit lacks (or any difference) misses the cache and builds for real.
    TURBO_CACHE_DIR: join(root, '.turbo', 'cache'),
    LOG_LEVEL: 'error',
  };
});
// Removing the clone's node_modules (~450 MB, tens of thousands of files) can take longer than the default
// hook timeout on a busy 2-core machine.
afterAll(() => {
  if (clone) rmSync(join(clone, '..'), { recursive: true, force: true });
}, 180_000);

describe('a fresh clone, following the README', () => {
  it('npm run dev installs the workspace first (saying so in one line), builds, and shows the ready line', async () => {
    const dev: ChildProcess = spawn('npm', ['run', 'dev', '--', '--port', '0'], {
      cwd: clone,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    dev.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
    });
    dev.stderr!.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const exited = new Promise<number | null>((resolve) => dev.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 540_000;
      while (!out.includes('Engram dev stack is running.') && dev.exitCode === null && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 200));
      expect(out).toContain('engram: node_modules is missing — running `npm ci` first');
      expect(out.match(/running `npm ci` first/g)).toHaveLength(1);
      expect(out).toContain('Engram dev stack is running.');
      expect(existsSync(join(clone, 'node_modules', '.bin', 'engram'))).toBe(true);
    } finally {
      if (dev.exitCode === null) process.kill(-dev.pid!, 'SIGINT');
      await exited;
    }
    // Installed now: the pre-step finds nothing to do and says nothing.
    const again = await run(process.execPath, ['scripts/ensure-installed.mjs']);
    expect(again.code).toBe(0);
    expect(again.stderr).toBe('');
  }, 600_000);

  it('npx engram --version, npx engram demo, then the command the demo prints finds its memory', async () => {
    const version = await run('npx', ['engram', '--version']);
    expect(version.code, version.stderr).toBe(0);
    expect(version.stdout.trim()).toBe('0.1.0');
    const demo = await run('npx', ['engram', 'demo'], { timeoutMs: 180_000 });
    expect(demo.code, demo.stderr).toBe(0);
    expect(demo.stdout).toContain('Saved 1 memory: feedback_pnpm.md');
    const next = /See it with:\n {2}npx engram memory list --cwd (\S+)\n?$/.exec(demo.stdout);
    expect(next, demo.stdout.slice(-300)).not.toBeNull();
    expect(next![1]).toBe(join(home, '.engram', 'demo-project'));
    const list = await run('npx', ['engram', 'memory', 'list', '--cwd', next![1]!]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^feedback\s+feedback_pnpm\.md\s+today\s+Use pnpm, never npm/m);
  }, 300_000);
});
