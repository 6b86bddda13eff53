import { join } from 'node:path';
import { resolveInside } from '../paths/containment.js';
import { TEAM_DIRNAME } from '../paths/memory-paths.js';
import { scanForSecrets } from '../security/secret-scanner.js';

// Tool permissions for forked memory agents (DESIGN §6). Forks keep the parent's full tool list so their
// requests share its prompt cache; what they may actually do is decided here, per call. Denials carry a
// message the model can act on, and never echo a host path other than the memory directory itself.

export interface ToolDescriptor {
  name: string;
  /** Supplied by the runtime for Bash: true only when the parsed command cannot write anything. */
  isReadOnly?(input: Record<string, unknown>): boolean;
}

export const DENIAL_REASONS = [
  'tool_not_allowed',
  'bash_not_read_only',
  'missing_file_path',
  'path_outside_memory',
  'team_secret',
  'not_summary_file',
] as const;
export type DenialReason = (typeof DENIAL_REASONS)[number];

export type PermissionDecision =
  | { behavior: 'allow' }
  | {
      behavior: 'deny';
      message: string;
      /** Machine-readable cause, for metrics (`denials{tool, reason}`). */
      reason?: DenialReason;
    };

export type CanUseTool = (
  tool: ToolDescriptor,
  input: Record<string, unknown>,
) => Promise<PermissionDecision>;

export interface PermissionDenial {
  tool: string;
  reason: DenialReason;
}

export interface MemoryPolicyOptions {
  /** Team memory directory; defaults to `<memoryDir>/team`. Writes there are refused when they carry secrets. */
  teamDir?: string;
  /** Called for every denial, so callers can count them by tool and reason. */
  onDenial?: (denial: PermissionDenial) => void;
}

export const READ_ONLY_TOOLS: readonly string[] = ['Read', 'Grep', 'Glob'];
export const FILE_WRITE_TOOLS: readonly string[] = ['Edit', 'Write'];

const READ_ONLY_BASH_HINT = 'ls, find, grep, cat, stat, wc, head, tail and similar';

const ALLOW: PermissionDecision = { behavior: 'allow' };

function deny(
  tool: ToolDescriptor,
  reason: DenialReason,
  message: string,
  onDenial: ((denial: PermissionDenial) => void) | undefined,
): PermissionDecision {
  onDenial?.({ tool: tool.name, reason });
  return { behavior: 'deny', message, reason };
}

/** Whether a decision is a denial (narrowing helper). */
export function isDenied(
  decision: PermissionDecision,
): decision is Extract<PermissionDecision, { behavior: 'deny' }> {
  return decision.behavior === 'deny';
}

/**
 * Policy for the extraction and consolidation forks: Read, Grep and Glob; Bash only when the tool reports the
 * input read-only; Edit and Write only for a path that resolves (`..`, symlinks, Unicode) strictly inside
 * `memoryDir` — and not for secret-looking content into team memory; everything else denied.
 */
export function memoryWritePolicy(memoryDir: string, opts: MemoryPolicyOptions = {}): CanUseTool {
  const teamDir = opts.teamDir ?? join(memoryDir, TEAM_DIRNAME);
  const { onDenial } = opts;
  const allowedSummary =
    `Allowed: Read, Grep, Glob; Bash for read-only commands (${READ_ONLY_BASH_HINT}); ` +
    `Edit and Write for files inside ${memoryDir}.`;

  return async (tool, input) => {
    const name = tool.name;
    if (READ_ONLY_TOOLS.includes(name)) return ALLOW;

    if (name === 'Bash') {
      let readOnly = false;
      try {
        readOnly = tool.isReadOnly?.(input) === true;
      } catch {
        readOnly = false;
      }
      if (readOnly) return ALLOW;
      return deny(
        tool,
        'bash_not_read_only',
        `Only read-only shell commands are allowed here (${READ_ONLY_BASH_HINT}); no redirection, command ` +
          'substitution, or commands that write, move or delete files. Use Edit or Write for memory files.',
        onDenial,
      );
    }

    if (FILE_WRITE_TOOLS.includes(name)) {
      const filePath = input.file_path;
      if (typeof filePath !== 'string' || filePath === '') {
        return deny(
          tool,
          'missing_file_path',
          `${name} needs an absolute file_path inside ${memoryDir}.`,
          onDenial,
        );
      }
      const inside = await resolveInside(filePath, memoryDir);
      if (!inside.ok) {
        return deny(
          tool,
          'path_outside_memory',
          `${name} is only allowed for files inside the memory directory ${memoryDir} (${inside.reason}). ` +
            'Write memories there, using an absolute path.',
          onDenial,
        );
      }
      const secret = await checkTeamSecret(inside.path, writtenContent(name, input), teamDir);
      if (!secret.ok) return deny(tool, 'team_secret', secret.message, onDenial);
      return ALLOW;
    }

    return deny(
      tool,
      'tool_not_allowed',
      `${name} is not available to the memory agent. ${allowedSummary}`,
      onDenial,
    );
  };
}

/**
 * Policy for the session-memory fork: Edit on exactly `summaryPath` (compared after resolving both), nothing
 * else. A summary file that is itself a symlink leading out of its directory is refused too.
 */
export function sessionMemoryPolicy(
  summaryPath: string,
  opts: { onDenial?: (denial: PermissionDenial) => void } = {},
): CanUseTool {
  const { onDenial } = opts;
  const sessionMemoryDir = join(summaryPath, '..');
  const message = `Only Edit on the session notes file ${summaryPath} is allowed here.`;
  return async (tool, input) => {
    if (tool.name !== 'Edit') return deny(tool, 'tool_not_allowed', message, onDenial);
    const filePath = input.file_path;
    if (typeof filePath !== 'string' || filePath === '') {
      return deny(tool, 'missing_file_path', message, onDenial);
    }
    const [target, expected] = await Promise.all([
      resolveInside(filePath, sessionMemoryDir),
      resolveInside(summaryPath, sessionMemoryDir),
    ]);
    if (!target.ok || !expected.ok || target.path !== expected.path) {
      return deny(tool, 'not_summary_file', message, onDenial);
    }
    return ALLOW;
  };
}

function writtenContent(toolName: string, input: Record<string, unknown>): string {
  const value = toolName === 'Write' ? input.content : input.new_string;
  return typeof value === 'string' ? value : '';
}

export type TeamSecretCheck =
  | { ok: true }
  | { ok: false; message: string; ruleIds: string[]; labels: string[] };

/**
 * Refuses secret-looking `content` bound for a file inside `teamDir` (team memory is shared with every
 * collaborator). Files elsewhere always pass. Reports rule ids and labels, never the matched text.
 */
export async function checkTeamSecret(
  filePath: string,
  content: string,
  teamDir: string,
): Promise<TeamSecretCheck> {
  if (content === '' || !(await resolveInside(filePath, teamDir)).ok) return { ok: true };
  const found = scanForSecrets(content);
  if (found.length === 0) return { ok: true };
  const labels = found.map((f) => f.label);
  return {
    ok: false,
    ruleIds: found.map((f) => f.ruleId),
    labels,
    message:
      `This content contains what looks like a secret (${labels.join(', ')}), and team memory is shared with ` +
      'every collaborator on the project. Remove the secret (describe where to find it instead) and try again.',
  };
}
