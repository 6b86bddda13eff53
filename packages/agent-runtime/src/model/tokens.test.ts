import { describe, expect, it } from 'vitest';
import { estimateMessagesTokens, estimateTokens, tokenCountWithEstimation } from './tokens.js';

describe('token estimation', () => {
  it('estimates four characters per token, rounding up', () => {
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens('abcd')).toBe(1);
    expect(estimateTokens('abcde')).toBe(2);
  });

  it('counts text, tool calls, tool results and images', () => {
    const n = estimateMessagesTokens([
      { content: 'x'.repeat(40) },
      {
        content: [
          { type: 'tool_use', id: 't', name: 'Read', input: { file_path: '/a' } },
          { type: 'tool_result', tool_use_id: 't', content: 'y'.repeat(400) },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'zz' } },
        ],
      },
    ]);
    expect(n).toBe(10 + estimateTokens(`Read${JSON.stringify({ file_path: '/a' })}`) + 100 + 2_000);
  });

  it('uses the last reported usage and estimates only what came after it', () => {
    const entries = [
      { message: { role: 'user', content: 'x'.repeat(4_000) } },
      {
        message: {
          role: 'assistant',
          content: [{ type: 'text', text: 'ok' }],
          usage: {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_input_tokens: 1_000,
            cache_creation_input_tokens: 5,
          },
        },
      },
      { message: { role: 'user', content: 'y'.repeat(400) } },
    ];
    expect(tokenCountWithEstimation(entries)).toBe(1_125 + 100);
    expect(tokenCountWithEstimation(entries.slice(0, 1))).toBe(1_000);
    expect(
      tokenCountWithEstimation([{ message: { role: 'user', content: 'z'.repeat(8) } }], {
        inputTokens: 1,
        outputTokens: 1,
        cacheReadInputTokens: 1,
        cacheCreationInputTokens: 1,
      }),
    ).toBe(6);
  });
});
