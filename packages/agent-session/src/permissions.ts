import type { CanUseTool, PermissionDecision } from '@engram/agent-runtime/tools/tool';
import { resolveInside } from '@engram/memory-core/paths/containment';
import type { EngramPaths } from '@engram/memory-core/paths/memory-paths';
import { memoryWritePolicy } from '@engram/memory-core/policy/memory-permissions';

// The foreground agent's permission hook. Reading is free; read-only Bash is free; writing inside the memory
// directory is free (the user asked the agent to "remember" or "forget") on the same terms a memory fork gets
// (visible *.md files, no links, bounded size, no secrets into team memory: a `.git/config` planted there
// would otherwise steer a later read-only `git`); anything else needs --allowed-tools (non-interactive) or the
// user's yes (chat).

const READ_TOOLS = new Set(['Read', 'Grep', 'Glob']);
const WRITE_TOOLS = new Set(['Write', 'Edit']);

export interface MainPolicyOptions {
  paths: EngramPaths;
  /** Tools allowed without asking (from --allowed-tools). */
  allowedTools: ReadonlySet<string>;
  /** Interactive approval; without it, unapproved calls are denied with how to allow them. */
  ask?: (question: string) => Promise<boolean>;
}

export function parseAllowedTools(list: string | undefined): Set<string> {
  return new Set(
    (list ?? '')
      .split(/[,\s]+/)
      .map((s) => s.trim())
      .filter(Boolean),
  );
}

export function mainAgentPolicy(opts: MainPolicyOptions): CanUseTool {
  const memoryPolicy = memoryWritePolicy(opts.paths.memoryDir, { teamDir: opts.paths.teamDir });
  const allow: PermissionDecision = { behavior: 'allow' };
  const needsApproval = async (tool: string, what: string): Promise<PermissionDecision> => {
    if (opts.allowedTools.has(tool)) return allow;
    if (opts.ask && (await opts.ask(`Allow ${tool}: ${what}?`))) return allow;
    return {
      behavior: 'deny',
      message: opts.ask
        ? `The user declined this ${tool} call. Ask them how to proceed.`
        : `${tool} is not allowed in this non-interactive run (${what}). Re-run with --allowed-tools ${tool} to allow it.`,
    };
  };
  return async (tool, input) => {
    if (READ_TOOLS.has(tool.name)) return allow;
    if (tool.name === 'Bash') {
      if (tool.isReadOnly?.(input) === true) return allow;
      return needsApproval('Bash', `\`${String(input.command ?? '').slice(0, 200)}\``);
    }
    if (WRITE_TOOLS.has(tool.name)) {
      const filePath = typeof input.file_path === 'string' ? input.file_path : '';
      const inside = filePath
        ? await resolveInside(filePath, opts.paths.memoryDir)
        : { ok: false as const, reason: '' };
      if (inside.ok) {
        const decision = await memoryPolicy(tool, input);
        if (decision.behavior === 'allow') return allow;
        // A secret into team memory is never approvable; any other refusal is the user's call.
        if (decision.reason === 'team_secret') return { behavior: 'deny', message: decision.message };
        return needsApproval(tool.name, `${filePath} (${decision.message})`);
      }
      return needsApproval(tool.name, filePath || '(no file_path)');
    }
    return needsApproval(tool.name, 'this tool');
  };
}
