import { promises as fs } from 'node:fs';
import { resolve } from 'node:path';
import { declaredWriteJail, type WriteJail } from '@engram/write-jail/write-jail';
import type { AnyTool, CanUseTool, PermissionDecision, ToolContext } from '../tools/tool.js';
import {
  type BwrapInvocation,
  bwrapInvocation,
  type SandboxProbeOptions,
  type SandboxStatus,
  SandboxUnavailableError,
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
  /** Directories Bash must not see at all (empty tmpfs), and the ones under them it may read. */
  hidden?: readonly string[];
  readable?: readonly string[];
  status: SandboxStatus;
}

export async function createToolSandbox(
  jail: WriteJail,
  probe: SandboxProbeOptions & { status?: SandboxStatus } = {},
): Promise<ToolSandbox> {
  const root = resolve(jail.root);
  await fs.mkdir(root, { recursive: true, mode: 0o700 });
  const status = probe.status ?? (await sandboxStatus(probe));
  return { writableRoot: await fs.realpath(root), bashWritesRoot: jail.bash === 'write-root', status };
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
  return {
    ok: true,
    invocation: bwrapInvocation(status.bwrapPath, {
      cwd: realCwd,
      writable: sandbox.bashWritesRoot ? [sandbox.writableRoot] : [],
      ...(sandbox.hidden ? { hidden: sandbox.hidden } : {}),
      ...(sandbox.readable ? { readable: sandbox.readable } : {}),
    }),
  };
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
  const sandbox = await createToolSandbox(jail, opts.probe);
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
export async function sandboxForJailedPolicy<
  O extends { tools: readonly AnyTool[]; canUseTool: CanUseTool; cwd: string },
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
  });
  return { ...opts, tools: prepared.tools, canUseTool: prepared.canUseTool };
}
