import { describe, expect, it } from 'vitest';
import { buildConsolidationPrompt, CONSOLIDATION_PROMPT_TITLE } from './consolidation-prompt.js';

const MEM = '/home/u/.engram/projects/-repo/memory';
const TX = '/home/u/.engram/projects/-repo';

describe('buildConsolidationPrompt', () => {
  const prompt = buildConsolidationPrompt({
    memoryDir: MEM,
    transcriptDir: TX,
    sessionIds: ['s-newest', 's-older'],
    lastConsolidatedAt: Date.parse('2026-11-28T09:30:00Z'),
  });

  it('is pinned by a snapshot', () => {
    expect(prompt).toMatchSnapshot();
  });

  it('walks the four phases in order and names the caps, the read-only Bash rule and the sessions', () => {
    const headings = prompt.split('\n').filter((l) => /^#{1,2} /.test(l));
    expect(headings).toEqual([
      CONSOLIDATION_PROMPT_TITLE,
      '## Phase 1 — Orient',
      '## Phase 2 — Gather recent signal',
      '## Phase 3 — Consolidate',
      '## Phase 4 — Prune and re-index',
      '## Tools and guardrails',
      '## Sessions since the last consolidation (2)',
    ]);
    expect(prompt).toContain(`Memory directory: \`${MEM}\``);
    expect(prompt).toContain('Last consolidation: 2026-11-28T09:30:00.000Z.');
    expect(prompt).toContain('200 lines and 25,000 characters');
    expect(prompt).toContain('~150 characters');
    expect(prompt).toContain('absolute dates');
    expect(prompt).toContain('Bash only for read-only commands');
    expect(prompt).toContain('merged_from');
    expect(prompt).toContain('- s-newest\n- s-older');
    expect(prompt).toContain(`\`${TX}/<session id>.jsonl\``);
  });

  it('says "never" without a previous run, bounds the session list and includes a manifest when given', () => {
    const ids = Array.from({ length: 130 }, (_, i) => `s${i}`);
    const p = buildConsolidationPrompt({
      memoryDir: MEM,
      transcriptDir: TX,
      sessionIds: ids,
      manifest: '- [feedback] a.md (2026-11-01T00:00:00.000Z): A',
      maxDeletedShare: 0.3,
    });
    expect(p).toContain('Last consolidation: never.');
    expect(p).toContain('- s99\n- … and 30 more (older)');
    expect(p).not.toContain('- s100\n');
    expect(p).toContain('## Memory files now\n\n- [feedback] a.md');
    expect(p).toContain('more than 30% of the memories');
    const none = buildConsolidationPrompt({ memoryDir: MEM, transcriptDir: TX, sessionIds: [] });
    expect(none).toContain('(none recorded');
  });
});
