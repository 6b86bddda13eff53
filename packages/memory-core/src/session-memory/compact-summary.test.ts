import { describe, expect, it } from 'vitest';
import {
  MAX_SECTION_CHARS_FOR_COMPACT,
  SECTION_TRUNCATED_MARKER,
  truncateSessionMemoryForCompact,
} from './compact-summary.js';
import { DEFAULT_SESSION_MEMORY_TEMPLATE } from './template.js';

describe('truncateSessionMemoryForCompact', () => {
  it('leaves notes within 8,000 characters per section unchanged', () => {
    const notes = `${DEFAULT_SESSION_MEMORY_TEMPLATE}\n${'y'.repeat(7_000)}\n`;
    expect(MAX_SECTION_CHARS_FOR_COMPACT).toBe(8_000);
    expect(truncateSessionMemoryForCompact(notes)).toEqual({ content: notes, truncated: false });
    expect(truncateSessionMemoryForCompact(DEFAULT_SESSION_MEMORY_TEMPLATE).content).toBe(
      DEFAULT_SESSION_MEMORY_TEMPLATE,
    );
  });

  it('cuts a long section at a line boundary within 8,000 characters, marks it, and keeps the other sections whole', () => {
    const lines = Array.from({ length: 200 }, (_, i) => `- step ${i} ${'z'.repeat(60)}`);
    const notes = `# A\n_a_\n${lines.join('\n')}\n# B\n_b_\nkept\n`;
    const { content, truncated } = truncateSessionMemoryForCompact(notes);
    expect(truncated).toBe(true);
    const [a, b] = content.split('# B\n');
    expect(b).toBe('_b_\nkept\n');
    expect(a).toContain(SECTION_TRUNCATED_MARKER);
    const kept = a!.split('\n').filter((l) => l.startsWith('- step '));
    expect(kept.length).toBeGreaterThan(100);
    expect(kept.length).toBeLessThan(200);
    // Whole lines only: every kept line is one of the originals.
    for (const line of kept) expect(lines).toContain(line);
    expect(kept.join('\n').length).toBeLessThanOrEqual(MAX_SECTION_CHARS_FOR_COMPACT);
  });
});
