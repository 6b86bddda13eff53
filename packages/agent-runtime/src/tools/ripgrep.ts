import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { SearchJail } from '../sandbox/search-jail.js';
import { ToolError } from './tool.js';

// Finds and runs ripgrep for the Grep tool: never through a shell, with a wall-clock bound (SIGKILL), an
// output cap, no configuration file (`--no-config`: RIPGREP_CONFIG_PATH could add `--pre`) and an empty
// environment.
//
// Where rg comes from, first found wins:
//   1. ENGRAM_RIPGREP_PATH (an operator's explicit choice; an error when it does not point at a program);
//   2. the binary shipped inside the npm registry package @vscode/ripgrep (its per-platform optional
//      dependency @vscode/ripgrep-<os>-<arch> carries `bin/rg`; nothing is downloaded at install);
//   3. `rg` on PATH (Debian/Ubuntu package `ripgrep`, Homebrew `ripgrep`).
// Without any, Grep fails with `ripgrep_not_found` saying how to install it; there is no JavaScript fallback
// (a JavaScript regular expression has no time bound and the walk would not honour .gitignore).

export const RIPGREP_PATH_ENV = 'ENGRAM_RIPGREP_PATH';

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

let bundled: string | null | undefined;

async function bundledRipgrep(): Promise<string | null> {
  if (bundled !== undefined) return bundled;
  try {
    const mod = (await import('@vscode/ripgrep')) as { rgPath: string };
    bundled = executable(mod.rgPath) ? mod.rgPath : null;
  } catch {
    bundled = null; // the platform package is not installed (unsupported platform, --no-optional)
  }
  return bundled;
}

/** The rg binary to run, or a `ripgrep_not_found` ToolError that says how to get one. */
export async function locateRipgrep(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const configured = env[RIPGREP_PATH_ENV];
  if (configured) {
    if (executable(configured)) return configured;
    throw new ToolError(
      'RIPGREP_NOT_FOUND',
      `${RIPGREP_PATH_ENV}=${configured} is not an executable file. Point it at ripgrep's rg binary or unset it.`,
    );
  }
  const fromPackage = await bundledRipgrep();
  if (fromPackage) return fromPackage;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir && executable(join(dir, 'rg'))) return join(dir, 'rg');
  }
  throw new ToolError(
    'RIPGREP_NOT_FOUND',
    'Grep needs ripgrep, which was not found: reinstall with optional dependencies (npm ci installs ' +
      "@vscode/ripgrep's binary for this platform), or install the system package (apt-get install ripgrep, " +
      `brew install ripgrep), or set ${RIPGREP_PATH_ENV} to an rg binary.`,
  );
}

export interface RipgrepRun {
  stdout: string;
  stderr: string;
  /** rg's exit code: 0 matches, 1 no match, 2 an error (possibly alongside results); null when killed. */
  code: number | null;
  timedOut: boolean;
  /** stdout reached the cap and rg was stopped: results are incomplete. */
  truncated: boolean;
  aborted: boolean;
}

export interface RipgrepOptions {
  cwd: string;
  timeoutMs: number;
  maxOutputBytes: number;
  signal?: AbortSignal;
  /**
   * A descriptor of the parent handed to rg as its fd 3 (`/proc/self/fd/3` in rg's arguments names it): rg
   * searches the inode the caller judged, not whatever its name points at by now.
   */
  rootFd?: number;
  /** Run rg inside this jail (sandbox/search-jail.ts), with `rootFd` (required then) as the jail's root. */
  jail?: SearchJail;
}

/** Runs `rg args…` (no shell) and collects its output within the time and size bounds. */
export function runRipgrep(
  rg: string,
  args: readonly string[],
  options: RipgrepOptions,
): Promise<RipgrepRun> {
  return new Promise((resolve, reject) => {
    const { jail, rootFd } = options;
    if (jail && rootFd === undefined) throw new Error('runRipgrep: a jail needs rootFd');
    const child = jail
      ? spawn(jail.file, [...jail.args, '--no-config', ...args], {
          cwd: '/',
          env: {},
          // fd 3: the seccomp program (JAIL_SECCOMP_FD), fd 4: the judged root (JAIL_ROOT_FD).
          stdio: ['ignore', 'pipe', 'pipe', 'pipe', rootFd as number],
          shell: false,
        })
      : spawn(rg, ['--no-config', ...args], {
          cwd: options.cwd,
          env: {},
          stdio: rootFd === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe', rootFd],
          shell: false,
        });
    if (jail) {
      const fd3 = child.stdio[3] as NodeJS.WritableStream | null;
      fd3?.on('error', () => {});
      fd3?.end(jail.seccomp);
    }
    const out: Buffer[] = [];
    let outBytes = 0;
    let stderr = '';
    let timedOut = false;
    let truncated = false;
    let aborted = false;
    const kill = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, options.timeoutMs);
    const onAbort = () => {
      aborted = true;
      kill();
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.signal?.aborted) onAbort();
    child.stdout?.on('data', (chunk: Buffer) => {
      if (truncated) return;
      const room = options.maxOutputBytes - outBytes;
      if (chunk.length >= room) {
        out.push(chunk.subarray(0, room));
        outBytes += room;
        truncated = true;
        kill();
        return;
      }
      out.push(chunk);
      outBytes += chunk.length;
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      if (stderr.length < 8_192) stderr += chunk.toString('utf8');
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      reject(new ToolError('RIPGREP_FAILED', `Could not run ripgrep (${rg}): ${e.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      let stdout = Buffer.concat(out).toString('utf8');
      // A cut in the middle of a record: drop the partial last line.
      if (truncated) stdout = stdout.slice(0, stdout.lastIndexOf('\n') + 1);
      resolve({ stdout, stderr, code, timedOut, truncated, aborted });
    });
  });
}
