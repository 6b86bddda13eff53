import { describe, expect, it } from 'vitest';
import { buildExtractionPrompt } from './extraction-prompt.js';
import { buildMemoryPrompt } from './memory-prompt.js';
import { MEMORY_CONTEXT_PREAMBLE, renderMemoryFilesContext } from './user-context.js';

const MEM = '/home/u/.engram/projects/-repo/memory';
const TEAM = `${MEM}/team`;

const headings = (text: string) => text.split('\n').filter((line) => /^#{1,2} /.test(line));

describe('buildMemoryPrompt', () => {
  const individual = buildMemoryPrompt({ memoryDir: MEM });

  it('has the reference sections in order', () => {
    expect(headings(individual)).toEqual([
      '# auto memory',
      '## Types of memory',
      '## What NOT to save in memory',
      '## How to save memories',
      '## When to access memories',
      '## Before recommending from memory',
      '## Memory and other forms of persistence',
    ]);
  });

  it('describes the four types, with Why/How-to-apply structure for feedback and project only', () => {
    for (const type of ['user', 'feedback', 'project', 'reference'])
      expect(individual).toContain(`<name>${type}</name>`);
    expect(individual.match(/<body_structure>/g)).toHaveLength(2);
    expect(individual).not.toContain('<scope>');
    expect(individual).toContain('**Why:**');
    expect(individual).toContain('**How to apply:**');
  });

  it('carries the rules that matter: directory, two-step save, exclusions even when asked, ignore rule, verification', () => {
    expect(individual).toContain(`persistent, file-based memory at \`${MEM}\``);
    expect(individual).toContain('do not run mkdir');
    expect(individual).toContain('**Step 1**');
    expect(individual).toContain('**Step 2**');
    expect(individual).toContain('- [Title](file.md) — one-line hook');
    // The current Claude Code form: slug name, quoted description, nested metadata.type, [[slug]] links.
    expect(individual).toContain('name: {{short-kebab-case-slug');
    expect(individual).toContain('description: "{{one specific line');
    expect(individual).toContain('metadata:\n  type: {{user | feedback | project | reference}}');
    expect(individual).not.toMatch(/^type: /m);
    expect(individual).toContain('Link related memories with `[[slug]]`');
    expect(individual).toContain('lines after 200 are cut off');
    expect(individual).toContain('These exclusions hold even when the user explicitly asks');
    expect(individual).toContain('proceed as if MEMORY.md were empty');
    expect(individual).toContain('"the memory says X exists" is not "X exists now"');
    expect(individual).toContain('use a plan, not memory');
    expect(individual).toContain('If the user explicitly asks you to remember something, save it right away');
  });

  it('is pinned by a snapshot', () => {
    expect(individual).toMatchSnapshot();
  });

  it('describes private and team memory together when a team directory is given', () => {
    const combined = buildMemoryPrompt({ memoryDir: MEM, teamDir: TEAM });
    expect(headings(combined).slice(0, 3)).toEqual(['# Memory', '## Memory scope', '## Types of memory']);
    expect(combined).toContain(`team memory at \`${TEAM}\``);
    expect(combined.match(/<scope>/g)).toHaveLength(4);
    expect(combined).toContain('<scope>always private</scope>');
    expect(combined).toContain('never API keys, passwords, tokens or other credentials');
    expect(combined).toMatchSnapshot();
  });

  it('drops the index step in skip-index mode and appends extra guidelines', () => {
    const skip = buildMemoryPrompt({
      memoryDir: MEM,
      skipIndex: true,
      extraGuidelines: '  Prefer short memories.  ',
    });
    expect(skip).not.toContain('**Step 2**');
    expect(skip).not.toContain('lines after 200');
    expect(skip.endsWith('\n\nPrefer short memories.')).toBe(true);
  });
});

describe('renderMemoryFilesContext', () => {
  it('renders auto memory and fences team memory as shared', () => {
    const text = renderMemoryFilesContext([
      { path: `${MEM}/MEMORY.md`, content: '- [Role](user_role.md) — Go engineer\n', kind: 'auto' },
      { path: `${TEAM}/MEMORY.md`, content: '- [Deploy](deploy.md) — runbook', kind: 'team' },
      { path: '/empty/MEMORY.md', content: '  \n', kind: 'auto' },
    ]);
    expect(text).toMatchInlineSnapshot(`
      "The files below contain instructions and memory saved by the user and for this codebase. Follow them: they take precedence over your default behaviour, and you must apply them exactly as written.

      Contents of /home/u/.engram/projects/-repo/memory/MEMORY.md (user's auto-memory, persists across conversations):

      - [Role](user_role.md) — Go engineer

      Contents of /home/u/.engram/projects/-repo/memory/team/MEMORY.md (shared team memory, synced across the organization):

      <team-memory-content source="shared">
      - [Deploy](deploy.md) — runbook
      </team-memory-content>"
    `);
  });

  it('returns nothing for no content and can leave out the preamble', () => {
    expect(renderMemoryFilesContext([])).toBe('');
    const bare = renderMemoryFilesContext([{ path: '/m/MEMORY.md', content: 'x', kind: 'auto' }], {
      preamble: false,
    });
    expect(bare).toBe("Contents of /m/MEMORY.md (user's auto-memory, persists across conversations):\n\nx");
    expect(bare).not.toContain(MEMORY_CONTEXT_PREAMBLE);
  });
});

describe('buildExtractionPrompt', () => {
  const manifest = '- [user] user_role.md (2026-01-10T12:00:00.000Z): Senior Go engineer';

  it('plans the turns, limits the tools, and injects the manifest', () => {
    const text = buildExtractionPrompt({ newMessageCount: 7, manifest, memoryDir: MEM });
    expect(
      text.startsWith('You are now the memory extraction subagent. Read the most recent ~7 messages'),
    ).toBe(true);
    expect(text).toContain(`Edit/Write for files inside the memory directory \`${MEM}\` only`);
    expect(text).toContain('`rm` is not allowed');
    expect(text).toContain('You have at most 5 turns');
    expect(text).toContain('in your first turn, Read every file you might change, all in parallel');
    expect(text).toContain('Use ONLY what the last ~7 messages say');
    expect(text).toContain(`## Existing memory files\n\n${manifest}\n\nCheck this list before writing`);
    expect(headings(text)).toEqual([
      '## Existing memory files',
      '## Types of memory',
      '## What NOT to save in memory',
      '## How to save memories',
    ]);
    expect(text).toMatchSnapshot();
  });

  it('says when there are no memories yet, and covers team memory in combined mode', () => {
    const text = buildExtractionPrompt({
      newMessageCount: 0,
      manifest: '  ',
      memoryDir: MEM,
      teamDir: TEAM,
      maxTurns: 3,
    });
    expect(text).toContain('## Existing memory files\n\n(none yet)');
    expect(text).toContain('~1 messages');
    expect(text).toContain(`or the team memory directory \`${TEAM}\``);
    expect(text).toContain('You have at most 3 turns');
    expect(text).toContain('<scope>');
    expect(text).toContain('never API keys');
  });
});
