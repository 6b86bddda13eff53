import { isAbsolute, relative, resolve, sep } from 'node:path';
import { ENTRYPOINT_NAME } from '../paths/memory-paths.js';

// Visible progress of a consolidation fork, inferred from its tool calls (the reference's DreamTask switches
// from `starting` to `updating` on the first Edit/Write; we name the four phases of the prompt). Phases only
// move forward:
//   orient      — from the start (listing and reading the memory directory);
//   gather      — the first search or read that touches the transcript directory or a `.jsonl` file;
//   consolidate — the first Edit/Write of a memory file other than an index;
//   prune       — the first Edit/Write of a MEMORY.md;
//   done        — set by the caller when the run and its checks are over.
// `filesTouched` counts Edit/Write targets inside the memory directory (hidden entries excluded), as requested (a denied or failed call
// still counts, as in the reference, which documents the list as approximate).

export const DREAM_PROGRESS_PHASES = ['orient', 'gather', 'consolidate', 'prune', 'done'] as const;
export type DreamProgressPhase = (typeof DREAM_PROGRESS_PHASES)[number];

export interface DreamProgressState {
  phase: DreamProgressPhase;
  /** Relative to the memory directory, forward slashes, in first-touched order. */
  filesTouched: string[];
  turns: number;
}

export interface ToolCallLike {
  name: string;
  input: Record<string, unknown>;
}

const READ_TOOLS = new Set(['Read', 'Grep', 'Glob', 'Bash']);
const WRITE_TOOLS = new Set(['Edit', 'Write']);

function later(a: DreamProgressPhase, b: DreamProgressPhase): DreamProgressPhase {
  return DREAM_PROGRESS_PHASES.indexOf(b) > DREAM_PROGRESS_PHASES.indexOf(a) ? b : a;
}

export function initialDreamProgress(): DreamProgressState {
  return { phase: 'orient', filesTouched: [], turns: 0 };
}

/**
 * Folds one model reply's tool calls into the progress state (pure; returns a new state). `turns` counts
 * replies. Paths are compared after resolving them against the memory directory (the fork's cwd).
 */
export function advanceDreamProgress(
  state: DreamProgressState,
  calls: readonly ToolCallLike[],
  dirs: { memoryDir: string; transcriptDir: string },
): DreamProgressState {
  let phase = state.phase;
  const filesTouched = [...state.filesTouched];
  for (const call of calls) {
    if (READ_TOOLS.has(call.name)) {
      // The memory directory often sits inside the transcript directory: mentions of it are not transcripts.
      const text = Object.values(call.input)
        .filter((v): v is string => typeof v === 'string')
        .join('\n')
        .split(dirs.memoryDir)
        .join('');
      if (text.includes(dirs.transcriptDir) || /\.jsonl\b/.test(text)) phase = later(phase, 'gather');
      continue;
    }
    if (!WRITE_TOOLS.has(call.name) || typeof call.input.file_path !== 'string') continue;
    const path = isAbsolute(call.input.file_path)
      ? resolve(call.input.file_path)
      : resolve(dirs.memoryDir, call.input.file_path);
    const rel = relative(resolve(dirs.memoryDir), path);
    if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) continue;
    const file = rel.split(sep).join('/');
    // Hidden entries (.history, .consolidate-lock) are not memory files; the policy denies them anyway.
    if (file.split('/').some((segment) => segment.startsWith('.'))) continue;
    if (!filesTouched.includes(file)) filesTouched.push(file);
    const isIndex = file === ENTRYPOINT_NAME || file.endsWith(`/${ENTRYPOINT_NAME}`);
    phase = later(phase, isIndex ? 'prune' : 'consolidate');
  }
  return { phase, filesTouched, turns: state.turns + 1 };
}
