import { z } from 'zod';
import { ConfigError, describeIssues, positiveInt } from './env.js';

// The limits every sandboxed command runs under (agent-runtime's OS sandbox: forks and served Bash), one
// schema for the agent and the workers. Each is applied inside the sandbox, per command: a fork bomb, a
// memory hog or a runaway loop of one tenant ends at its own bound, not at the host's.

export const sandboxLimitsEnvSchema = z.object({
  /** Processes (and threads) one sandboxed command may have at once: RLIMIT_NPROC, or a pids cgroup as root. */
  ENGRAM_SANDBOX_MAX_PROCS: positiveInt.default(256),
  /** Address space of each process, MiB (RLIMIT_AS). */
  ENGRAM_SANDBOX_MEMORY_MB: positiveInt.default(2048),
  /** CPU time of each process, seconds (RLIMIT_CPU: SIGXCPU, then SIGKILL). */
  ENGRAM_SANDBOX_CPU_SECONDS: positiveInt.default(300),
  /** Largest file a command may write, MiB (RLIMIT_FSIZE), and the size of its private /tmp. */
  ENGRAM_SANDBOX_FILE_MB: positiveInt.default(512),
});

export interface SandboxLimits {
  maxProcesses: number;
  memoryMb: number;
  cpuSeconds: number;
  fileMb: number;
}

export const SANDBOX_LIMIT_SETTINGS = {
  maxProcesses: 'ENGRAM_SANDBOX_MAX_PROCS',
  memoryMb: 'ENGRAM_SANDBOX_MEMORY_MB',
  cpuSeconds: 'ENGRAM_SANDBOX_CPU_SECONDS',
  fileMb: 'ENGRAM_SANDBOX_FILE_MB',
} as const satisfies Record<keyof SandboxLimits, string>;

/** The limits from `env`; a value that is not a positive integer is a ConfigError naming the setting. */
export function parseSandboxLimits(env: NodeJS.ProcessEnv = process.env): SandboxLimits {
  const parsed = sandboxLimitsEnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(`Invalid sandbox limits:\n${describeIssues(parsed.error)}`);
  }
  const e = parsed.data;
  return {
    maxProcesses: e.ENGRAM_SANDBOX_MAX_PROCS,
    memoryMb: e.ENGRAM_SANDBOX_MEMORY_MB,
    cpuSeconds: e.ENGRAM_SANDBOX_CPU_SECONDS,
    fileMb: e.ENGRAM_SANDBOX_FILE_MB,
  };
}
