import { promises as fs } from 'node:fs';
import { dirname, join } from 'node:path';
import { createExclusive, writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { truncateSessionMemoryForCompact } from './compact-summary.js';
import { isTemplateOnly } from './template.js';

// The notes file on disk: `<transcriptDir>/<sessionId>/session-memory/summary.md` (docs/design.md §3), created from
// the template exactly once (exclusive create, 0600, in a 0700 directory), and read for compaction.

/** Where a custom template and prompt live: `$ENGRAM_HOME/session-memory/config/{template,prompt}.md`. */
export function sessionMemoryConfigPaths(engramHome: string): { templatePath: string; promptPath: string } {
  const dir = join(engramHome, 'session-memory', 'config');
  return { templatePath: join(dir, 'template.md'), promptPath: join(dir, 'prompt.md') };
}

export const SESSION_MEMORY_FILE_MODE = 0o600;
export const SESSION_MEMORY_DIR_MODE = 0o700;

/**
 * Creates the notes file with `template` unless it already exists; returns true when this call created it.
 * Two workers racing here both see one complete file: the loser reuses the winner's.
 */
export async function ensureSessionMemoryFile(summaryPath: string, template: string): Promise<boolean> {
  await fs.mkdir(dirname(summaryPath), { recursive: true, mode: SESSION_MEMORY_DIR_MODE });
  return createExclusive(summaryPath, template, {
    mode: SESSION_MEMORY_FILE_MODE,
    dirMode: SESSION_MEMORY_DIR_MODE,
  });
}

/** The notes, or undefined when the file does not exist. */
export async function readSessionMemoryFile(summaryPath: string): Promise<string | undefined> {
  try {
    return await fs.readFile(summaryPath, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Puts `content` back atomically (used to undo a rejected update). */
export async function restoreSessionMemoryFile(summaryPath: string, content: string): Promise<void> {
  await writeFileAtomic(summaryPath, content, {
    mode: SESSION_MEMORY_FILE_MODE,
    dirMode: SESSION_MEMORY_DIR_MODE,
  });
}

export interface SessionMemoryForCompact {
  /** The notes with over-long sections cut (see `truncateSessionMemoryForCompact`). */
  content: string;
  truncated: boolean;
  summaryPath: string;
}

/**
 * The notes ready for a compaction summary, or undefined when there is nothing usable: no file yet, or
 * still the bare template (docs/claude-code-memory.md §7.20.2).
 */
export async function readSessionMemoryForCompact(
  summaryPath: string,
  template: string,
): Promise<SessionMemoryForCompact | undefined> {
  const raw = await readSessionMemoryFile(summaryPath);
  if (raw === undefined || raw.trim().length === 0 || isTemplateOnly(raw, template)) return undefined;
  const { content, truncated } = truncateSessionMemoryForCompact(raw);
  return { content, truncated, summaryPath };
}
