import { execFile } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

// The real Claude Code binary for end-to-end tests: installed once from the npm registry into a cache directory
// (`npm install --prefix`), then reused offline. npm 11 skips the package's postinstall, so the platform
// package's executable is run directly. Only an unreachable registry is a reason to skip; any other failure
// (a broken install, a binary that does not run) throws.

const run = promisify(execFile);

export const CLAUDE_CODE_VERSION = '2.1.328';

export type ClaudeCodeInstall = { ok: true; bin: string; dir: string } | { ok: false; skipReason: string };

export function claudeCodeCacheDir(
  version = CLAUDE_CODE_VERSION,
  env: NodeJS.ProcessEnv = process.env,
): string {
  const base = env.ENGRAM_TEST_CACHE || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'engram-test');
  return join(base, `claude-code-${version}`);
}

function platformPackage(): string {
  const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
  const os = process.platform === 'darwin' ? 'darwin' : process.platform === 'win32' ? 'win32' : 'linux';
  return `@anthropic-ai/claude-code-${os}-${arch}`;
}

export function claudeCodeBinary(dir: string): string {
  const exe = process.platform === 'win32' ? 'claude.exe' : 'claude';
  return join(dir, 'node_modules', ...platformPackage().split('/'), exe);
}

async function versionOf(bin: string): Promise<string | undefined> {
  try {
    const { stdout } = await run(bin, ['--version'], { timeout: 30_000 });
    return stdout.trim();
  } catch {
    return undefined;
  }
}

/**
 * The binary of Claude Code `version`, installing it into the cache directory the first time (idempotent: a
 * working install is reused without touching the network; concurrent callers install into their own staging
 * directory and the first rename wins).
 */
export async function ensureClaudeCode(version = CLAUDE_CODE_VERSION): Promise<ClaudeCodeInstall> {
  const dir = claudeCodeCacheDir(version);
  const bin = claudeCodeBinary(dir);
  if (existsSync(bin) && (await versionOf(bin))?.startsWith(version)) return { ok: true, bin, dir };
  await fs.mkdir(join(dir, '..'), { recursive: true });
  const staging = `${dir}.staging-${process.pid}-${Date.now()}`;
  await fs.mkdir(staging, { recursive: true });
  try {
    await run(
      'npm',
      [
        'install',
        '--prefix',
        staging,
        '--no-audit',
        '--no-fund',
        '--no-save',
        `@anthropic-ai/claude-code@${version}`,
      ],
      { timeout: 300_000, maxBuffer: 16 * 1024 * 1024 },
    );
  } catch (error) {
    await fs.rm(staging, { recursive: true, force: true });
    const text = `${(error as { stderr?: string }).stderr ?? ''} ${(error as Error).message}`;
    if (/E(NOTFOUND|AI_AGAIN|CONNREFUSED|CONNRESET|TIMEDOUT|NETUNREACH)|network|socket hang up/i.test(text)) {
      return {
        ok: false,
        skipReason: `SKIPPED: the npm registry is unreachable, so Claude Code ${version} could not be installed into ${dir} (${
          text
            .trim()
            .split('\n')
            .find((l) => /ERR|E[A-Z]+/.test(l)) ?? 'no detail'
        }). Run once with network access; later runs are offline.`,
      };
    }
    throw new Error(`testkit: installing Claude Code ${version} failed: ${text.trim().slice(0, 2000)}`);
  }
  const staged = claudeCodeBinary(staging);
  if (!(await versionOf(staged))?.startsWith(version)) {
    await fs.rm(staging, { recursive: true, force: true });
    throw new Error(`testkit: Claude Code ${version} installed but ${staged} does not report that version`);
  }
  await fs.rm(dir, { recursive: true, force: true });
  try {
    await fs.rename(staging, dir);
  } catch {
    // Another run installed it first.
    await fs.rm(staging, { recursive: true, force: true });
  }
  if (!(await versionOf(bin))?.startsWith(version))
    throw new Error(`testkit: ${bin} is not Claude Code ${version}`);
  return { ok: true, bin, dir };
}

/**
 * The environment for running Claude Code offline against a scripted model: no autoupdate, telemetry or other
 * background traffic, an API key, and a config directory of the test's own.
 */
export function claudeCodeEnv(options: {
  baseUrl: string;
  configDir: string;
  home: string;
  path?: string;
  extra?: Record<string, string>;
}): NodeJS.ProcessEnv {
  return {
    PATH: options.path ?? process.env.PATH ?? '',
    HOME: options.home,
    ANTHROPIC_BASE_URL: options.baseUrl,
    ANTHROPIC_API_KEY: 'sk-ant-engram-test',
    CLAUDE_CONFIG_DIR: options.configDir,
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    ...options.extra,
  };
}
