import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { RecordedRequest } from '@engram/testkit/model-server';

// Runs the built `engram` binary as a subprocess, as a user would.

export const ENGRAM_BIN = fileURLToPath(new URL('../dist/bin/engram.js', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function assertBuilt(): void {
  if (!existsSync(ENGRAM_BIN)) throw new Error(`${ENGRAM_BIN} is missing: run \`npm run build\` first.`);
}

export function engram(
  args: string[],
  opts: { env: Record<string, string | undefined>; cwd?: string; input?: string; timeoutMs?: number },
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [ENGRAM_BIN, ...args], {
      cwd: opts.cwd,
      // The test run's temporary directory (removed at the end of the run), unless the test sets its own.
      env: { TMPDIR: process.env.TMPDIR, ...opts.env } as NodeJS.ProcessEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
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
      reject(new Error(`engram ${args.join(' ')} timed out\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, opts.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(opts.input ?? '');
  });
}

export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content.map((b) => (typeof b?.text === 'string' ? b.text : JSON.stringify(b))).join('\n');
  return '';
}

export function lastUser(r: RecordedRequest): string {
  return textOf(r.body.messages.at(-1)?.content);
}

export function isFork(r: RecordedRequest): boolean {
  return JSON.stringify(r.body.messages).includes('You are now the memory extraction subagent');
}
