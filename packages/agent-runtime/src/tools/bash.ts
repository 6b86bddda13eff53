import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { z } from 'zod';
import { sandboxEnvironment } from '../sandbox/environment.js';
import { limitHit, sandboxedShell } from '../sandbox/unattended.js';
import { isReadOnlyBashCommand } from './bash-readonly.js';
import { defineTool, type ToolContext, ToolError } from './tool.js';

// Bash: runs one command line in the context's working directory with a timeout, an output cap and an
// environment scrubbed of credentials (the model must never be able to print the API key it runs on).

export const DEFAULT_BASH_TIMEOUT_MS = 120_000;
export const MAX_BASH_TIMEOUT_MS = 600_000;
/** Output kept in memory; beyond it the middle is dropped. Results over 30,000 chars go to tool-results/. */
export const MAX_BASH_CAPTURE_CHARS = 1_000_000;
const KILL_GRACE_MS = 2_000;
/** bash where it exists (Debian/Ubuntu images, macOS); plain sh on minimal images such as Alpine. */
const SHELL = existsSync('/bin/bash') ? '/bin/bash' : '/bin/sh';

export const bashInputSchema = z.strictObject({
  command: z.string().min(1).describe('The command to execute'),
  timeout: z
    .number()
    .int()
    .min(1)
    .max(MAX_BASH_TIMEOUT_MS)
    .optional()
    .describe(`Optional timeout in milliseconds (max ${MAX_BASH_TIMEOUT_MS})`),
  description: z
    .string()
    .optional()
    .describe('Clear, concise description of what this command does in 5-10 words'),
});
export type BashInput = z.infer<typeof bashInputSchema>;

const SECRET_NAMES = new Set([
  'ANTHROPIC_API_KEY',
  'ANTHROPIC_AUTH_TOKEN',
  'CLAUDE_CODE_OAUTH_TOKEN',
  'AWS_SESSION_TOKEN',
  'NPM_CONFIG__AUTH',
]);
/** Names that conventionally hold credentials: *_TOKEN, *_SECRET, *_KEY, *_PASSWORD, … (also mid-name). */
const SECRET_NAME_PATTERN =
  /(^|_)(TOKEN|SECRET|SECRETS|KEY|APIKEY|API_KEY|ACCESS_KEY|PRIVATE_KEY|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|AUTH)(_|$)/i;
/** Any URL with a password in its userinfo (redis://:pw@host, postgres://u:pw@host/db). */
const URL_WITH_PASSWORD = /^[a-z][a-z0-9+.-]*:\/\/[^/@\s]*:[^/@\s]+@/i;

export function isSecretEnvName(name: string): boolean {
  return SECRET_NAMES.has(name.toUpperCase()) || SECRET_NAME_PATTERN.test(name);
}

/** A copy of `env` without credentials: secret-looking names and URLs that embed a password. */
export function scrubEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (isSecretEnvName(name)) continue;
    if (URL_WITH_PASSWORD.test(value)) continue;
    out[name] = value;
  }
  return out;
}

class OutputBuffer {
  private head = '';
  private tail = '';
  private dropped = 0;
  constructor(private readonly cap: number) {}

  push(chunk: string) {
    if (this.head.length < this.cap / 2) {
      const room = this.cap / 2 - this.head.length;
      this.head += chunk.slice(0, room);
      chunk = chunk.slice(room);
    }
    if (!chunk) return;
    this.tail += chunk;
    if (this.tail.length > this.cap / 2) {
      const excess = this.tail.length - this.cap / 2;
      this.dropped += excess;
      this.tail = this.tail.slice(excess);
    }
  }

  text(): string {
    if (this.dropped === 0) return this.head + this.tail;
    return `${this.head}\n\n... [${this.dropped} characters of output omitted] ...\n\n${this.tail}`;
  }
}

export interface BashRunResult {
  output: string;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  aborted: boolean;
}

export function runBash(
  command: string,
  opts: {
    cwd: string;
    env: NodeJS.ProcessEnv;
    timeoutMs: number;
    signal?: AbortSignal;
    captureChars?: number;
    /** Run the shell inside this wrapper (the sandbox's bwrap): `file args… SHELL -c command`. */
    wrap?: { file: string; args: readonly string[]; seccomp?: Buffer };
  },
): Promise<BashRunResult> {
  return new Promise((resolve, reject) => {
    const out = new OutputBuffer(opts.captureChars ?? MAX_BASH_CAPTURE_CHARS);
    const { wrap } = opts;
    const child = spawn(
      wrap ? wrap.file : SHELL,
      wrap ? [...wrap.args, SHELL, '-c', command] : ['-c', command],
      {
        cwd: opts.cwd,
        env: opts.env,
        // fd 3 carries the sandbox's seccomp program to bwrap (`--seccomp 3`).
        stdio: wrap?.seccomp ? ['ignore', 'pipe', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe'],
        // Own process group: a timeout kills the command's children too, not just the shell. (In the sandbox,
        // killing bwrap ends its PID namespace, and with it everything the command started.)
        detached: true,
      },
    );
    if (wrap?.seccomp) {
      const fd3 = child.stdio[3] as NodeJS.WritableStream;
      fd3.on('error', () => {});
      fd3.end(wrap.seccomp);
    }
    let timedOut = false;
    let aborted = false;
    let killTimer: NodeJS.Timeout | undefined;
    const kill = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {
        // already gone
      }
      killTimer = setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      }, KILL_GRACE_MS);
      killTimer.unref();
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, opts.timeoutMs);
    const onAbort = () => {
      aborted = true;
      kill();
    };
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout?.setEncoding('utf8').on('data', (d: string) => out.push(d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => out.push(d));
    child.on('error', (e) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      reject(e);
    });
    child.on('close', (exitCode, signal) => {
      clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      opts.signal?.removeEventListener('abort', onAbort);
      resolve({ output: out.text(), exitCode, signal, timedOut, aborted });
    });
  });
}

/**
 * What the Bash tool runs for `input` in `ctx`: unattended, inside the boundary's OS sandbox (or not at all)
 * with the allowlisted environment; attended, directly with the credential-scrubbed environment.
 * `engram sandbox` calls this too, so it runs a command line exactly as a fork's Bash would.
 */
export async function executeBash(input: BashInput, ctx: ToolContext): Promise<BashRunResult> {
  const timeoutMs = input.timeout ?? DEFAULT_BASH_TIMEOUT_MS;
  let wrap:
    | { file: string; args: readonly string[]; seccomp?: Buffer; release?: () => Promise<void> }
    | undefined;
  let env = scrubEnvironment(ctx.env ?? process.env);
  if (ctx.boundary.kind === 'unattended') {
    // Unattended: the sandbox, or nothing (the permission gate should already have said so).
    const shell = await sandboxedShell(ctx.boundary.sandbox, ctx.cwd, ctx.boundary.alias);
    if (!shell.ok) throw new ToolError('SANDBOX_UNAVAILABLE', `Bash cannot run here: ${shell.reason}`);
    wrap = shell.invocation;
    env = sandboxEnvironment(env);
  }
  try {
    return await runBash(input.command, {
      cwd: ctx.cwd,
      env,
      timeoutMs,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
      ...(wrap ? { wrap } : {}),
    });
  } catch (e) {
    throw new ToolError('SPAWN_FAILED', `Could not start bash: ${(e as Error).message}`);
  } finally {
    void wrap?.release?.();
  }
}

export const bashTool = defineTool<BashInput>({
  name: 'Bash',
  description: [
    'Executes a bash command in the working directory and returns its combined stdout and stderr.',
    `- Default timeout ${DEFAULT_BASH_TIMEOUT_MS / 1000}s, at most ${MAX_BASH_TIMEOUT_MS / 1000}s (timeout in ms).`,
    '- Each call starts in the working directory; `cd` does not persist between calls.',
    '- Prefer Read, Grep and Glob over cat, grep and find.',
    '- Credentials are not available in the environment.',
  ].join('\n'),
  inputSchema: bashInputSchema,
  maxResultChars: 30_000,
  isReadOnly: (input) => isReadOnlyBashCommand(input.command),
  async call(input, ctx) {
    const timeoutMs = input.timeout ?? DEFAULT_BASH_TIMEOUT_MS;
    const result = await executeBash(input, ctx);
    const output = result.output.replace(/\s+$/, '');
    const limit =
      ctx.boundary.kind === 'unattended'
        ? limitHit(ctx.boundary.sandbox, result.exitCode, output)
        : undefined;
    const stoppedBy = limit ? ` (stopped by ${limit})` : '';
    if (result.timedOut) {
      return {
        content: `${output}${output ? '\n' : ''}Command timed out after ${timeoutMs / 1000}s and was killed.${stoppedBy}`,
        isError: true,
      };
    }
    if (result.aborted) {
      return { content: `${output}${output ? '\n' : ''}Command was aborted.`, isError: true };
    }
    if (result.exitCode !== 0) {
      const status =
        (result.exitCode === null ? `killed by ${result.signal}` : `Exit code ${result.exitCode}`) +
        stoppedBy;
      return { content: `${output}${output ? '\n' : ''}${status}`, isError: true };
    }
    return { content: limit ? `${output}\n(A command was stopped by ${limit}.)` : output };
  },
});
