import { promises as fs } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import {
  parseSandboxLimits,
  SANDBOX_LIMIT_SETTINGS,
  type SandboxLimits,
} from '@engram/config/sandbox-limits';
import { declaredWriteJail, type WriteJail } from '@engram/write-jail/write-jail';
import type { AnyTool, CanUseTool, PermissionDecision, ToolContext } from '../tools/tool.js';
import { commandCgroup } from './process-limit.js';
import type { ReadBoundary } from './read-boundary.js';
import {
  type BwrapInvocation,
  bwrapInvocation,
  type SandboxProbeOptions,
  type SandboxStatus,
  SandboxUnavailableError,
  type SandboxWorld,
  sandboxStatus,
} from './sandbox.js';

// How a tool call that no person approves gets its boundary. A caller (a memory fork, a served turn) hands
// its tools and its permission policy to `prepareUnattended`; what comes back is the same tool list — same
// names, same definitions, so the prompt cache is shared — whose Bash runs in the OS sandbox and whose
// Write/Edit land through the jailed write, and a policy that denies Bash, with the reason, when the
// sandbox cannot start on this host. The permission policy stays the first filter; this is the boundary.
// The directory that may change is the `WriteJail` the policy declares (`@engram/write-jail`: memory-core's
// policies declare it, any policy can; `bash: 'read-only'`, the default, keeps it read-only to Bash too).

/** The sandbox a tool sees in its context (`ToolContext.sandbox`). */
export interface ToolSandbox {
  /** Real path of the one directory writes may land in. */
  writableRoot: string;
  /** Whether Bash may write `writableRoot` (default: no). */
  bashWritesRoot: boolean;
  /**
   * The rest of Bash's world: directories it may read (real paths; `writableRoot` is always visible). Nothing
   * else of the host is mounted besides the system directories (sandbox.ts `bwrapInvocation`).
   */
  readable: readonly string[];
  /** Per-command limits (ENGRAM_SANDBOX_*). */
  limits: SandboxLimits;
  status: SandboxStatus;
}

/** The real paths of the directories in `dirs` that exist (a missing one has nothing to show). */
export async function existingDirs(dirs: readonly string[]): Promise<string[]> {
  const real = await Promise.all(
    dirs.map(async (d) => {
      try {
        const r = await fs.realpath(resolve(d));
        return (await fs.stat(r)).isDirectory() ? r : undefined;
      } catch {
        return undefined;
      }
    }),
  );
  return [...new Set(real.filter((r): r is string => r !== undefined))];
}

export async function createToolSandbox(
  jail: WriteJail,
  opts: SandboxProbeOptions & {
    status?: SandboxStatus;
    /** What Bash may read beyond the jail root (its world; default: nothing). */
    readable?: readonly string[];
    limits?: SandboxLimits;
  } = {},
): Promise<ToolSandbox> {
  const root = resolve(jail.root);
  await fs.mkdir(root, { recursive: true, mode: 0o700 });
  const status = opts.status ?? (await sandboxStatus(opts));
  return {
    writableRoot: await fs.realpath(root),
    bashWritesRoot: jail.bash === 'write-root',
    readable: await existingDirs(opts.readable ?? []),
    limits: opts.limits ?? parseSandboxLimits(opts.env ?? process.env),
    status,
  };
}

export const SANDBOX_UNAVAILABLE_REASON = 'sandbox_unavailable';

/** The bwrap command line for a Bash call in `sandbox` from `cwd`, or the reason there is none. */
export async function sandboxedShell(
  sandbox: ToolSandbox,
  cwd: string,
): Promise<{ ok: true; invocation: BwrapInvocation } | { ok: false; reason: string }> {
  const { status } = sandbox;
  if (!status.available || !status.bwrapPath) {
    return { ok: false, reason: status.reason ?? 'the OS sandbox is unavailable' };
  }
  let realCwd: string;
  try {
    realCwd = await fs.realpath(cwd);
  } catch (error) {
    return { ok: false, reason: `the working directory cannot be resolved: ${(error as Error).message}` };
  }
  const world: SandboxWorld = {
    cwd: realCwd,
    readable: sandbox.bashWritesRoot ? sandbox.readable : [...sandbox.readable, sandbox.writableRoot],
    writable: sandbox.bashWritesRoot ? [sandbox.writableRoot] : [],
  };
  if (![...world.readable, ...world.writable].some((d) => isWithinOrEqual(realCwd, d))) {
    return { ok: false, reason: `the working directory ${realCwd} is outside this agent's sandbox` };
  }
  const limit = status.processLimit;
  let cgroup: Awaited<ReturnType<typeof commandCgroup>> | undefined;
  if (limit?.kind === 'cgroup') {
    try {
      cgroup = await commandCgroup(limit.parent, sandbox.limits.maxProcesses);
    } catch (error) {
      return {
        ok: false,
        reason: `the command's pids cgroup cannot be created: ${(error as Error).message}`,
      };
    }
  }
  const invocation = bwrapInvocation(status.bwrapPath, world, {
    limits: sandbox.limits,
    ...(cgroup ? { cgroupProcs: cgroup.procs } : {}),
  });
  return { ok: true, invocation: cgroup ? { ...invocation, release: cgroup.release } : invocation };
}

function isWithinOrEqual(child: string, parent: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!isAbsolute(rel) && rel !== '..' && !rel.startsWith(`..${sep}`));
}

/**
 * The limit a command ran into, for the tool result: from its exit status (128 + SIGXCPU / SIGXFSZ) or, for
 * processes and memory (which make calls fail rather than kill), from what the shell printed.
 */
export function limitHit(sandbox: ToolSandbox, exitCode: number | null, output = ''): string | undefined {
  const { limits } = sandbox;
  if (exitCode === 152 || /CPU time limit exceeded/.test(output)) {
    return `the sandbox's CPU time limit (${limits.cpuSeconds} s per process, ${SANDBOX_LIMIT_SETTINGS.cpuSeconds})`;
  }
  if (exitCode === 153 || /File size limit exceeded/.test(output)) {
    return `the sandbox's file size limit (${limits.fileMb} MiB, ${SANDBOX_LIMIT_SETTINGS.fileMb})`;
  }
  if (/fork: (retry: )?Resource temporarily unavailable/.test(output)) {
    return `the sandbox's process limit (${limits.maxProcesses} per command, ${SANDBOX_LIMIT_SETTINGS.maxProcesses})`;
  }
  if (/Cannot allocate memory|cannot allocate \d+ bytes|memory exhausted/.test(output)) {
    return `the sandbox's memory limit (${limits.memoryMb} MiB per process, ${SANDBOX_LIMIT_SETTINGS.memoryMb})`;
  }
  return undefined;
}

function bashUnavailable(status: SandboxStatus): PermissionDecision {
  return {
    behavior: 'deny',
    reason: SANDBOX_UNAVAILABLE_REASON,
    message:
      `Bash is not available to this agent: the OS sandbox cannot start on this host (${status.reason}). ` +
      'Use Read, Grep and Glob instead.',
  };
}

/** `canUseTool` with Bash denied, at permission time, where the sandbox is unavailable. */
export function gateBashOnSandbox(canUseTool: CanUseTool, sandbox: ToolSandbox): CanUseTool {
  if (sandbox.status.available) return canUseTool;
  return (tool, input, ctx) =>
    tool.name === 'Bash' ? bashUnavailable(sandbox.status) : canUseTool(tool, input, ctx);
}

const PREPARED = Symbol.for('engram.sandbox.prepared');

/** The same tools, each called with `sandbox` in its context. Definitions and answers are the originals'. */
export function withToolSandbox(tools: readonly AnyTool[], sandbox: ToolSandbox): AnyTool[] {
  return tools.map((tool) => ({
    [PREPARED]: true,
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema,
    maxResultChars: tool.maxResultChars,
    definition: () => tool.definition(),
    isReadOnly: (input: unknown) => tool.isReadOnly(input),
    isConcurrencySafe: (input: unknown) => tool.isConcurrencySafe(input),
    call: (input: unknown, ctx: ToolContext) => tool.call(input, { ...ctx, sandbox }),
  }));
}

export interface UnattendedOptions {
  tools: readonly AnyTool[];
  canUseTool: CanUseTool;
  /** Where writes may land when the policy declares no `writeJail` (a fork: its working directory). */
  defaultRoot: string;
  /** An explicit jail, over the policy's. */
  jail?: WriteJail;
  /**
   * What Bash may read besides the jail root: the job's world (a tenant's job: its workspace and ENGRAM_HOME
   * area). Default: `defaultRoot` (the fork's working directory).
   */
  readable?: readonly string[];
  /** Probe options, or a fixed status (tests). */
  probe?: SandboxProbeOptions & { status?: SandboxStatus };
}

/**
 * Tools and policy for an unattended run. Throws SandboxUnavailableError where the sandbox is required
 * (ENGRAM_SANDBOX=require) and cannot start.
 */
export async function prepareUnattended(
  opts: UnattendedOptions,
): Promise<{ tools: AnyTool[]; canUseTool: CanUseTool; sandbox: ToolSandbox }> {
  const jail = opts.jail ?? declaredWriteJail(opts.canUseTool) ?? { root: opts.defaultRoot };
  const sandbox = await createToolSandbox(jail, {
    ...opts.probe,
    readable: opts.readable ?? [opts.defaultRoot],
  });
  if (!sandbox.status.available && sandbox.status.mode === 'require') {
    throw new SandboxUnavailableError(sandbox.status);
  }
  return {
    tools: withToolSandbox(opts.tools, sandbox),
    canUseTool: gateBashOnSandbox(opts.canUseTool, sandbox),
    sandbox,
  };
}

/**
 * For the query loop: when `canUseTool` declares a write jail and the tools are not prepared yet, the
 * options with prepared tools and policy (so a caller that hands a jailed policy to `runQueryLoop` directly
 * gets the sandbox too); otherwise the options unchanged.
 */
/**
 * What a job's Bash may read, from the job's read boundary (one boundary per job): a tenant's job, its roots
 * (workspace and ENGRAM_HOME area); a local job (the CLI's), its working directory. The jail root (the memory
 * directory) is added by `sandboxedShell`.
 */
export function worldReadable(boundary: ReadBoundary | undefined, cwd: string): readonly string[] {
  return boundary?.kind === 'roots' ? boundary.roots : [cwd];
}

export async function sandboxForJailedPolicy<
  O extends { tools: readonly AnyTool[]; canUseTool: CanUseTool; cwd: string; readBoundary?: ReadBoundary },
>(opts: O): Promise<O> {
  const jail = declaredWriteJail(opts.canUseTool);
  if (!jail || opts.tools.every((t) => (t as unknown as Record<symbol, unknown>)[PREPARED] === true)) {
    return opts;
  }
  const prepared = await prepareUnattended({
    tools: opts.tools,
    canUseTool: opts.canUseTool,
    defaultRoot: opts.cwd,
    jail,
    readable: worldReadable(opts.readBoundary, opts.cwd),
  });
  return { ...opts, tools: prepared.tools, canUseTool: prepared.canUseTool };
}
