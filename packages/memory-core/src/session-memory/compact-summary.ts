import { MAX_SECTION_TOKENS } from './prompt.js';
import { splitSections } from './template.js';

// The summary as it goes into a compacted context (docs/claude-code-memory.md §7.20.8): each section is cut to
// 2,000 tokens × 4 = 8,000 characters at a line boundary, with a marker, so one runaway section cannot
// crowd out the conversation tail. The caller adds a pointer to the full file when anything was cut.

export const MAX_SECTION_CHARS_FOR_COMPACT = MAX_SECTION_TOKENS * 4;
export const SECTION_TRUNCATED_MARKER = '[... section truncated for length ...]';

export interface TruncatedSessionMemory {
  content: string;
  /** At least one section was cut. */
  truncated: boolean;
}

export function truncateSessionMemoryForCompact(
  content: string,
  maxSectionChars: number = MAX_SECTION_CHARS_FOR_COMPACT,
): TruncatedSessionMemory {
  let truncated = false;
  const out: string[] = [];
  for (const section of splitSections(content)) {
    const lines = section.body.split('\n');
    if (section.header === '' || section.body.length <= maxSectionChars) {
      if (section.header !== '') out.push(section.header);
      out.push(...lines);
      continue;
    }
    truncated = true;
    out.push(section.header);
    let used = 0;
    for (const line of lines) {
      if (used + line.length + 1 > maxSectionChars) break;
      out.push(line);
      used += line.length + 1;
    }
    out.push('', SECTION_TRUNCATED_MARKER, '');
  }
  return { content: out.join('\n'), truncated };
}
