import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import {
  buildSessionMemoryUpdatePrompt,
  loadSessionMemoryPrompt,
  MAX_SECTION_TOKENS,
  MAX_TOTAL_SESSION_MEMORY_TOKENS,
  SESSION_MEMORY_PROMPT_OPENER,
  sectionSizeReminders,
  sectionSizes,
  substitutePromptVariables,
} from './prompt.js';
import { DEFAULT_SESSION_MEMORY_TEMPLATE } from './template.js';

const PATH = '/home/u/.engram/projects/-repo/s1/session-memory/summary.md';
const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** Notes whose `# Current State` section has `chars` characters of body. */
function notesWith(sectionChars: Record<string, number>): string {
  return DEFAULT_SESSION_MEMORY_TEMPLATE.split('\n')
    .flatMap((line) => {
      const chars = sectionChars[line];
      return chars === undefined ? [line] : [line, 'x'.repeat(chars)];
    })
    .join('\n');
}

describe('buildSessionMemoryUpdatePrompt', () => {
  const prompt = buildSessionMemoryUpdatePrompt({
    notesPath: PATH,
    currentNotes: DEFAULT_SESSION_MEMORY_TEMPLATE,
  });

  it('says it is not part of the conversation, embeds the notes in current_notes_content, and allows only Edit on the path', () => {
    expect(prompt.startsWith(SESSION_MEMORY_PROMPT_OPENER)).toBe(true);
    expect(prompt).toContain(
      `<current_notes_content>\n${DEFAULT_SESSION_MEMORY_TEMPLATE}\n</current_notes_content>`,
    );
    expect(prompt).toContain(`The notes file is ${PATH}.`);
    expect(prompt).toContain('Make all your edits in parallel in one message, then stop.');
    expect(prompt).toContain('italic _description_ line');
    expect(prompt).toContain('error messages verbatim');
    expect(prompt).toContain('about 2,000 tokens and the whole file under about 12,000');
    expect(prompt).toContain('Always update "Current State"');
    expect(prompt).not.toContain('CRITICAL');
  });

  it('is pinned by a snapshot', () => {
    expect(prompt).toMatchSnapshot();
  });

  it('lists sections over 2,000 tokens, largest first, with their sizes', () => {
    const notes = notesWith({ '# Worklog': 9_000, '# Current State': 12_000 });
    const reminders = sectionSizeReminders(notes);
    expect(reminders).not.toContain('CRITICAL');
    expect(reminders).toContain('MUST be condensed');
    const lines = reminders.split('\n').filter((l) => l.startsWith('- '));
    expect(lines).toEqual([
      expect.stringMatching(/^- "Current State" is about 3,0\d\d tokens \(budget 2,000\)$/),
      expect.stringMatching(/^- "Worklog" is about 2,2\d\d tokens \(budget 2,000\)$/),
    ]);
  });

  it('demands condensing, with Current State and Errors & Corrections kept, when the file is over 12,000 tokens', () => {
    const notes = notesWith({ '# Worklog': 30_000, '# Learnings': 20_000 });
    const full = buildSessionMemoryUpdatePrompt({ notesPath: PATH, currentNotes: notes });
    expect(full).toContain('CRITICAL: the notes file is now about 12,');
    expect(full).toContain('"Current State" and "Errors & Corrections"');
    expect(full.indexOf('"Worklog" is about')).toBeLessThan(full.indexOf('"Learnings" is about'));
    expect(sectionSizeReminders(notes)).toMatchSnapshot();
  });

  it('measures sections including their header, at 4 characters per token', () => {
    const sizes = sectionSizes('# A\n_a_\n# B\n');
    expect(sizes).toEqual([
      { header: '# A', tokens: 2 },
      { header: '# B', tokens: 1 },
    ]);
    expect(MAX_SECTION_TOKENS).toBe(2_000);
    expect(MAX_TOTAL_SESSION_MEMORY_TOKENS).toBe(12_000);
  });
});

describe('custom prompts', () => {
  it('substitutes {{currentNotes}} and {{notesPath}} in one pass, leaving $ patterns and nested placeholders verbatim', () => {
    const notes = 'cost is $& and $1; literal {{notesPath}} stays';
    const out = substitutePromptVariables('Notes at {{notesPath}}:\n{{currentNotes}}\n{{other}}', {
      currentNotes: notes,
      notesPath: '/p/$$.md',
    });
    expect(out).toBe(`Notes at /p/$$.md:\n${notes}\n{{other}}`);
  });

  it('uses a custom prompt file when present, still followed by the size reminders', async () => {
    const { dir, cleanup } = makeTempDir();
    cleanups.push(cleanup);
    const file = join(dir, 'prompt.md');
    expect(await loadSessionMemoryPrompt(file)).toBeUndefined();
    writeFileSync(file, 'Update {{notesPath}} from:\n{{currentNotes}}');
    const custom = await loadSessionMemoryPrompt(file);
    const notes = notesWith({ '# Worklog': 9_000 });
    const out = buildSessionMemoryUpdatePrompt({
      notesPath: PATH,
      currentNotes: notes,
      customPrompt: custom,
    });
    expect(out.startsWith(`Update ${PATH} from:\n${notes}`)).toBe(true);
    expect(out).toContain('"Worklog" is about');
    expect(out).not.toContain(SESSION_MEMORY_PROMPT_OPENER);
  });
});
