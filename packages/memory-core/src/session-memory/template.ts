import { promises as fs } from 'node:fs';
import { EngramError } from '@engram/errors/engram-error';

// The structure of a session's rolling notes (`summary.md`, docs/design.md §5; docs/claude-code-memory.md §7.12): ten `# Header`
// sections, each followed by one italic line saying what belongs there. The fork edits only the text under
// those lines; the headers are how the guard recognises a summary that kept its shape.

export const DEFAULT_SESSION_MEMORY_TEMPLATE = `# Session Title
_A short, distinctive title for this session (5-10 words, dense with specifics)_

# Current State
_What is being worked on right now; tasks still pending; the immediate next steps_

# Task specification
_What the user asked for, in their terms; design decisions and constraints they set_

# Files and Functions
_The files and functions that matter here, and why each one matters_

# Workflow
_Commands that are run, in their usual order, and how to read their output_

# Errors & Corrections
_Errors met and how they were fixed; corrections from the user; approaches that failed and must not be retried_

# Codebase and System Documentation
_The main components and how they fit together_

# Learnings
_What worked, what did not, what to avoid; no repeats of other sections_

# Key results
_Exact outputs the user asked for (an answer, a table, a document), reproduced in full_

# Worklog
_A terse, step-by-step log of what was done_
`;

export type SessionMemoryConfigErrorCode =
  | 'SESSION_MEMORY_UNREADABLE_TEMPLATE'
  | 'SESSION_MEMORY_EMPTY_TEMPLATE'
  | 'SESSION_MEMORY_UNREADABLE_PROMPT';

/** A custom template or prompt file that exists but cannot be used: a configuration to fix, not to retry. */
export class SessionMemoryConfigError extends EngramError {
  declare readonly code: SessionMemoryConfigErrorCode;
  constructor(code: SessionMemoryConfigErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, { retryable: false, ...options });
  }
}

/**
 * The custom template at `customPath` when that file exists, else the default. A custom file that exists
 * but cannot be read, or is blank, is an error (a silent fallback would hide a broken configuration).
 */
export async function loadSessionMemoryTemplate(customPath?: string): Promise<string> {
  if (customPath === undefined) return DEFAULT_SESSION_MEMORY_TEMPLATE;
  let text: string;
  try {
    text = await fs.readFile(customPath, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return DEFAULT_SESSION_MEMORY_TEMPLATE;
    throw new SessionMemoryConfigError(
      'SESSION_MEMORY_UNREADABLE_TEMPLATE',
      `Cannot read the session-memory template ${customPath} (${(error as Error).message}); fix its permissions or remove it to use the default.`,
      { cause: error },
    );
  }
  if (text.trim().length === 0) {
    throw new SessionMemoryConfigError(
      'SESSION_MEMORY_EMPTY_TEMPLATE',
      `The session-memory template ${customPath} is empty; give it # Header sections or remove it to use the default.`,
    );
  }
  return text;
}

/** True when `content` is the untouched template: nothing has been summarised yet (docs/claude-code-memory.md §7.16). */
export function isTemplateOnly(content: string, template: string): boolean {
  return content.trim() === template.trim();
}

/** The `# Header` lines of a notes file, in order, trimmed (fenced code blocks are skipped). */
export function sectionHeaders(content: string): string[] {
  const headers: string[] = [];
  let fenced = false;
  for (const line of content.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (!fenced && /^# \S/.test(line)) headers.push(line.trimEnd());
  }
  return headers;
}

export interface NotesSection {
  /** The `# Header` line, or '' for text before the first header. */
  header: string;
  /** The section's lines after the header, joined with '\n'. */
  body: string;
}

/** Splits notes into sections at `# Header` lines (outside fenced code). */
export function splitSections(content: string): NotesSection[] {
  const sections: NotesSection[] = [];
  let header = '';
  let lines: string[] = [];
  let fenced = false;
  for (const line of content.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (!fenced && /^# \S/.test(line)) {
      if (header !== '' || lines.length > 0) sections.push({ header, body: lines.join('\n') });
      header = line.trimEnd();
      lines = [];
    } else {
      lines.push(line);
    }
  }
  if (header !== '' || lines.length > 0) sections.push({ header, body: lines.join('\n') });
  return sections;
}
