import { describe, expect, it } from 'vitest';
import {
  buildSelectionUserMessage,
  MAX_SELECTED_MEMORIES,
  MEMORY_SELECTION_SYSTEM_PROMPT,
  SELECTION_OUTPUT_JSON_SCHEMA,
  selectionOutputSchema,
} from './selection-prompt.js';

describe('selection prompt', () => {
  it('tells the selector to pick up to five clearly useful files, only when certain, an empty list being fine', () => {
    expect(MAX_SELECTED_MEMORIES).toBe(5);
    expect(MEMORY_SELECTION_SYSTEM_PROMPT).toContain('at most 5');
    expect(MEMORY_SELECTION_SYSTEM_PROMPT).toContain('clearly');
    expect(MEMORY_SELECTION_SYSTEM_PROMPT).toContain('only when you are certain');
    expect(MEMORY_SELECTION_SYSTEM_PROMPT).toContain('empty list is fine');
  });

  it('carries the recent-tools rule: skip usage docs for those tools, still pick warnings and gotchas', () => {
    expect(MEMORY_SELECTION_SYSTEM_PROMPT).toMatch(
      /recently used tools[\s\S]*do not\s+pick memories that are usage notes or API reference/,
    );
    expect(MEMORY_SELECTION_SYSTEM_PROMPT).toMatch(
      /Do still pick memories that hold warnings,\s+gotchas or known issues/,
    );
  });

  it('builds the user message: query, blank line, manifest, then the recent tools only when there are some', () => {
    const manifest = '- [feedback] a.md (2026-01-01T00:00:00.000Z): alpha\n- b.md (2026-01-02T00:00:00.000Z)';
    expect(buildSelectionUserMessage({ query: 'why is it slow', manifest })).toBe(
      `Query: why is it slow\n\nAvailable memories:\n${manifest}`,
    );
    expect(buildSelectionUserMessage({ query: 'why is it slow', manifest, recentTools: [] })).toBe(
      `Query: why is it slow\n\nAvailable memories:\n${manifest}`,
    );
    expect(buildSelectionUserMessage({ query: 'q', manifest, recentTools: ['Bash', 'Grep'] })).toBe(
      `Query: q\n\nAvailable memories:\n${manifest}\n\nRecently used tools: Bash, Grep`,
    );
  });

  it('has a JSON schema and a zod twin that agree', () => {
    expect(SELECTION_OUTPUT_JSON_SCHEMA).toEqual({
      type: 'object',
      properties: { selected_memories: { type: 'array', items: { type: 'string' } } },
      required: ['selected_memories'],
      additionalProperties: false,
    });
    expect(selectionOutputSchema.safeParse({ selected_memories: ['a.md'] }).success).toBe(true);
    expect(selectionOutputSchema.safeParse({ selected_memories: [] }).success).toBe(true);
    expect(selectionOutputSchema.safeParse({}).success).toBe(false);
    expect(selectionOutputSchema.safeParse({ selected_memories: [1] }).success).toBe(false);
    expect(selectionOutputSchema.safeParse({ selected_memories: [], more: true }).success).toBe(false);
    const fromZod = selectionOutputSchema.toJSONSchema() as Record<string, unknown>;
    expect(fromZod).toMatchObject(SELECTION_OUTPUT_JSON_SCHEMA);
  });
});
