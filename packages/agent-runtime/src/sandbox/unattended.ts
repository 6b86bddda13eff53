import { promises as fs } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import {
  parseSandboxLimits,
  SANDBOX_LIMIT_SETTINGS,
  type SandboxLimits,
} from '@engram/config/sandbox-limits';
import { EngramError } from '@engram/errors/engram-error';
import type { CanUseTool, PermissionDecision } from '../tools/tool.js';
import {
  type AttendedBoundary,
  actualInput,
  type PathAlias,
  type RunBoundary,
  type UnattendedBoundary,
  visibleText,
  type WriteJail,
} from './boundary.js';
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

// How a tool call that no person approves gets its boundary. The caller states it as plain configuration
// (`UnattendedBoundary`, boundary.ts: the write jail, the read boundary, Bash's world, an optional path alias);
// `prepareUnattended` resolves it once per run into what every tool sees in its context
// (`ToolContext.boundary`): Bash runs in the OS sandbox, Write/Edit land through the jailed write, Read, Grep
// and Glob open only what the read boundary admits. The query loop denies Bash at permission time, with the
// reason, where the sandbox cannot start (`gatedPolicy`). The permission policy stays the first filter.

/** Bash's sandbox (`PreparedBoundary.sandbox`). */
export interface ToolSandbox {
  /** Real path of the jail root: the one directory Bash may write, when `bashWritesRoot`. */
  writableRoot: string;
  /** Whether Bash may write `writableRoot` (`WriteJail.bash: 'write-root'`). */
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

/** An unattended run's boundary as its tools see it (`ToolContext.boundary`), from `prepareUnattended`. */
export interface PreparedBoundary {
  kind: 'unattended';
  /** What Read, Grep, Glob and Write/Edit's read-before-write may open. */
  read: ReadBoundary;
  /**
   * Where Write/Edit may land, through the jailed writer rooted at the deepest of these holding the path:
   * the jail root and its `alsoWritable` directories, each as given and as its real path.
   */
  writeRoots: readonly string[];
  /** Bash: the OS sandbox showing only its world. */
  sandbox: ToolSandbox;
  /** The path alias, `actual` as its real path. */
  alias?: PathAlias;
}

/** What a tool sees of its run's boundary: attended (nothing confines it), or prepared. */
export type ToolBoundary = AttendedBoundary | PreparedBoundary;

/** The read boundary a tool applies under `boundary` (attended: none; any path, still bounded). */
export function readBoundaryOf(boundary: ToolBoundary): ReadBoundary | undefined {
  return boundary.kind === 'unattended' ? boundary.read : undefined;
}

/** The path alias of `boundary`, if it has one. */
export function aliasOf(boundary: ToolBoundary): PathAlias | undefined {
  return boundary.kind === 'unattended' ? boundary.alias : undefined;
}

/** A boundary its caller stated wrongly (a programming error, not the model's): it never runs. */
export class InvalidBoundaryError extends EngramError {
  constructor(message: string) {
    super('INVALID_BOUNDARY', message, { retryable: false });
  }
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

/**
 * The bwrap command line for a Bash call in `sandbox` from `cwd`, or the reason there is none. With `alias`,
 * its `actual` directory is mounted at `visible` (writable when Bash may write it), and nothing of the world at
 * or below either is mounted by its own name (the copy is seen only where the agent's prompt says it is).
 */
export async function sandboxedShell(
  sandbox: ToolSandbox,
  cwd: string,
  alias?: PathAlias,
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
  const shown = alias
    ? { visible: await fs.realpath(alias.visible).catch(() => resolve(alias.visible)), actual: alias.actual }
    : undefined;
  const shadowed = (d: string) =>
    shown !== undefined && (isWithinOrEqual(d, shown.visible) || isWithinOrEqual(d, shown.actual));
  const readable = sandbox.bashWritesRoot ? sandbox.readable : [...sandbox.readable, sandbox.writableRoot];
  const world: SandboxWorld = {
    cwd: realCwd,
    readable: readable.filter((d) => !shadowed(d)),
    writable: sandbox.bashWritesRoot && !shadowed(sandbox.writableRoot) ? [sandbox.writableRoot] : [],
    ...(shown
      ? {
          aliases: [
            {
              ...shown,
              writable: sandbox.bashWritesRoot && isWithinOrEqual(shown.actual, sandbox.writableRoot),
            },
          ],
        }
      : {}),
  };
  const inWorld = [...world.readable, ...world.writable, ...(shown ? [shown.visible] : [])];
  if (!inWorld.some((d) => isWithinOrEqual(realCwd, d))) {
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

/**
 * `canUseTool` asked about the files the tools will open: under a path alias, each path input mapped to the
 * copy (`actualInput`) — so a policy built over the copy checks its links and sizes, not the live files' —
 * and a denial's message shown with the visible path.
 */
export function aliasedPolicy(canUseTool: CanUseTool, alias: PathAlias | undefined): CanUseTool {
  if (!alias) return canUseTool;
  return async (tool, input, ctx) => {
    const decision = await canUseTool(tool, actualInput(alias, input, ctx?.cwd), ctx);
    return decision.behavior === 'deny'
      ? { ...decision, message: visibleText(alias, decision.message) }
      : decision;
  };
}

/**
 * The policy a run under `boundary` asks: for an unattended run, Bash denied where its sandbox cannot start,
 * and path inputs judged where the alias maps them.
 */
export function gatedPolicy(canUseTool: CanUseTool, boundary: ToolBoundary): CanUseTool {
  return boundary.kind === 'unattended'
    ? gateBashOnSandbox(aliasedPolicy(canUseTool, boundary.alias), boundary.sandbox)
    : canUseTool;
}

/** The real path of `dir`, or its resolved path while it does not exist. */
async function realOrResolved(dir: string): Promise<string> {
  return fs.realpath(dir).catch(() => resolve(dir));
}

/**
 * Resolves an unattended run's boundary for its tools: the jail root created and resolved, Bash's sandbox
 * probed (once per process) with the boundary's world, the alias's copy resolved. Throws
 * SandboxUnavailableError where the sandbox is required (ENGRAM_SANDBOX=require) and cannot start, and
 * InvalidBoundaryError for an alias whose copy lies outside what the run may see.
 */
export async function prepareUnattended(
  boundary: UnattendedBoundary,
  /** Probe options, or a fixed status (tests). Default: the process's probe (ENGRAM_SANDBOX). */
  probe: SandboxProbeOptions & { status?: SandboxStatus } = {},
): Promise<PreparedBoundary> {
  const { jail } = boundary;
  const sandbox = await createToolSandbox(jail, { ...probe, readable: boundary.world });
  if (!sandbox.status.available && sandbox.status.mode === 'require') {
    throw new SandboxUnavailableError(sandbox.status);
  }
  const also = jail.alsoWritable ?? [];
  const writeRoots = [
    ...new Set([
      sandbox.writableRoot,
      resolve(jail.root),
      ...also.map((d) => resolve(d)),
      ...(await Promise.all(also.map(realOrResolved))),
    ]),
  ];
  let alias: PathAlias | undefined;
  if (boundary.alias) {
    alias = { visible: resolve(boundary.alias.visible), actual: await realOrResolved(boundary.alias.actual) };
    const seen = [sandbox.writableRoot, ...sandbox.readable];
    if (!seen.some((d) => isWithinOrEqual(alias!.actual, d))) {
      throw new InvalidBoundaryError(
        `the path alias's directory ${alias.actual} is outside the run's jail root and world; ` +
          'an alias may only show a directory the run can see anyway (a staged copy below its jail root)',
      );
    }
  }
  return { kind: 'unattended', read: boundary.read, writeRoots, sandbox, ...(alias ? { alias } : {}) };
}

/** `prepareUnattended` for an unattended boundary; an attended one as it is. */
export async function prepareBoundary(
  boundary: RunBoundary,
  probe?: SandboxProbeOptions & { status?: SandboxStatus },
): Promise<ToolBoundary> {
  return boundary.kind === 'attended' ? boundary : prepareUnattended(boundary, probe);
}
