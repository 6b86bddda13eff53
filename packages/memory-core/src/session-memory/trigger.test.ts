import { describe, expect, it } from 'vitest';
import {
  countToolCallsSince,
  lastAssistantHasToolCalls,
  resolveSessionMemoryThresholds,
  SESSION_MEMORY_INIT_TOKENS,
  SESSION_MEMORY_MIN_GROWTH_TOKENS,
  SESSION_MEMORY_TOOL_CALLS,
  shouldUpdateSessionMemory,
  type TriggerEntry,
} from './trigger.js';

const base = {
  initialized: true,
  contextTokens: 20_000,
  tokensAtLastUpdate: 15_000,
  toolCallsSinceLastUpdate: 3,
  lastReplyHadToolCalls: true,
};

describe('shouldUpdateSessionMemory', () => {
  it('uses the reference thresholds', () => {
    expect([SESSION_MEMORY_INIT_TOKENS, SESSION_MEMORY_MIN_GROWTH_TOKENS, SESSION_MEMORY_TOOL_CALLS]).toEqual(
      [10_000, 5_000, 3],
    );
  });

  it('does nothing before the session reaches 10,000 tokens, and initialises at exactly 10,000', () => {
    const first = { ...base, initialized: false, tokensAtLastUpdate: 0, lastReplyHadToolCalls: false };
    expect(shouldUpdateSessionMemory({ ...first, contextTokens: 9_999 })).toEqual({
      update: false,
      initialize: false,
    });
    expect(shouldUpdateSessionMemory({ ...first, contextTokens: 10_000 })).toEqual({
      update: true,
      initialize: true,
    });
  });

  it('initialises without updating when the initialising reply is mid tool loop with fewer than 3 calls', () => {
    expect(
      shouldUpdateSessionMemory({
        initialized: false,
        contextTokens: 12_000,
        toolCallsSinceLastUpdate: 2,
        lastReplyHadToolCalls: true,
      }),
    ).toEqual({ update: false, initialize: true });
  });

  it('requires 5,000 tokens of growth since the last update: 4,999 is not enough, 5,000 is', () => {
    expect(shouldUpdateSessionMemory({ ...base, contextTokens: 19_999 }).update).toBe(false);
    expect(shouldUpdateSessionMemory({ ...base, contextTokens: 20_000 }).update).toBe(true);
  });

  it('requires 3 tool calls since the last update while the agent is still calling tools: 2 is not enough', () => {
    expect(shouldUpdateSessionMemory({ ...base, toolCallsSinceLastUpdate: 2 }).update).toBe(false);
    expect(shouldUpdateSessionMemory({ ...base, toolCallsSinceLastUpdate: 3 }).update).toBe(true);
  });

  it('takes a natural break (a reply without tool calls) in place of the tool-call count', () => {
    expect(
      shouldUpdateSessionMemory({ ...base, toolCallsSinceLastUpdate: 0, lastReplyHadToolCalls: false })
        .update,
    ).toBe(true);
  });

  it('never updates without enough growth, even at a natural break with many tool calls', () => {
    expect(
      shouldUpdateSessionMemory({
        ...base,
        contextTokens: 19_999,
        toolCallsSinceLastUpdate: 50,
        lastReplyHadToolCalls: false,
      }).update,
    ).toBe(false);
  });

  it('honours configured thresholds, ignoring non-positive overrides', () => {
    const thresholds = { initTokens: 100, minGrowthTokens: 50, toolCalls: 0 };
    expect(resolveSessionMemoryThresholds(thresholds)).toEqual({
      initTokens: 100,
      minGrowthTokens: 50,
      toolCalls: 3,
    });
    expect(
      shouldUpdateSessionMemory({
        initialized: false,
        contextTokens: 100,
        toolCallsSinceLastUpdate: 0,
        lastReplyHadToolCalls: false,
        thresholds,
      }),
    ).toEqual({ update: true, initialize: true });
  });
});

const assistant = (uuid: string, tools: number): TriggerEntry => ({
  type: 'assistant',
  uuid,
  message: {
    content: [
      { type: 'text', text: 'x' },
      ...Array.from({ length: tools }, (_, i) => ({
        type: 'tool_use',
        id: `${uuid}-${i}`,
        name: 'Read',
        input: {},
      })),
    ],
  },
});
const user = (uuid: string): TriggerEntry => ({ type: 'user', uuid, message: { content: 'hi' } });

describe('countToolCallsSince', () => {
  const entries = [
    user('u1'),
    assistant('a1', 2),
    user('u2'),
    assistant('a2', 1),
    user('u3'),
    assistant('a3', 0),
  ];

  it('counts tool_use blocks in assistant entries after the cursor only', () => {
    expect(countToolCallsSince(entries, undefined)).toBe(3);
    expect(countToolCallsSince(entries, 'a1')).toBe(1);
    expect(countToolCallsSince(entries, 'a3')).toBe(0);
  });

  it('counts nothing when the cursor is not among the entries (the reference behaviour)', () => {
    expect(countToolCallsSince(entries, 'gone')).toBe(0);
  });

  it('tells whether the newest assistant reply asked for tools', () => {
    expect(lastAssistantHasToolCalls(entries)).toBe(false);
    expect(lastAssistantHasToolCalls(entries.slice(0, 4))).toBe(true);
    expect(lastAssistantHasToolCalls(entries.slice(0, 5))).toBe(true);
    expect(lastAssistantHasToolCalls([user('u')])).toBe(false);
  });
});
