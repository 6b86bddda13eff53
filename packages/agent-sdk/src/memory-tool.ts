import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import type { MemoryToolHandlers } from '@anthropic-ai/sdk/helpers/beta/memory';
import type {
  BetaMemoryTool20250818CreateCommand,
  BetaMemoryTool20250818DeleteCommand,
  BetaMemoryTool20250818InsertCommand,
  BetaMemoryTool20250818RenameCommand,
  BetaMemoryTool20250818StrReplaceCommand,
  BetaMemoryTool20250818ViewCommand,
} from '@anthropic-ai/sdk/resources/beta/messages/messages';
import { EngramError, errorCode } from '@engram/errors/engram-error';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import type { MemoryQueue, MemoryWorkStatus, SessionRef } from '@engram/memory-client/memory-queue';
import { readRegularFileBounded } from '@engram/memory-core/memdir/bounded-read';
import {
  ensureIndexPointer,
  ensureMemoryDir,
  forgetMemory,
  MAX_MEMORY_FILE_READ_BYTES,
  validateMemoryRelPath,
} from '@engram/memory-core/memdir/memory-files';
import { resolveInside } from '@engram/memory-core/paths/containment';
import { ENTRYPOINT_NAME, TEAM_DIRNAME } from '@engram/memory-core/paths/memory-paths';
import { isDenied, memoryWritePolicy } from '@engram/memory-core/policy/memory-permissions';
import { scanForSecrets } from '@engram/memory-core/security/secret-scanner';

// The Messages API memory tool (`memory_20250818`, the SDK's `betaMemoryTool(handlers)`) backed by an Engram
// memory directory: `/memories/<rel>` is `<memoryDir>/<rel>`. Every write goes the way a fork's write goes —
// the fork write policy (memoryWritePolicy: containment, visible .md only, no index edits unless allowed,
// no symlink or hard link on the way, size), the secret guard (scanForSecrets, anywhere: the model is an
// outside agent), an atomic write, the index pointer (ensureIndexPointer) — and may enqueue consolidation.
// A refusal is a MemoryToolRefusal (EngramError with `code`); the tool runner hands the model its message,
// which ends with the code. Nothing is written when a call is refused.

export const MEMORY_ROOT = '/memories';

export class MemoryToolRefusal extends EngramError {
  constructor(code: string, message: string, options: { retryable?: boolean; cause?: unknown } = {}) {
    // A refusal is the call's own fault unless the caller says otherwise (a busy or unreachable resource).
    super(code, `${message} [${code}]`, { ...options, retryable: options.retryable ?? false });
  }
}

export type MemoryToolChange =
  | { kind: 'create' | 'edit' | 'delete'; file: string }
  | { kind: 'rename'; file: string; from: string };

export interface EngramMemoryToolOptions {
  /** The Engram memory directory `/memories` maps to (the host decides it; no tool argument can). */
  memoryDir: string;
  /** Whether the model may write the index (`MEMORY.md`) itself; default false: Engram maintains it. */
  allowIndexEdits?: boolean;
  /** Largest file a write may leave (default the fork policy's 256 KiB). */
  maxBytes?: number;
  /** Called after every change that landed. */
  onChange?: (change: MemoryToolChange) => void | Promise<void>;
  /**
   * Background consolidation after changes: a `dream` job for the project of `ref` (the worker's gate decides
   * whether it is due). The enqueue never fails a tool call; its status goes to `onChange`'s caller via
   * `lastConsolidation`.
   */
  consolidate?: { memory: MemoryQueue; ref: SessionRef };
}

/** MemoryToolHandlers whose commands all answer with text (a Promise), plus the consolidation status. */
export type EngramMemoryTool = {
  [K in keyof MemoryToolHandlers]: (command: Parameters<MemoryToolHandlers[K]>[0]) => Promise<string>;
} & {
  /** What the last consolidation enqueue did (undefined before the first change). */
  lastConsolidation(): MemoryWorkStatus | undefined;
};

const MAX_LINES = 999_999;
const NUMBER_WIDTH = String(MAX_LINES).length;

interface Target {
  /** Relative to the memory directory ('' for the root). */
  rel: string;
  abs: string;
}

function refuse(code: string, message: string): never {
  throw new MemoryToolRefusal(code, message);
}

/** `/memories/<rel>` → its place in the memory directory; only the shape of the path is judged here. */
function parseToolPath(memoryDir: string, path: unknown): Target {
  if (typeof path !== 'string' || path === '') refuse('INVALID_MEMORY_PATH', 'The path is empty.');
  if (/[\0\r\n\\]/.test(path))
    refuse('INVALID_MEMORY_PATH', 'The path contains a NUL, newline or backslash.');
  if (path === MEMORY_ROOT || path === `${MEMORY_ROOT}/`) return { rel: '', abs: memoryDir };
  if (!path.startsWith(`${MEMORY_ROOT}/`)) {
    refuse('INVALID_MEMORY_PATH', `Paths must start with ${MEMORY_ROOT}/ (got a path outside it).`);
  }
  const rel = path.slice(MEMORY_ROOT.length + 1).replace(/\/+$/, '');
  const segments = rel.split('/');
  if (segments.some((s) => s === '..' || s === '.' || s === '')) {
    refuse('INVALID_MEMORY_PATH', 'The path has an empty, "." or ".." segment; name files inside /memories.');
  }
  if (segments.some((s) => s.startsWith('.'))) {
    refuse('INVALID_MEMORY_PATH', 'Hidden files and directories are not part of the memory.');
  }
  return { rel, abs: join(memoryDir, rel) };
}

function isIndex(rel: string): boolean {
  return rel === ENTRYPOINT_NAME || rel === `${TEAM_DIRNAME}/${ENTRYPOINT_NAME}`;
}

/** A file the model may write: a memory (`*.md`, not an index), or an index when index edits are allowed. */
function writableFile(rel: string, allowIndexEdits: boolean): string {
  if (isIndex(rel)) {
    if (!allowIndexEdits) {
      refuse(
        'INDEX_NOT_EDITABLE',
        'MEMORY.md is the index and is maintained for you: write the memory file; its pointer is added.',
      );
    }
    return rel;
  }
  try {
    return validateMemoryRelPath(rel);
  } catch (error) {
    refuse(errorCode(error) ?? 'INVALID_MEMORY_FILE', (error as Error).message);
  }
}

/** Refuses a symlink anywhere from the memory directory down to the target (reads and deletes). */
async function assertNoSymlink(memoryDir: string, rel: string): Promise<void> {
  let current = memoryDir;
  for (const segment of rel ? rel.split('/') : []) {
    current = join(current, segment);
    let stat: import('node:fs').Stats;
    try {
      stat = await fs.lstat(current);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    if (stat.isSymbolicLink())
      refuse('SYMLINK_IN_PATH', 'The path goes through a symlink; it is not followed.');
  }
}

async function confined(memoryDir: string, target: Target): Promise<void> {
  if (target.rel === '') return;
  const inside = await resolveInside(target.abs, memoryDir);
  if (!inside.ok)
    refuse('OUTSIDE_MEMORY_DIR', `The path is not inside the memory directory (${inside.reason}).`);
  await assertNoSymlink(memoryDir, target.rel);
}

async function readText(target: Target, display: string): Promise<string> {
  try {
    const read = await readRegularFileBounded(target.abs, MAX_MEMORY_FILE_READ_BYTES, {
      followSymlinks: false,
    });
    if (read.truncated) refuse('MEMORY_FILE_TOO_LARGE', `${display} is larger than the memory tool reads.`);
    return read.bytes.toString('utf8');
  } catch (error) {
    if (error instanceof MemoryToolRefusal) throw error;
    const code = errorCode(error);
    if (code === 'ENOENT') refuse('ENOENT', `The path ${display} does not exist.`);
    if (code === 'ELOOP') refuse('SYMLINK_IN_PATH', `${display} is a symlink; it is not followed.`);
    if (code === 'EISDIR' || code === 'NOT_A_REGULAR_FILE') refuse('NOT_A_FILE', `${display} is not a file.`);
    throw error;
  }
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes}B`;
  const k = bytes / 1024;
  return k < 1024 ? `${k.toFixed(1)}K` : `${(k / 1024).toFixed(1)}M`;
}

function numbered(lines: string[], start: number): string {
  return lines.map((line, i) => `${String(i + start).padStart(NUMBER_WIDTH, ' ')}\t${line}`).join('\n');
}

/** MemoryToolHandlers for `betaMemoryTool(handlers)`, over one Engram memory directory. */
export function engramMemoryTool(opts: EngramMemoryToolOptions): EngramMemoryTool {
  const { memoryDir } = opts;
  const allowIndexEdits = opts.allowIndexEdits ?? false;
  let consolidation: MemoryWorkStatus | undefined;

  async function changed(change: MemoryToolChange): Promise<void> {
    if (opts.consolidate) {
      const { memory, ref } = opts.consolidate;
      consolidation = await memory.enqueue('dream', {
        ...memory.projectRef(ref),
        sessionIds: [],
        force: false,
        requestedAt: new Date().toISOString(),
      });
    }
    await opts.onChange?.(change);
  }

  /** The write every command ends with: secret guard, fork write policy, atomic write, index pointer. */
  async function write(rel: string, content: string, display: string): Promise<void> {
    const found = scanForSecrets(content);
    if (found.length > 0) {
      refuse(
        'SECRET_IN_MEMORY',
        `${display} would contain what looks like a secret (${found.map((f) => f.label).join(', ')}); memories ` +
          'are read back into prompts and may be shared. Describe where the secret lives instead.',
      );
    }
    await ensureMemoryDir(memoryDir);
    const path = join(memoryDir, rel);
    const decision = await memoryWritePolicy(memoryDir, {
      allowEntrypoint: allowIndexEdits,
      ...(opts.maxBytes !== undefined ? { maxBytes: opts.maxBytes } : {}),
    })({ name: 'Write' }, { file_path: path, content });
    if (isDenied(decision)) {
      refuse(`WRITE_DENIED_${(decision.reason ?? 'policy').toUpperCase()}`, decision.message);
    }
    await writeFileAtomic(path, content, { mode: 0o600 });
    if (!isIndex(rel)) await ensureIndexPointer(memoryDir, rel);
  }

  async function fileTarget(path: string, forWrite: boolean): Promise<Target> {
    const target = parseToolPath(memoryDir, path);
    if (target.rel === '') refuse('NOT_A_FILE', `${MEMORY_ROOT} is the memory directory, not a file.`);
    const rel = forWrite ? writableFile(target.rel, allowIndexEdits) : target.rel;
    const t = { rel, abs: join(memoryDir, rel) };
    await confined(memoryDir, t);
    return t;
  }

  return {
    lastConsolidation: () => consolidation,

    async view(command: BetaMemoryTool20250818ViewCommand): Promise<string> {
      const target = parseToolPath(memoryDir, command.path);
      await confined(memoryDir, target);
      if (target.rel === '') await ensureMemoryDir(memoryDir);
      let stat: import('node:fs').Stats;
      try {
        stat = await fs.lstat(target.abs);
      } catch (error) {
        if (errorCode(error) === 'ENOENT') refuse('ENOENT', `The path ${command.path} does not exist.`);
        throw error;
      }
      if (stat.isDirectory()) {
        const lines: string[] = [];
        const walk = async (dir: string, relDir: string, depth: number): Promise<void> => {
          for (const name of (await fs.readdir(dir)).sort()) {
            if (name.startsWith('.')) continue;
            const abs = join(dir, name);
            const rel = relDir ? `${relDir}/${name}` : name;
            const s = await fs.lstat(abs).catch(() => undefined);
            if (!s || s.isSymbolicLink()) continue;
            const shown = `${command.path.replace(/\/+$/, '')}/${rel}`;
            if (s.isDirectory()) {
              lines.push(`${formatSize(s.size)}\t${shown}/`);
              if (depth < 2) await walk(abs, rel, depth + 1);
            } else if (s.isFile()) lines.push(`${formatSize(s.size)}\t${shown}`);
          }
        };
        await walk(target.abs, '', 1);
        return (
          `Here're the files and directories up to 2 levels deep in ${command.path}, excluding hidden items:\n` +
          [`${formatSize(stat.size)}\t${command.path}`, ...lines].join('\n')
        );
      }
      const text = await readText(target, command.path);
      const lines = text.split('\n');
      let start = 1;
      let shown = lines;
      if (command.view_range?.length === 2) {
        const [from, to] = command.view_range as [number, number];
        start = Math.max(1, from);
        shown = lines.slice(start - 1, to === -1 ? lines.length : to);
      }
      return `Here's the content of ${command.path} with line numbers:\n${numbered(shown, start)}`;
    },

    async create(command: BetaMemoryTool20250818CreateCommand): Promise<string> {
      const target = await fileTarget(command.path, true);
      await write(target.rel, command.file_text, command.path);
      await changed({ kind: 'create', file: target.rel });
      return `File created successfully at: ${command.path}`;
    },

    async str_replace(command: BetaMemoryTool20250818StrReplaceCommand): Promise<string> {
      const target = await fileTarget(command.path, true);
      const text = await readText(target, command.path);
      if (command.old_str === '') refuse('NO_MATCH', 'old_str is empty; give the exact text to replace.');
      const count = text.split(command.old_str).length - 1;
      if (count === 0) {
        refuse(
          'NO_MATCH',
          `No replacement was performed: old_str did not appear verbatim in ${command.path}.`,
        );
      }
      if (count > 1) {
        refuse(
          'AMBIGUOUS_MATCH',
          `No replacement was performed: old_str appears ${count} times in ${command.path}.`,
        );
      }
      const next = text.replace(command.old_str, () => command.new_str);
      await write(target.rel, next, command.path);
      await changed({ kind: 'edit', file: target.rel });
      const line = text.slice(0, text.indexOf(command.old_str)).split('\n').length - 1;
      const nextLines = next.split('\n');
      const from = Math.max(0, line - 2);
      return `The memory file has been edited:\n${numbered(nextLines.slice(from, line + 3), from + 1)}`;
    },

    async insert(command: BetaMemoryTool20250818InsertCommand): Promise<string> {
      const target = await fileTarget(command.path, true);
      const text = await readText(target, command.path);
      const lines = text.split('\n');
      if (
        !Number.isInteger(command.insert_line) ||
        command.insert_line < 0 ||
        command.insert_line > lines.length
      ) {
        refuse('INVALID_LINE', `insert_line must be between 0 and ${lines.length} for ${command.path}.`);
      }
      lines.splice(command.insert_line, 0, ...command.insert_text.split('\n'));
      await write(target.rel, lines.join('\n'), command.path);
      await changed({ kind: 'edit', file: target.rel });
      return `The file ${command.path} has been edited.`;
    },

    async delete(command: BetaMemoryTool20250818DeleteCommand): Promise<string> {
      const target = parseToolPath(memoryDir, command.path);
      if (target.rel === '') refuse('NOT_A_FILE', `${MEMORY_ROOT} itself cannot be deleted.`);
      await confined(memoryDir, target);
      const stat = await fs.lstat(target.abs).catch(() => undefined);
      if (!stat) refuse('ENOENT', `The path ${command.path} does not exist.`);
      if (!stat.isFile()) {
        refuse(
          'NOT_A_FILE',
          `${command.path} is not a memory file; delete the memory files in it one by one.`,
        );
      }
      const rel = writableFile(target.rel, allowIndexEdits);
      if (isIndex(rel)) {
        refuse(
          'INDEX_NOT_EDITABLE',
          'MEMORY.md is the index; delete memories, and their pointers go with them.',
        );
      }
      await forgetMemory(memoryDir, rel);
      await changed({ kind: 'delete', file: rel });
      return `Successfully deleted ${command.path}`;
    },

    async rename(command: BetaMemoryTool20250818RenameCommand): Promise<string> {
      const from = await fileTarget(command.old_path, true);
      const to = await fileTarget(command.new_path, true);
      if (isIndex(from.rel) || isIndex(to.rel)) {
        refuse(
          'INDEX_NOT_EDITABLE',
          'MEMORY.md is the index; it is not renamed, and nothing is renamed onto it.',
        );
      }
      const text = await readText(from, command.old_path);
      if (
        await fs.lstat(to.abs).then(
          () => true,
          () => false,
        )
      ) {
        refuse('EEXIST', `${command.new_path} already exists; nothing was renamed.`);
      }
      await write(to.rel, text, command.new_path);
      await forgetMemory(memoryDir, from.rel);
      await changed({ kind: 'rename', file: to.rel, from: from.rel });
      return `Successfully renamed ${command.old_path} to ${command.new_path}`;
    },
  };
}
