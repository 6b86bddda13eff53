import { existsSync } from 'node:fs';
import {
  type ClaudeMdFile,
  loadClaudeMdFiles,
  renderClaudeMdFiles,
} from '@engram/agent-runtime/context/claude-md';
import type { SystemBlock } from '@engram/agent-runtime/model/types';
import { type IndexOverflow, loadMemoryIndex } from '@engram/memory-core/memdir/index-file';
import type { EngramPaths } from '@engram/memory-core/paths/memory-paths';
import { buildMemoryPrompt } from '@engram/memory-core/prompts/memory-prompt';
import {
  MEMORY_CONTEXT_PREAMBLE,
  type MemoryContextFile,
  renderMemoryFilesContext,
} from '@engram/memory-core/prompts/user-context';
import { buildBasePrompt } from './base-prompt.js';

// What the foreground sends ahead of the conversation: the system prompt (base + memory section) and the
// user context (CLAUDE.md files, MEMORY.md, today's date) — a session-start snapshot, rebuilt only after
// compaction or /clear, so the cached prefix that forks share stays byte-stable.

export interface SessionContext {
  system: SystemBlock[];
  userContext: string;
  /** Conditional (`paths`-scoped) rules, injected once a matching file is touched. */
  conditionalRules: ClaudeMdFile[];
  /** MEMORY.md caps that fired at load, if any (the user is told once per session). */
  indexOverflows: Array<{ path: string; overflow: IndexOverflow }>;
}

export interface BuildContextOptions {
  paths: EngramPaths;
  homeDir: string;
  managedClaudeMdPath: string;
  /** Served turns: the tenant's workspace root, the bound of CLAUDE.md discovery (LoadClaudeMdOptions). */
  workspaceRoot?: string | undefined;
  memoryEnabled: boolean;
  /**
   * The caller uses a saved system prompt and user context (a resumed session's snapshot): only the conditional
   * rules are read; `system` and `userContext` come back empty and no MEMORY.md is read.
   */
  rulesOnly?: boolean;
  now?: Date;
}

export function buildSystemPrompt(paths: EngramPaths, memoryEnabled: boolean): SystemBlock[] {
  const blocks: SystemBlock[] = [{ type: 'text', text: buildBasePrompt({ cwd: paths.cwd }) }];
  if (memoryEnabled) {
    const teamDir = existsSync(paths.teamDir) ? paths.teamDir : undefined;
    blocks.push({
      type: 'text',
      text: buildMemoryPrompt({ memoryDir: paths.memoryDir, ...(teamDir ? { teamDir } : {}) }),
    });
  }
  return blocks;
}

export async function buildSessionContext(opts: BuildContextOptions): Promise<SessionContext> {
  const { paths } = opts;
  const claudeMd = await loadClaudeMdFiles({
    cwd: paths.cwd,
    projectRoot: paths.projectRoot,
    homeDir: opts.homeDir,
    managedPath: opts.managedClaudeMdPath,
    ...(opts.workspaceRoot !== undefined ? { boundary: opts.workspaceRoot } : {}),
  });
  if (opts.rulesOnly) {
    return {
      system: [],
      userContext: '',
      conditionalRules: claudeMd.filter((f) => f.paths),
      indexOverflows: [],
    };
  }
  const memoryFiles: MemoryContextFile[] = [];
  const indexOverflows: SessionContext['indexOverflows'] = [];
  if (opts.memoryEnabled) {
    for (const [path, kind] of [
      [paths.memoryIndexPath, 'auto'],
      [paths.teamIndexPath, 'team'],
    ] as const) {
      const index = await loadMemoryIndex(path);
      if (!index.exists) continue;
      if (index.overflow) indexOverflows.push({ path, overflow: index.overflow });
      memoryFiles.push({ path, content: index.content, kind });
    }
  }
  const instructions = renderClaudeMdFiles(claudeMd);
  const memory = renderMemoryFilesContext(memoryFiles, { preamble: false });
  const sections: string[] = [];
  if (instructions || memory) {
    sections.push(
      `# claudeMd\n${MEMORY_CONTEXT_PREAMBLE}\n\n${[instructions, memory].filter(Boolean).join('\n\n')}`,
    );
  }
  const today = (opts.now ?? new Date()).toISOString().slice(0, 10);
  sections.push(`# currentDate\nToday's date is ${today}.`);
  return {
    system: buildSystemPrompt(paths, opts.memoryEnabled),
    userContext: sections.join('\n\n'),
    conditionalRules: claudeMd.filter((f) => f.paths),
    indexOverflows,
  };
}

/** One line for the user when MEMORY.md was cut at load (never silent). */
export function describeOverflow(path: string, overflow: IndexOverflow): string {
  const cap =
    overflow.cap === 'both'
      ? `${overflow.totalLines} lines and ${overflow.totalChars} characters`
      : overflow.cap === 'lines'
        ? `${overflow.totalLines} lines (limit 200)`
        : `${overflow.totalChars} characters (limit 25,000)`;
  const lost = overflow.entriesLost.length;
  return (
    `${path} is ${cap}; only the first part is loaded, so ${lost} memory ${lost === 1 ? 'entry was' : 'entries were'} ` +
    `cut from this session's context${lost ? ` (${overflow.entriesLost.slice(0, 5).join(', ')}${lost > 5 ? ', …' : ''})` : ''}. ` +
    'Run `engram dream --force` to consolidate, or shorten the index.'
  );
}
