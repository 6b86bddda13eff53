import { promises as fs } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import type { UnattendedBoundary } from '@engram/agent-runtime/sandbox/boundary';
import { rootsBoundary } from '@engram/agent-runtime/sandbox/read-boundary';
import type { CanUseTool, PermissionDecision } from '@engram/agent-runtime/tools/tool';
import { resolveInside } from '@engram/memory-core/paths/containment';
import type { EngramPaths } from '@engram/memory-core/paths/memory-paths';
import { checkTeamSecret } from '@engram/memory-core/policy/memory-permissions';
import type { ServedTool, Tenant } from '@engram/tenants/tenant-store';

// The permission hook of a served (unattended, remote) turn. Nobody is there to ask, and the prompt comes
// from a network client, so every tool call is judged against the tenant — never against anything the
// request or the model says about itself:
//
// - the tenant's policy lists the tools it may use; the request may only remove tools from that list;
// - Read/Grep/Glob see only the tenant's workspace and the tenant's own ENGRAM_HOME area (its memory and
//   persisted tool results), judged on real paths (symlinks resolved), so `../`, absolute paths and links
//   out of the workspace are refused;
// - Write/Edit land in the session's memory directory (always allowed, except secrets into team memory) or,
//   if the policy allows them, strictly inside the workspace (packages/memory-core containment); the write
//   itself goes through the jailed writer rooted there (`servedBoundary`), so a link flipped after this
//   check makes it fail instead of landing elsewhere;
// - Bash runs only if the tenant's policy allows it. It is not confined by this hook (a command string is
//   not a path): the OS sandbox is the boundary (`servedBoundary` below).

export interface ServedPolicyOptions {
  tenant: Pick<Tenant, 'workspace' | 'home' | 'id'>;
  paths: EngramPaths;
  /** The tenant's policy ∩ the request's `allowedTools`. */
  allowedTools: ReadonlySet<ServedTool>;
}

/** The tools a turn may use: the tenant's policy, narrowed (never widened) by the request. */
export function effectiveTools(
  tenantTools: ReadonlySet<ServedTool>,
  requested: readonly string[] | undefined,
): Set<ServedTool> {
  if (requested === undefined) return new Set(tenantTools);
  const asked = new Set(requested);
  return new Set([...tenantTools].filter((t) => asked.has(t)));
}

/**
 * A served turn's boundary, as plain configuration (turn-runner prepares it with `prepareUnattended` and hands
 * it to the turn): Bash runs in the OS sandbox whose world is the tenant's — its workspace (writable when the
 * turn may change files, i.e. Write or Edit allowed) and its own ENGRAM_HOME area, read-only; besides them only
 * the system directories, no network, a private /tmp, an empty HOME, an allowlisted environment and the
 * per-command limits. Nothing of the operator (its HOME, the rest of ENGRAM_HOME, other workspaces) is mounted
 * at all. Read, Grep, Glob and Write/Edit's read-before-write open only what lies in the workspace and the
 * area, judged on the opened inode (the policy's path check is the first filter; a link flipped after it
 * changes nothing). Write/Edit land through the jailed writer (descriptor-relative, O_NOFOLLOW at every step)
 * in the memory directory, or the workspace when allowed. Where the sandbox cannot start, Bash is denied at
 * permission time with the reason (ENGRAM_SANDBOX=require refuses the turn).
 */
export async function servedBoundary(opts: {
  tenant: Pick<Tenant, 'workspace' | 'home'>;
  allowedTools: ReadonlySet<ServedTool>;
  /** The session's memory directory: served Write/Edit may always land there. */
  memoryDir: string;
}): Promise<UnattendedBoundary> {
  const { workspace, home } = opts.tenant;
  const writes = opts.allowedTools.has('Write') || opts.allowedTools.has('Edit');
  return {
    kind: 'unattended',
    jail: writes
      ? { root: workspace, bash: 'write-root', alsoWritable: [opts.memoryDir] }
      : { root: opts.memoryDir, bash: 'read-only' },
    read: await rootsBoundary([workspace, home]),
    world: [workspace, home],
  };
}

function isWithinOrEqual(child: string, parent: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!isAbsolute(rel) && rel !== '..' && !rel.startsWith(`..${sep}`));
}

/** The real path of an existing `target` if it is inside (or is) one of `roots`, else a reason. */
async function readableInside(
  target: string,
  roots: readonly string[],
): Promise<{ ok: true } | { ok: false; reason: string }> {
  if (target.includes('\0')) return { ok: false, reason: 'the path contains a NUL byte' };
  let real: string;
  try {
    real = await fs.realpath(target);
  } catch {
    // Nonexistent: judge the logical path, so the model gets "not found" from the tool only inside.
    real = resolve(target);
  }
  for (const root of roots) {
    const realRoot = await fs.realpath(root).catch(() => resolve(root));
    if (isWithinOrEqual(real, realRoot)) return { ok: true };
  }
  return { ok: false, reason: 'outside the workspace' };
}

export function servedTurnPolicy(opts: ServedPolicyOptions): CanUseTool {
  const allow: PermissionDecision = { behavior: 'allow' };
  const deny = (message: string): PermissionDecision => ({ behavior: 'deny', message });
  const { tenant, paths, allowedTools } = opts;
  const readRoots = [tenant.workspace, tenant.home];
  const notAllowed = (tool: string) =>
    deny(`${tool} is not allowed for this session (the tenant's policy or the request's allowedTools).`);
  const readCheck = async (tool: string, target: string) => {
    const inside = await readableInside(resolve(paths.cwd, target), readRoots);
    return inside.ok
      ? allow
      : deny(`${tool} may only access files inside the workspace ${tenant.workspace} (${inside.reason}).`);
  };

  return async (tool, input) => {
    const name = tool.name as ServedTool;
    switch (tool.name) {
      case 'Read':
        if (!allowedTools.has(name)) return notAllowed(tool.name);
        return readCheck('Read', String(input.file_path ?? ''));
      case 'Grep':
        if (!allowedTools.has(name)) return notAllowed(tool.name);
        return readCheck('Grep', typeof input.path === 'string' ? input.path : '.');
      case 'Glob': {
        if (!allowedTools.has(name)) return notAllowed(tool.name);
        const pattern = String(input.pattern ?? '');
        // An absolute pattern or a `..` segment moves the walk's root out of `path`: refuse, say what works.
        if (isAbsolute(pattern) || pattern.split(/[\\/]/).includes('..')) {
          return deny(
            'Glob patterns must be relative and free of `..`; put the directory in `path` instead.',
          );
        }
        return readCheck('Glob', typeof input.path === 'string' ? input.path : '.');
      }
      case 'Write':
      case 'Edit': {
        const filePath = typeof input.file_path === 'string' ? input.file_path : '';
        if (!filePath) return deny(`${tool.name} needs an absolute file_path.`);
        const memory = await resolveInside(filePath, paths.memoryDir);
        if (memory.ok) {
          const content =
            tool.name === 'Write' ? String(input.content ?? '') : String(input.new_string ?? '');
          const secret = await checkTeamSecret(memory.path, content, paths.teamDir);
          return secret.ok ? allow : deny(secret.message);
        }
        if (!allowedTools.has(name)) return notAllowed(tool.name);
        const inside = await resolveInside(filePath, tenant.workspace);
        return inside.ok
          ? allow
          : deny(`${tool.name} may only write inside the workspace ${tenant.workspace} (${inside.reason}).`);
      }
      case 'Bash':
        return allowedTools.has('Bash') ? allow : notAllowed('Bash');
      default:
        return deny(`${tool.name} is not available to served turns.`);
    }
  };
}
