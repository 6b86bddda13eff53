import { promises as fs } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { resolveInside } from '../paths/containment.js';
import { ENTRYPOINT_NAME, TEAM_DIRNAME } from '../paths/memory-paths.js';
import { scanForSecrets } from '../security/secret-scanner.js';

// Tool permissions for forked memory agents (docs/design.md §6). Forks keep the parent's full tool list so their
// requests share its prompt cache; what they may actually do is decided here, per call. Denials carry a
// message the model can act on, and never echo a host path other than the memory directory itself. These are
// filters: the boundary (the directory a fork may change, what it may read, Bash's world) is configuration its
// job states beside the policy (agent-runtime's `UnattendedBoundary`), never a property of it.

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
  'hidden_path',
  'not_markdown',
  'entrypoint_not_allowed',
  'too_large',
  'symlink_in_path',
  'hard_link',
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

/** Largest file a memory agent may write (memories are small; the index is read up to 25,000 characters). */
export const MAX_MEMORY_WRITE_BYTES = 256 * 1024;

export interface PermissionDenial {
  tool: string;
  reason: DenialReason;
}

export interface MemoryPolicyOptions {
  /** Team memory directory; defaults to `<memoryDir>/team`. Writes there are refused when they carry secrets. */
  teamDir?: string;
  /** Called for every denial, so callers can count them by tool and reason. */
  onDenial?: (denial: PermissionDenial) => void;
  /**
   * Whether the agent may write the index (`MEMORY.md` at the top of the memory or team directory); it is
   * never writable elsewhere. Default true: extraction and consolidation both maintain the index.
   */
  allowEntrypoint?: boolean;
  /** Largest content a Write or Edit may leave in a file. Default MAX_MEMORY_WRITE_BYTES. */
  maxBytes?: number;
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
 * input read-only; Edit and Write only for a visible `*.md` file that resolves (`..`, Unicode) strictly
 * inside `memoryDir` with no symlink on the way and no other hard link, no dot-segment below `memoryDir`
 * (`.history`, `.consolidate-lock`, `.git`, `.gitconfig`), `MEMORY.md` only as the index at the top of the
 * memory or team directory, at most `maxBytes`, and no secret-looking content into team memory; everything
 * else denied. (The fork's job jails it to `memoryDir`: the boundary, beside this filter.)
 */
export function memoryWritePolicy(memoryDir: string, opts: MemoryPolicyOptions = {}): CanUseTool {
  const teamDir = opts.teamDir ?? join(memoryDir, TEAM_DIRNAME);
  const { onDenial } = opts;
  const allowEntrypoint = opts.allowEntrypoint ?? true;
  const maxBytes = opts.maxBytes ?? MAX_MEMORY_WRITE_BYTES;
  const allowedSummary =
    `Allowed: Read, Grep, Glob; Bash for read-only commands (${READ_ONLY_BASH_HINT}); ` +
    `Edit and Write for files inside ${memoryDir} (visible .md files only).`;

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
      const shape = await checkMemoryFileShape(inside.path, memoryDir, teamDir, allowEntrypoint);
      if (!shape.ok) return deny(tool, shape.reason, `${name} refused: ${shape.message}`, onDenial);
      const links = await checkNoLinks(filePath, memoryDir);
      if (!links.ok) return deny(tool, links.reason, `${name} refused: ${links.message}`, onDenial);
      const size = await checkSize(name, input, inside.path, maxBytes);
      if (!size.ok) return deny(tool, 'too_large', `${name} refused: ${size.message}`, onDenial);
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
 * else; refused when the notes file is a symlink or has another hard link, or the edit would leave it over
 * `maxBytes`. (The fork's job jails it to the notes file's directory.)
 */
export function sessionMemoryPolicy(
  summaryPath: string,
  opts: { onDenial?: (denial: PermissionDenial) => void; maxBytes?: number } = {},
): CanUseTool {
  const { onDenial } = opts;
  const maxBytes = opts.maxBytes ?? MAX_MEMORY_WRITE_BYTES;
  const sessionMemoryDir = dirname(summaryPath);
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
    const links = await checkNoLinks(filePath, sessionMemoryDir);
    if (!links.ok) return deny(tool, links.reason, `Edit refused: ${links.message}`, onDenial);
    const size = await checkSize('Edit', input, target.path, maxBytes);
    if (!size.ok) return deny(tool, 'too_large', `Edit refused: ${size.message}`, onDenial);
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

type Check = { ok: true } | { ok: false; reason: DenialReason; message: string };
const OK: Check = { ok: true };

/** Path shape: visible segments only, a `.md` file, the index only where it belongs. */
async function checkMemoryFileShape(
  realTarget: string,
  memoryDir: string,
  teamDir: string,
  allowEntrypoint: boolean,
): Promise<Check> {
  const realRoot = await fs.realpath(memoryDir).catch(() => memoryDir);
  const segments = relative(realRoot, realTarget).split(sep);
  if (segments.some((s) => s.startsWith('.'))) {
    return {
      ok: false,
      reason: 'hidden_path',
      message:
        'hidden files and directories of the memory directory (names starting with ".", such as .history, ' +
        '.consolidate-lock, .git) are not writable. Write memories as visible .md files.',
    };
  }
  const name = segments[segments.length - 1]!;
  if (!name.endsWith('.md') || name === '.md') {
    return { ok: false, reason: 'not_markdown', message: 'only Markdown memory files (*.md) are writable.' };
  }
  if (name === ENTRYPOINT_NAME) {
    const parent = dirname(realTarget);
    const realTeam = await fs.realpath(teamDir).catch(() => teamDir);
    const atTop = parent === realRoot || parent === realTeam;
    if (!allowEntrypoint || !atTop) {
      return {
        ok: false,
        reason: 'entrypoint_not_allowed',
        message: allowEntrypoint
          ? `${ENTRYPOINT_NAME} is only writable as the index at the top of the memory (or team) directory.`
          : `this job may not change the index ${ENTRYPOINT_NAME}; write or edit the memory files themselves.`,
      };
    }
  }
  return OK;
}

/**
 * No symlink anywhere on the path below `root` (even one leading back inside), and no other hard link to an
 * existing target: a link is how a write meant for the memory directory changes something else.
 */
async function checkNoLinks(filePath: string, root: string): Promise<Check> {
  const target = resolve(filePath.normalize('NFC'));
  const realRoot = await fs.realpath(root).catch(() => resolve(root));
  let path: string | undefined;
  let segments: string[] = [];
  for (const base of [resolve(root).normalize('NFC'), realRoot]) {
    const rel = relative(base, target);
    if (rel !== '' && rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel)) {
      path = base;
      segments = rel.split(sep);
      break;
    }
  }
  if (path === undefined) {
    return {
      ok: false,
      reason: 'symlink_in_path',
      message: 'the path reaches the directory through a link.',
    };
  }
  for (const [i, segment] of segments.entries()) {
    path = join(path, segment);
    let stat: Awaited<ReturnType<typeof fs.lstat>>;
    try {
      stat = await fs.lstat(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return OK;
      return { ok: false, reason: 'symlink_in_path', message: 'the path could not be checked for links.' };
    }
    if (stat.isSymbolicLink()) {
      return {
        ok: false,
        reason: 'symlink_in_path',
        message: 'the path runs through a symlink inside the writable directory; write to a real file.',
      };
    }
    if (i === segments.length - 1 && stat.isFile() && stat.nlink > 1) {
      return {
        ok: false,
        reason: 'hard_link',
        message: 'the file has another hard link (writing it would change a file elsewhere too).',
      };
    }
  }
  return OK;
}

/** The size the file would have after the call (Write: its content; Edit: the edit applied to the file now). */
async function checkSize(
  toolName: string,
  input: Record<string, unknown>,
  realTarget: string,
  maxBytes: number,
): Promise<{ ok: true } | { ok: false; message: string }> {
  let after: string;
  if (toolName === 'Write') after = typeof input.content === 'string' ? input.content : '';
  else {
    const oldString = typeof input.old_string === 'string' ? input.old_string : '';
    const newString = typeof input.new_string === 'string' ? input.new_string : '';
    const current = await fs.readFile(realTarget, 'utf8').catch(() => undefined);
    if (current === undefined || oldString === '') after = newString;
    else if (input.replace_all === true) after = current.split(oldString).join(newString);
    else after = current.replace(oldString, () => newString);
  }
  const bytes = Buffer.byteLength(after, 'utf8');
  if (bytes <= maxBytes) return { ok: true };
  return {
    ok: false,
    message: `the file would be ${bytes} bytes, over the ${maxBytes}-byte limit for a memory file. Keep memories short; split or summarize.`,
  };
}
