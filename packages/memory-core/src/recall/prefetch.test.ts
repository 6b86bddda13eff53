import { describe, expect, it } from 'vitest';
import {
  collectReadMemoryPaths,
  collectRecentSuccessfulTools,
  collectSurfacedMemories,
  filterAgainstRead,
  isRelevantMemoriesEntry,
  type PrefetchEntry,
  prefetchSkipReason,
  RELEVANT_MEMORIES_MAX_SESSION_BYTES,
  relevantMemoriesAttachment,
  renderRecalledMemories,
  shouldPrefetch,
} from './prefetch.js';
import type { RecalledMemory } from './read-for-surfacing.js';

const MEM = '/home/dev/.engram/projects/-repo/memory';

// Transcript-shaped entries, as the agent runtime writes them.
const human = (text: string): PrefetchEntry => ({ type: 'user', message: { role: 'user', content: text } });
const humanBlocks = (text: string): PrefetchEntry => ({
  type: 'user',
  message: { role: 'user', content: [{ type: 'text', text }] },
});
let nextId = 0;
function call(name: string, input: Record<string, unknown> = {}): { entry: PrefetchEntry; id: string } {
  const id = `toolu_${++nextId}`;
  return {
    id,
    entry: {
      type: 'assistant',
      message: { role: 'assistant', content: [{ type: 'tool_use', id, name, input }] },
    },
  };
}
const results = (...rs: Array<{ id: string; error?: boolean }>): PrefetchEntry => ({
  type: 'user',
  message: {
    role: 'user',
    content: rs.map((r) => ({
      type: 'tool_result',
      tool_use_id: r.id,
      content: 'out',
      ...(r.error ? { is_error: true } : {}),
    })),
  },
});
const reply = (text: string): PrefetchEntry => ({
  type: 'assistant',
  message: { role: 'assistant', content: [{ type: 'text', text }] },
});
const boundary: PrefetchEntry = {
  type: 'system',
  subtype: 'compact_boundary',
  content: 'Conversation compacted',
};

function memory(
  path: string,
  content = `body of ${path}`,
  extra: Partial<RecalledMemory> = {},
): RecalledMemory {
  return {
    path,
    header: `Memory (saved today): ${MEM}/${path}:`,
    content,
    truncated: false,
    mtimeMs: 1,
    ...extra,
  };
}

/** An attachment entry exactly as the foreground writes it (createAttachmentEntry + the marking fields). */
function recallEntry(memories: RecalledMemory[]): PrefetchEntry {
  const a = relevantMemoriesAttachment(memories, MEM);
  return { type: 'attachment', isMeta: true, message: { role: 'user', content: a.content }, ...a.extra };
}

describe('renderRecalledMemories', () => {
  it('wraps each memory as "<header>\\n\\n<content>" in its own system-reminder, in one message', () => {
    const text = renderRecalledMemories([memory('a.md', 'alpha'), memory('team/b.md', 'beta')]);
    expect(text).toBe(
      `<system-reminder>\nMemory (saved today): ${MEM}/a.md:\n\nalpha\n</system-reminder>\n` +
        `<system-reminder>\nMemory (saved today): ${MEM}/team/b.md:\n\nbeta\n</system-reminder>`,
    );
  });

  it('marks the attachment with its kind and per-memory records whose bytes are the content sizes', () => {
    const a = relevantMemoriesAttachment(
      [memory('a.md', 'héllo'), memory('b.md', 'x', { truncated: true, limit: 200 })],
      MEM,
    );
    expect(a.extra).toEqual({
      attachmentKind: 'relevant_memories',
      memories: [
        { path: 'a.md', mtimeMs: 1, bytes: 6, truncated: false },
        { path: 'b.md', mtimeMs: 1, bytes: 1, truncated: true, limit: 200 },
      ],
      // Claude Code's own attachment object: absolute paths, content, mtime and the precomputed header.
      attachment: {
        type: 'relevant_memories',
        memories: [
          { path: `${MEM}/a.md`, content: 'héllo', mtimeMs: 1, header: `Memory (saved today): ${MEM}/a.md:` },
          { path: `${MEM}/b.md`, content: 'x', mtimeMs: 1, header: `Memory (saved today): ${MEM}/b.md:` },
        ],
      },
    });
    expect(a.content).toBe(renderRecalledMemories([memory('a.md', 'héllo'), memory('b.md', 'x')]));
  });
});

describe('collectSurfacedMemories', () => {
  it('sums the injected bytes and collects the paths of earlier recall attachments', () => {
    const entries = [
      human('first question here'),
      recallEntry([memory('a.md', 'x'.repeat(1000)), memory('team/b.md', 'y'.repeat(500))]),
      reply('ok'),
      human('second question here'),
      recallEntry([memory('c.md', 'z'.repeat(10))]),
      { type: 'attachment', isMeta: true, message: { role: 'user', content: 'some other attachment' } },
    ] satisfies PrefetchEntry[];
    expect(collectSurfacedMemories(entries)).toEqual({
      paths: new Set(['a.md', 'team/b.md', 'c.md']),
      bytes: 1510,
    });
  });

  it('resets at a compact boundary (compaction starts a new context)', () => {
    const entries = [
      recallEntry([memory('a.md')]),
      boundary,
      human('after compaction now'),
      recallEntry([memory('b.md', 'xy')]),
    ];
    expect(collectSurfacedMemories(entries)).toEqual({ paths: new Set(['b.md']), bytes: 2 });
    expect(collectSurfacedMemories([recallEntry([memory('a.md')]), boundary])).toEqual({
      paths: new Set(),
      bytes: 0,
    });
  });

  it('counts the whole message text when the per-memory bytes are missing', () => {
    const entry: PrefetchEntry = {
      type: 'attachment',
      message: { role: 'user', content: [{ type: 'text', text: 'abcdef' }] },
      attachmentKind: 'relevant_memories',
      memories: [{ path: 'a.md' }],
    };
    expect(collectSurfacedMemories([entry])).toEqual({ paths: new Set(['a.md']), bytes: 6 });
  });

  it('counts a relevant_memories attachment Claude Code wrote (no Engram records, absolute paths)', () => {
    // The shape Claude Code 2.1.328 keeps on resume: the attachment object, its rendered text, no message.
    const entry: PrefetchEntry = {
      type: 'attachment',
      attachment: {
        type: 'relevant_memories',
        memories: [
          { path: `${MEM}/feedback_pnpm.md`, content: 'Use pnpm', mtimeMs: 5, header: 'Memory: x' },
          { path: '/elsewhere/other.md', content: 'héllo', mtimeMs: 5, header: 'Memory: y' },
        ],
      },
      rendered: [{ content: '<system-reminder>…</system-reminder>' }],
      renderedRole: 'system',
    };
    expect(isRelevantMemoriesEntry(entry)).toBe(true);
    expect(collectSurfacedMemories([entry], MEM)).toEqual({
      paths: new Set(['feedback_pnpm.md']),
      bytes: 14,
    });
    expect(collectSurfacedMemories([entry])).toEqual({ paths: new Set(), bytes: 14 });
  });
});

describe('shouldPrefetch', () => {
  it('starts for a multi-word prompt under the 60 KiB budget, and says why not otherwise', () => {
    expect(RELEVANT_MEMORIES_MAX_SESSION_BYTES).toBe(61_440);
    expect(shouldPrefetch('why does the build fail', 0)).toBe(true);
    expect(shouldPrefetch('why does the build fail', RELEVANT_MEMORIES_MAX_SESSION_BYTES - 1)).toBe(true);
    expect(prefetchSkipReason('why does the build fail', RELEVANT_MEMORIES_MAX_SESSION_BYTES)).toBe(
      'over-budget',
    );
    expect(prefetchSkipReason('continue', 0)).toBe('single-word');
    expect(prefetchSkipReason('  continue\n', 0)).toBe('single-word');
    expect(prefetchSkipReason('   ', 0)).toBe('empty');
    expect(shouldPrefetch('', 0)).toBe(false);
  });
});

describe('collectRecentSuccessfulTools', () => {
  it('at turn start, lists the tools of the previous turn that all succeeded', () => {
    const bash = call('Bash', { command: 'ls' });
    const grep1 = call('Grep', { pattern: 'x' });
    const grep2 = call('Grep', { pattern: 'y' });
    const read = call('Read', { file_path: '/repo/a.ts' });
    const old = call('Glob', { pattern: '*' });
    const entries = [
      human('an older turn'),
      old.entry,
      results({ id: old.id }),
      reply('done'),
      human('the previous turn'),
      bash.entry,
      results({ id: bash.id }),
      grep1.entry,
      results({ id: grep1.id }),
      grep2.entry,
      results({ id: grep2.id, error: true }),
      read.entry,
      results({ id: read.id }),
      reply('done'),
      humanBlocks('the new prompt'),
    ];
    // Grep errored once: excluded. Glob belongs to an older turn.
    expect(collectRecentSuccessfulTools(entries)).toEqual(['Bash', 'Read']);
    // Same answer before the new prompt is appended.
    expect(collectRecentSuccessfulTools(entries.slice(0, -1))).toEqual(['Bash', 'Read']);
  });

  it('excludes a tool whose call has no result yet, and counts tool results as part of the turn', () => {
    const edit = call('Edit', { file_path: '/repo/a.ts' });
    const bash = call('Bash', { command: 'make' });
    const entries = [human('fix the build please'), bash.entry, results({ id: bash.id }), edit.entry];
    expect(collectRecentSuccessfulTools(entries)).toEqual(['Bash']);
  });

  it('ignores meta messages and compaction summaries when finding the previous human turn', () => {
    const bash = call('Bash');
    const entries: PrefetchEntry[] = [
      { type: 'user', isCompactSummary: true, message: { role: 'user', content: 'summary of earlier work' } },
      bash.entry,
      results({ id: bash.id }),
      { type: 'user', isMeta: true, message: { role: 'user', content: 'injected reminder' } },
      reply('done'),
      human('next question please'),
    ];
    expect(collectRecentSuccessfulTools(entries)).toEqual(['Bash']);
    expect(collectRecentSuccessfulTools([human('only a prompt here')])).toEqual([]);
  });
});

describe('collectReadMemoryPaths', () => {
  it('collects memory files read, written or edited in this context, relative to the memory directory', () => {
    const r1 = call('Read', { file_path: `${MEM}/feedback_pnpm.md` });
    const w1 = call('Write', { file_path: `${MEM}/team/deploy.md`, content: 'x' });
    const e1 = call('Edit', { file_path: `${MEM}/sub/../user_role.md`, old_string: 'a', new_string: 'b' });
    const failed = call('Read', { file_path: `${MEM}/missing.md` });
    const outside = call('Read', { file_path: '/repo/src/index.ts' });
    const sibling = call('Read', { file_path: `${MEM}-evil/x.md` });
    const escaping = call('Read', { file_path: `${MEM}/../secret.md` });
    const grep = call('Grep', { path: `${MEM}/grepped.md`, pattern: 'x' });
    const beforeCompaction = call('Read', { file_path: `${MEM}/old.md` });
    const entries = [
      beforeCompaction.entry,
      results({ id: beforeCompaction.id }),
      boundary,
      human('go on'),
      ...[r1, w1, e1, outside, sibling, escaping, grep].flatMap((c) => [c.entry, results({ id: c.id })]),
      failed.entry,
      results({ id: failed.id, error: true }),
    ];
    expect(collectReadMemoryPaths(entries, MEM)).toEqual(
      new Set(['feedback_pnpm.md', 'team/deploy.md', 'user_role.md']),
    );
    expect(collectReadMemoryPaths(entries, `${MEM}/`)).toEqual(collectReadMemoryPaths(entries, MEM));
    expect(collectReadMemoryPaths(entries, 'relative/memory')).toEqual(new Set());
  });
});

describe('filterAgainstRead', () => {
  it('drops memories read or surfaced since the job started, duplicates, and any beyond five', () => {
    const picks = ['a.md', 'b.md', 'team/c.md', 'a.md', 'd.md', 'e.md', 'f.md', 'g.md'].map((p) => memory(p));
    const kept = filterAgainstRead(picks, new Set(['b.md', './team/c.md']));
    expect(kept.map((m) => m.path)).toEqual(['a.md', 'd.md', 'e.md', 'f.md', 'g.md']);
    expect(filterAgainstRead(picks.slice(0, 2), [])).toEqual(picks.slice(0, 2));
  });
});
