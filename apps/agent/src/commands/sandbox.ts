import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { gatedPolicy, prepareUnattended } from '@engram/agent-runtime/sandbox/unattended';
import { bashInputSchema, bashTool, executeBash } from '@engram/agent-runtime/tools/bash';
import { ReadFileState } from '@engram/agent-runtime/tools/tool';
import { memoryWritePolicy } from '@engram/memory-core/policy/memory-permissions';
import type { Output } from './output.js';

// `engram sandbox --memory-dir DIR [--cwd DIR] -c "<command line>"`: runs a command line exactly as a memory
// fork's Bash tool would — the memory policy's read-only check, then the OS sandbox — so an operator can see
// what a fork can do on this host. Prints the command's output and exits with its status; exits 126 with the
// reason on stderr when the line is refused (by the policy, or because the sandbox cannot start here).

export const REFUSED_EXIT = 126;
const TIMEOUT_EXIT = 124;

export interface SandboxCommandOptions {
  memoryDir: string;
  /** Working directory (default: the memory directory, as a fork's). */
  cwd?: string;
  command: string;
  /** Skip the policy's read-only check, leaving the sandbox as the only boundary (to test the boundary). */
  skipReadOnlyCheck?: boolean;
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

export async function sandboxCommand(opts: SandboxCommandOptions, io: Output): Promise<number> {
  const memoryDir = resolve(opts.memoryDir);
  const cwd = resolve(opts.cwd ?? memoryDir);
  const parsed = bashInputSchema.safeParse({
    command: opts.command,
    ...(opts.timeoutMs !== undefined ? { timeout: opts.timeoutMs } : {}),
  });
  if (!parsed.success) {
    io.err(`engram sandbox: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
    return REFUSED_EXIT;
  }
  // A CLI fork's boundary: the memory directory (read-only to Bash), its working directory as Bash's world.
  const boundary = await prepareUnattended({
    kind: 'unattended',
    jail: { root: memoryDir, bash: 'read-only' },
    read: { kind: 'local', ownHome: homedir() },
    world: [cwd],
  });
  const policy = gatedPolicy(
    opts.skipReadOnlyCheck ? async () => ({ behavior: 'allow' }) : memoryWritePolicy(memoryDir),
    boundary,
  );
  const decision = await policy(bashTool, parsed.data, { toolUseId: 'engram-sandbox', cwd });
  if (decision.behavior === 'deny') {
    io.err(`engram sandbox: refused (${decision.reason ?? 'denied'}): ${decision.message}`);
    return REFUSED_EXIT;
  }
  let result: Awaited<ReturnType<typeof executeBash>>;
  try {
    result = await executeBash(parsed.data, {
      cwd,
      readFileState: new ReadFileState(),
      toolUseId: 'engram-sandbox',
      boundary,
      ...(opts.env ? { env: opts.env } : {}),
    });
  } catch (error) {
    io.err(`engram sandbox: refused: ${(error as Error).message}`);
    return REFUSED_EXIT;
  }
  if (result.output) io.out(result.output);
  if (result.timedOut) {
    io.err(`engram sandbox: the command timed out after ${parsed.data.timeout ?? 120_000} ms and was killed`);
    return TIMEOUT_EXIT;
  }
  if (result.exitCode !== null) return result.exitCode;
  return 128 + (result.signal ? (SIGNALS[result.signal] ?? 1) : 1);
}

const SIGNALS: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };
