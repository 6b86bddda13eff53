import { describe, expect, it } from 'vitest';
import {
  createAssistantEntry,
  createAttachmentEntry,
  createSystemEntry,
  createUserEntry,
  type EntryStamp,
  type TranscriptEntry,
} from './entry.js';
import {
  formatUserContextReminder,
  MISSING_TOOL_RESULT_TEXT,
  renderChainToApiMessages,
  TRUNCATED_START_TEXT,
} from './render.js';

const s = (parentUuid: string | null = null): EntryStamp => ({ sessionId: 's', cwd: '/repo', parentUuid });

describe('renderChainToApiMessages', () => {
  it('prepends the user context as a system-reminder merged into the first user message', () => {
    const messages = renderChainToApiMessages([createUserEntry(s(), 'hi')], {
      userContext: '# claudeMd\nBe brief.',
    });
    expect(messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: formatUserContextReminder('# claudeMd\nBe brief.') },
          { type: 'text', text: 'hi' },
        ],
      },
    ]);
    expect(formatUserContextReminder('X')).toMatch(
      /^<system-reminder>\n[\s\S]*X[\s\S]*<\/system-reminder>\n$/,
    );
  });

  it('drops system entries and merges consecutive same-role messages', () => {
    const chain: TranscriptEntry[] = [
      createUserEntry(s(), 'question'),
      createSystemEntry(s(), 'memory_saved', 'Saved 1 memory'),
      createAttachmentEntry(s(), 'Recalled memory: prefers pnpm'),
      createAssistantEntry(s(), { content: [{ type: 'text', text: 'part one' }] }),
      createAssistantEntry(s(), { content: [{ type: 'text', text: 'part two' }] }),
      { type: 'progress', uuid: 'p', parentUuid: null, data: {} },
      { type: 'summary', summary: 'title', leafUuid: 'x' },
    ];
    expect(renderChainToApiMessages(chain)).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'question' },
          { type: 'text', text: 'Recalled memory: prefers pnpm' },
        ],
      },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'part one' },
          { type: 'text', text: 'part two' },
        ],
      },
    ]);
  });

  it('puts tool results first in a merged user message and pairs every tool_use', () => {
    const chain = [
      createUserEntry(s(), 'read both'),
      createAssistantEntry(s(), {
        content: [
          { type: 'tool_use', id: 't1', name: 'Read', input: { file_path: '/a' } },
          { type: 'tool_use', id: 't2', name: 'Read', input: { file_path: '/b' } },
        ],
      }),
      createUserEntry(s(), [{ type: 'tool_result', tool_use_id: 't1', content: 'A' }]),
      createAttachmentEntry(s(), 'a reminder'),
      createUserEntry(s(), [
        { type: 'tool_result', tool_use_id: 'zz', content: 'orphan' },
        { type: 'tool_result', tool_use_id: 't1', content: 'duplicate' },
      ]),
    ];
    expect(renderChainToApiMessages(chain)[2]).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 't1', content: 'A' },
        { type: 'tool_result', tool_use_id: 't2', content: MISSING_TOOL_RESULT_TEXT, is_error: true },
        { type: 'text', text: 'a reminder' },
      ],
    });
  });

  it('closes a dangling tool_use at the end of the chain with a synthetic error result', () => {
    const chain = [
      createUserEntry(s(), 'go'),
      createAssistantEntry(s(), {
        content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'ls' } }],
      }),
    ];
    expect(renderChainToApiMessages(chain).at(-1)).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 't1', content: MISSING_TOOL_RESULT_TEXT, is_error: true },
      ],
    });
  });

  it('starts with a user message even when the chain starts with a reply', () => {
    const chain = [createAssistantEntry(s(), { content: [{ type: 'text', text: 'hello' }] })];
    expect(renderChainToApiMessages(chain)[0]).toEqual({
      role: 'user',
      content: [{ type: 'text', text: TRUNCATED_START_TEXT }],
    });
  });

  it('drops blank text blocks and stored cache_control markers', () => {
    const chain = [
      createUserEntry(s(), [
        { type: 'text', text: '  ' },
        { type: 'text', text: 'real', cache_control: { type: 'ephemeral' } },
      ]),
    ];
    expect(renderChainToApiMessages(chain)).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'real' }] },
    ]);
  });

  it('renders entries read back from JSON exactly like the in-memory originals', () => {
    const chain = [
      createUserEntry(s(), 'q'),
      createAssistantEntry(s(), {
        id: 'msg_1',
        content: [
          { type: 'thinking', thinking: 'hmm', signature: 'sig' },
          { type: 'tool_use', id: 't1', name: 'Grep', input: { pattern: 'x', '-i': true } },
        ],
        usage: { input_tokens: 1, output_tokens: 2 },
      }),
      createUserEntry(s(), [{ type: 'tool_result', tool_use_id: 't1', content: 'No files found' }]),
    ];
    const roundTripped = JSON.parse(JSON.stringify(chain)) as TranscriptEntry[];
    const a = renderChainToApiMessages(chain, { userContext: 'ctx' });
    const b = renderChainToApiMessages(roundTripped, { userContext: 'ctx' });
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
    // Rendering does not mutate its input.
    expect(JSON.stringify(chain)).toBe(JSON.stringify(roundTripped));
  });
});
