import { describe, expect, it } from 'vitest';
import {
  completeExchangeEnd,
  countModelVisibleMessagesSince,
  hasMemoryWritesSince,
  isMemoryPathSync,
  lastEntryUuid,
  memoryPathsWritten,
  type TranscriptLikeEntry,
} from './memory-writes.js';

const MEM = '/home/u/.engram/projects/-repo/memory';
const isMem = (p: string) => isMemoryPathSync(p, MEM);

const user = (uuid: string, text = 'hi'): TranscriptLikeEntry => ({
  uuid,
  type: 'user',
  message: { role: 'user', content: text },
});
const assistant = (
  uuid: string,
  ...tools: Array<[string, Record<string, unknown>]>
): TranscriptLikeEntry => ({
  uuid,
  type: 'assistant',
  message: {
    role: 'assistant',
    content: [
      { type: 'text', text: 'ok' },
      ...tools.map(([name, input], i) => ({ type: 'tool_use', id: `t${uuid}${i}`, name, input })),
    ],
  },
});
const system = (uuid: string): TranscriptLikeEntry => ({ uuid, type: 'system' });

const transcript: TranscriptLikeEntry[] = [
  user('u1'),
  assistant('a1', ['Write', { file_path: `${MEM}/early.md`, content: 'x' }]),
  system('s1'),
  user('u2'),
  assistant('a2', ['Read', { file_path: `${MEM}/x.md` }], ['Edit', { file_path: '/repo/src/app.ts' }]),
  user('u3'),
  assistant(
    'a3',
    ['Edit', { file_path: `${MEM}/feedback.md`, old_string: 'a', new_string: 'b' }],
    ['Write', { file_path: `${MEM}/MEMORY.md` }],
  ),
  { uuid: 'p1', type: 'progress' },
];

describe('hasMemoryWritesSince', () => {
  it('sees Edit/Write on memory paths after the cursor only', () => {
    expect(hasMemoryWritesSince(transcript, 'a2', isMem)).toBe(true);
    expect(hasMemoryWritesSince(transcript, 'a3', isMem)).toBe(false);
    expect(hasMemoryWritesSince(transcript.slice(0, 6), 'a1', isMem)).toBe(false);
  });

  it('scans from the start with no cursor, and treats a vanished cursor as "everything is new"', () => {
    expect(hasMemoryWritesSince(transcript.slice(0, 2), undefined, isMem)).toBe(true);
    expect(hasMemoryWritesSince(transcript.slice(0, 2), 'compacted-away', isMem)).toBe(true);
  });

  it('ignores reads, non-memory writes, user entries and malformed content', () => {
    const odd: TranscriptLikeEntry[] = [
      assistant('x1', ['Read', { file_path: `${MEM}/a.md` }], ['Write', { file_path: '/tmp/a.md' }]),
      { uuid: 'x2', type: 'assistant', message: { content: 'plain string' } },
      {
        uuid: 'x3',
        type: 'assistant',
        message: { content: [null, 7, { type: 'tool_use', name: 'Write', input: null }] },
      },
      {
        uuid: 'x4',
        type: 'user',
        message: { content: [{ type: 'tool_use', name: 'Write', input: { file_path: `${MEM}/u.md` } }] },
      },
      assistant(
        'x5',
        ['Write', { file_path: `${MEM}-evil/a.md` }],
        ['Write', { file_path: 'relative/a.md' }],
      ),
    ];
    expect(hasMemoryWritesSince(odd, undefined, isMem)).toBe(false);
  });
});

describe('countModelVisibleMessagesSince', () => {
  it('counts user and assistant entries after the cursor', () => {
    expect(countModelVisibleMessagesSince(transcript, undefined)).toBe(6);
    expect(countModelVisibleMessagesSince(transcript, 'a1')).toBe(4);
    expect(countModelVisibleMessagesSince(transcript, 'a3')).toBe(0);
    expect(countModelVisibleMessagesSince(transcript, 'gone')).toBe(6);
    expect(countModelVisibleMessagesSince([], undefined)).toBe(0);
  });
});

describe('memoryPathsWritten', () => {
  it('lists unique written paths in first-write order, without MEMORY.md', () => {
    const entries = [
      ...transcript,
      assistant(
        'a4',
        ['Write', { file_path: `${MEM}/early.md` }],
        ['Write', { file_path: `${MEM}/team/MEMORY.md` }],
      ),
    ];
    expect(memoryPathsWritten(entries)).toEqual([
      `${MEM}/early.md`,
      '/repo/src/app.ts',
      `${MEM}/feedback.md`,
    ]);
    expect(memoryPathsWritten(entries, isMem)).toEqual([`${MEM}/early.md`, `${MEM}/feedback.md`]);
  });
});

describe('lastEntryUuid', () => {
  it('is the newest entry’s uuid', () => {
    expect(lastEntryUuid(transcript)).toBe('p1');
    expect(lastEntryUuid([])).toBeUndefined();
  });
});

describe('completeExchangeEnd', () => {
  const toolResult = (uuid: string): TranscriptLikeEntry => ({
    uuid,
    type: 'user',
    message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'ok' }] },
  });

  it('keeps a chain whose last turn was answered, with what follows the reply', () => {
    const chain = [user('u1'), assistant('a1'), system('s1')];
    expect(completeExchangeEnd(chain)).toBe(3);
    expect(
      completeExchangeEnd([
        user('u1'),
        assistant('a1', ['Read', { file_path: '/x' }]),
        toolResult('r1'),
        assistant('a2'),
      ]),
    ).toBe(4);
  });

  it('cuts a trailing unanswered prompt, and a trailing turn stopped between tool calls', () => {
    expect(completeExchangeEnd([user('u1'), assistant('a1'), user('u2')])).toBe(2);
    const stopped = [
      user('u1'),
      assistant('a1'),
      user('u2'),
      assistant('a2', ['Read', { file_path: '/x' }]),
      toolResult('r2'),
    ];
    expect(completeExchangeEnd(stopped)).toBe(2);
    expect(completeExchangeEnd([user('u1')])).toBe(0);
  });

  it('does not take a compaction summary or a meta note for a prompt', () => {
    const summary = { ...user('c1', 'summary'), isCompactSummary: true } as TranscriptLikeEntry;
    const meta = { ...user('m1', 'caveat'), isMeta: true } as TranscriptLikeEntry;
    expect(completeExchangeEnd([user('u1'), assistant('a1'), summary, meta])).toBe(4);
    expect(completeExchangeEnd([])).toBe(0);
  });
});
