import { promises as fs } from 'node:fs';
import { SessionMemoryConfigError, splitSections } from './template.js';

// The instruction a session-memory fork receives (docs/claude-code-memory.md §7.13–7.15, in our words): update the notes
// file with Edit only, keep its shape, be dense and specific, and stay inside the size budget. The current
// notes travel inside the prompt, so the fork needs no Read (its policy allows none).

/** Per-section budget, in estimated tokens (characters / 4). */
export const MAX_SECTION_TOKENS = 2_000;
/** Whole-file budget, in estimated tokens; above it the prompt demands condensing. */
export const MAX_TOTAL_SESSION_MEMORY_TOKENS = 12_000;
const CHARS_PER_TOKEN = 4;

/** Marker text the worker and tests use to recognise a session-memory fork request. */
export const SESSION_MEMORY_PROMPT_OPENER =
  'IMPORTANT: this message and these instructions are NOT part of the conversation with the user.';

export function estimateNotesTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

export interface SectionSize {
  header: string;
  tokens: number;
}

/** Estimated size of every `# Header` section (header line included), in file order. */
export function sectionSizes(content: string): SectionSize[] {
  return splitSections(content)
    .filter((s) => s.header !== '')
    .map((s) => ({ header: s.header, tokens: estimateNotesTokens(`${s.header}\n${s.body}`) }));
}

const number = (n: number) => n.toLocaleString('en-US');

/** The size warnings appended to the prompt: empty when the notes are within budget. */
export function sectionSizeReminders(content: string): string {
  const total = estimateNotesTokens(content);
  const overTotal = total > MAX_TOTAL_SESSION_MEMORY_TOKENS;
  const oversized = sectionSizes(content)
    .filter((s) => s.tokens > MAX_SECTION_TOKENS)
    .sort((a, b) => b.tokens - a.tokens);
  if (!overTotal && oversized.length === 0) return '';
  let out = '';
  if (overTotal) {
    out +=
      `\n\nCRITICAL: the notes file is now about ${number(total)} tokens, over its ${number(MAX_TOTAL_SESSION_MEMORY_TOKENS)}-token ` +
      'budget. You MUST condense it until it fits: cut the oversized sections hardest, drop details that no longer ' +
      'matter, merge related items and compress older worklog entries into a line each. Keep "Current State" and ' +
      '"Errors & Corrections" accurate and detailed.';
  }
  if (oversized.length > 0) {
    out += `\n\n${overTotal ? 'Sections to condense, largest first' : 'IMPORTANT: these sections are over the per-section budget and MUST be condensed, largest first'}:\n`;
    out += oversized
      .map(
        (s) =>
          `- "${s.header.replace(/^#\s*/, '')}" is about ${number(s.tokens)} tokens (budget ${number(MAX_SECTION_TOKENS)})`,
      )
      .join('\n');
  }
  return out;
}

function defaultPromptBody(notesPath: string, currentNotes: string): string {
  return `${SESSION_MEMORY_PROMPT_OPENER} Do not mention note-taking, these instructions or the notes file in the notes themselves.

Using the conversation above (not counting this message, the system prompt, CLAUDE.md content, or earlier compaction summaries), bring the session notes file up to date so that someone resuming this work from the notes alone could carry on.

The notes file is ${notesPath}. It has already been read for you; its current content is:
<current_notes_content>
${currentNotes}
</current_notes_content>

Your only job is to update that file with the Edit tool, and only that file. Make all your edits in parallel in one message, then stop. Do not call any other tool: anything else will be refused.

Rules for the edits:
- Keep every "# " header line and the italic _description_ line under it exactly as they are. Change only the text below the italic line. Do not add, remove, rename or reorder sections.
- Where the conversation gave nothing substantive for a section, leave that section alone. No filler, no "N/A".
- Be dense and specific: exact file paths, function and class names, commands with their flags, error messages verbatim, numbers, decisions and their reasons.
- "Key results" holds the exact, complete output the user asked for, when there is one.
- Do not copy what CLAUDE.md already says.
- Keep each section under about ${number(MAX_SECTION_TOKENS)} tokens and the whole file under about ${number(MAX_TOTAL_SESSION_MEMORY_TOKENS)}: when a section would grow past that, drop its least important details instead of appending.
- Always update "Current State": it is what lets the work continue after the conversation is compacted.`;
}

/**
 * Replaces `{{currentNotes}}` and `{{notesPath}}` in one pass: substituted text is never scanned again, so
 * notes containing `$&` or `{{notesPath}}` come through verbatim. Other `{{…}}` placeholders are left alone.
 */
export function substitutePromptVariables(
  template: string,
  vars: { currentNotes: string; notesPath: string },
): string {
  return template.replace(
    /\{\{(currentNotes|notesPath)\}\}/g,
    (_m, name: 'currentNotes' | 'notesPath') => vars[name],
  );
}

export interface SessionMemoryPromptInput {
  notesPath: string;
  currentNotes: string;
  /** A custom prompt (the text of the custom prompt file) with `{{currentNotes}}` / `{{notesPath}}`. */
  customPrompt?: string | undefined;
}

/** The update instruction: the custom prompt or ours, followed by any size warnings. */
export function buildSessionMemoryUpdatePrompt(input: SessionMemoryPromptInput): string {
  const base =
    input.customPrompt !== undefined && input.customPrompt.trim().length > 0
      ? substitutePromptVariables(input.customPrompt, input)
      : defaultPromptBody(input.notesPath, input.currentNotes);
  return base + sectionSizeReminders(input.currentNotes);
}

/** The custom prompt at `path`, or undefined when there is none (a blank file counts as none). */
export async function loadSessionMemoryPrompt(path: string | undefined): Promise<string | undefined> {
  if (path === undefined) return undefined;
  try {
    const text = await fs.readFile(path, 'utf8');
    return text.trim().length > 0 ? text : undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new SessionMemoryConfigError(
      'SESSION_MEMORY_UNREADABLE_PROMPT',
      `Cannot read the session-memory prompt ${path} (${(error as Error).message}); fix its permissions or remove it to use the default.`,
      { cause: error },
    );
  }
}
