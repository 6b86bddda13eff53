import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildChain } from './chain.js';
import {
  createAttachmentEntry,
  createUserEntry,
  ENGRAM_TRANSCRIPT_VERSION,
  type TranscriptEntry,
  toolUseRecordFor,
} from './entry.js';
import { MISSING_TOOL_RESULT_TEXT, renderChainToApiMessages } from './render.js';
import { listSubagentTranscripts, TranscriptStore } from './store.js';

// Fixtures written from the shapes Claude Code 2.1.x stores (docs/claude-code-format.md, "Transcripts"): every
// message entry carries the stamped session fields; one assistant reply is one entry per content block; each
// tool_result hangs off its own tool_use; metadata lines sit between and after the messages.

const SESSION = '5d2b3c4e-1f2a-4b5c-9d8e-7f6a5b4c3d2e';
let clock = Date.parse('2026-11-30T10:00:00.000Z');
function stamped(uuid: string, parentUuid: string | null, extra: Record<string, unknown>) {
  clock += 1000;
  return {
    parentUuid,
    isSidechain: false,
    userType: 'external',
    cwd: '/Users/dev/repo',
    sessionId: SESSION,
    version: '2.1.7',
    gitBranch: 'main',
    uuid,
    timestamp: new Date(clock).toISOString(),
    ...extra,
  };
}
const user = (uuid: string, parent: string | null, content: unknown, extra: Record<string, unknown> = {}) =>
  stamped(uuid, parent, { type: 'user', message: { role: 'user', content }, ...extra });
const fragment = (uuid: string, parent: string, block: unknown, id = 'msg_01Parallel') =>
  stamped(uuid, parent, {
    type: 'assistant',
    requestId: 'req_011',
    message: {
      id,
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-5',
      content: [block],
      stop_reason: null,
      usage: { input_tokens: 10, output_tokens: 5 },
    },
  });
const result = (uuid: string, parent: string, toolUseId: string, text: string, filePath: string) =>
  user(uuid, parent, [{ type: 'tool_result', tool_use_id: toolUseId, content: text }], {
    toolUseResult: {
      type: 'text',
      file: { filePath, content: text, numLines: 1, startLine: 1, totalLines: 1 },
    },
    sourceToolAssistantUUID: parent,
  });

function jsonl(lines: object[]): TranscriptEntry[] {
  const text = lines.map((l) => JSON.stringify(l)).join('\n');
  return text.split('\n').map((line) => JSON.parse(line) as TranscriptEntry);
}

/** text → tool_use #1 → tool_use #2; result #1 off tool_use #1, result #2 off tool_use #2, chain goes on from #2. */
function parallelToolCalls(): object[] {
  return [
    {
      type: 'file-history-snapshot',
      messageId: 'u1',
      snapshot: { trackedFileBackups: {} },
      isSnapshotUpdate: false,
    },
    user('u1', null, 'Read a.ts and b.ts', { promptId: 'p1', permissionMode: 'default', entrypoint: 'cli' }),
    fragment('a1', 'u1', { type: 'text', text: 'Reading both.' }),
    fragment('a2', 'a1', {
      type: 'tool_use',
      id: 'toolu_A',
      name: 'Read',
      input: { file_path: '/Users/dev/repo/a.ts' },
    }),
    fragment('a3', 'a2', {
      type: 'tool_use',
      id: 'toolu_B',
      name: 'Read',
      input: { file_path: '/Users/dev/repo/b.ts' },
    }),
    stamped('p1', 'a3', { type: 'progress', data: { type: 'hook_progress' }, toolUseID: 'toolu_B' }),
    result('r1', 'a2', 'toolu_A', 'export const a = 1;', '/Users/dev/repo/a.ts'),
    result('r2', 'a3', 'toolu_B', 'export const b = 2;', '/Users/dev/repo/b.ts'),
    fragment('a4', 'r2', { type: 'text', text: 'a is 1, b is 2.' }, 'msg_02Answer'),
    stamped('d1', 'a4', { type: 'system', subtype: 'turn_duration', durationMs: 4200, isMeta: false }),
    { type: 'last-prompt', lastPrompt: 'Read a.ts and b.ts', sessionId: SESSION },
    {
      type: 'queue-operation',
      operation: 'dequeue',
      timestamp: new Date(clock).toISOString(),
      sessionId: SESSION,
    },
  ];
}

describe('Claude Code transcripts as Claude Code reads them', () => {
  it('re-splices a reply split per content block and its parallel tool results: no result is reported missing', () => {
    const entries = jsonl(parallelToolCalls());
    const chain = buildChain(entries);
    expect(chain.leaf?.uuid).toBe('d1');
    expect(chain.recovered).toBe(1);
    // The progress entry hangs off tool_use #2 like a result; it is not part of the conversation.
    expect(chain.entries.map((e) => e.uuid)).toEqual(['u1', 'a1', 'a2', 'a3', 'r1', 'r2', 'a4', 'd1']);
    const messages = renderChainToApiMessages(chain.live);
    expect(messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Read a.ts and b.ts' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Reading both.' },
          { type: 'tool_use', id: 'toolu_A', name: 'Read', input: { file_path: '/Users/dev/repo/a.ts' } },
          { type: 'tool_use', id: 'toolu_B', name: 'Read', input: { file_path: '/Users/dev/repo/b.ts' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_A', content: 'export const a = 1;' },
          { type: 'tool_result', tool_use_id: 'toolu_B', content: 'export const b = 2;' },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'a is 1, b is 2.' }] },
    ]);
    expect(JSON.stringify(messages)).not.toContain(MISSING_TOOL_RESULT_TEXT);
  });

  it('re-splices when the results were written in the other order and the leaf is result #1', () => {
    const lines = parallelToolCalls().slice(0, 5);
    lines.push(result('r2', 'a3', 'toolu_B', 'b', '/b'), result('r1', 'a2', 'toolu_A', 'a', '/a'));
    const chain = buildChain(jsonl(lines));
    expect(chain.leaf?.uuid).toBe('r1');
    expect(chain.entries.map((e) => e.uuid)).toEqual(['u1', 'a1', 'a2', 'a3', 'r2', 'r1']);
    const rendered = renderChainToApiMessages(chain.live);
    const reply = rendered.at(-2)?.content;
    expect(Array.isArray(reply) ? reply.map((b) => b.type) : reply).toEqual(['text', 'tool_use', 'tool_use']);
    expect(JSON.stringify(rendered)).not.toContain(MISSING_TOOL_RESULT_TEXT);
  });

  it("reads Claude Code's per-entry toolUseResult (Read keeps the path in file.filePath) and Engram's older map", () => {
    const entries = jsonl(parallelToolCalls());
    const r1 = entries.find((e) => e.uuid === 'r1')!;
    expect(toolUseRecordFor(r1, 'toolu_A')?.filePath).toBe('/Users/dev/repo/a.ts');
    expect(toolUseRecordFor(r1, 'toolu_B')).toBeUndefined();
    const legacy: TranscriptEntry = {
      type: 'user',
      message: {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'x' },
          { type: 'tool_result', tool_use_id: 't2', content: 'y' },
        ],
      },
      toolUseResults: { t2: { filePath: '/y', mtimeMs: 5 } },
    };
    expect(toolUseRecordFor(legacy, 't2')).toEqual({ filePath: '/y', mtimeMs: 5 });
    expect(toolUseRecordFor(legacy, 't1')).toBeUndefined();
  });

  it('a compaction summary with isCompactSummary and isVisibleInTranscriptOnly is the context after the boundary', () => {
    const lines = [
      { type: 'summary', summary: 'Fix the build', leafUuid: 'x' },
      stamped('b1', null, {
        type: 'system',
        subtype: 'compact_boundary',
        content: 'Conversation compacted',
        isMeta: false,
        level: 'info',
        logicalParentUuid: 'pruned-entry-not-in-this-file',
        compactMetadata: { trigger: 'auto', preTokens: 167_000, postTokens: 9000, durationMs: 31_000 },
      }),
      user(
        's1',
        'b1',
        'This session is being continued from a previous conversation. Summary: the build is fixed.',
        {
          isCompactSummary: true,
          isVisibleInTranscriptOnly: true,
        },
      ),
      user('d1', 's1', 'display-only note', { isVisibleInTranscriptOnly: true }),
      user('u2', 'd1', 'What next?'),
      fragment('a5', 'u2', { type: 'text', text: 'Ship it.' }, 'msg_03'),
      stamped('t1', 'a5', { type: 'system', subtype: 'turn_duration', durationMs: 900 }),
    ];
    const chain = buildChain(jsonl(lines));
    expect(chain.boundary?.uuid).toBe('b1');
    expect(chain.missingParent).toBeUndefined();
    expect(chain.missingLogicalParent).toBe('pruned-entry-not-in-this-file');
    expect(chain.live.map((e) => e.uuid)).toEqual(['s1', 'd1', 'u2', 'a5', 't1']);
    const messages = renderChainToApiMessages(chain.live);
    expect(messages[0]).toEqual({
      role: 'user',
      content: [
        {
          type: 'text',
          text: 'This session is being continued from a previous conversation. Summary: the build is fixed.',
        },
        { type: 'text', text: 'What next?' },
      ],
    });
    expect(JSON.stringify(messages)).not.toContain('display-only note');
  });

  it('reads a subagents/ transcript (every entry a sidechain) and keeps sidechains out of the main chain', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'engram-cc-shapes-'));
    const main = parallelToolCalls();
    const side = (uuid: string, parent: string | null, extra: Record<string, unknown>) => ({
      ...stamped(uuid, parent, extra),
      isSidechain: true,
      agentId: 'a1b2c3',
    });
    const sidechain = [
      side('s-u1', null, { type: 'user', message: { role: 'user', content: 'Search for TODOs' } }),
      side('s-a1', 's-u1', {
        type: 'assistant',
        message: { id: 'msg_side', role: 'assistant', content: [{ type: 'text', text: 'Found 3.' }] },
      }),
    ];
    // A sidechain entry that landed in the main file (older releases) must not become the leaf.
    writeFileSync(
      join(dir, `${SESSION}.jsonl`),
      `${[...main, ...sidechain].map((l) => JSON.stringify(l)).join('\n')}\n`,
    );
    mkdirSync(join(dir, SESSION, 'subagents', 'tasks'), { recursive: true });
    writeFileSync(
      join(dir, SESSION, 'subagents', 'agent-a1b2c3.jsonl'),
      `${sidechain.map((l) => JSON.stringify(l)).join('\n')}\n`,
    );
    writeFileSync(
      join(dir, SESSION, 'subagents', 'tasks', 'agent-d4.jsonl'),
      `${JSON.stringify(sidechain[0])}\n`,
    );

    const { entries } = await new TranscriptStore(join(dir, `${SESSION}.jsonl`)).readAll();
    expect(buildChain(entries).leaf?.uuid).toBe('d1');

    const subagents = await listSubagentTranscripts(join(dir, SESSION));
    expect(subagents.map((s) => s.agentId)).toEqual(['a1b2c3', 'd4']);
    const sub = await new TranscriptStore(subagents[0]!.path).readAll();
    expect(buildChain(sub.entries).entries).toEqual([]);
    const subChain = buildChain(sub.entries, undefined, { sidechain: true });
    expect(subChain.entries.map((e) => e.uuid)).toEqual(['s-u1', 's-a1']);
    expect(renderChainToApiMessages(subChain.live).at(-1)).toEqual({
      role: 'assistant',
      content: [{ type: 'text', text: 'Found 3.' }],
    });
  });

  it('Engram writes the fields Claude Code stamps, and an attachment object Claude Code keeps on resume', () => {
    const at = () => new Date('2026-11-30T12:00:00.000Z');
    const base = { sessionId: SESSION, cwd: '/Users/dev/repo', gitBranch: 'main', now: at };
    const u = createUserEntry({ ...base, parentUuid: null }, 'hello');
    const a = createAttachmentEntry({ ...base, parentUuid: u.uuid }, 'Recalled: use pnpm', {
      attachmentKind: 'relevant_memories',
    });
    for (const entry of [u, a]) {
      expect(entry).toMatchObject({
        isSidechain: false,
        userType: 'external',
        entrypoint: 'engram',
        version: ENGRAM_TRANSCRIPT_VERSION,
        gitBranch: 'main',
        sessionId: SESSION,
        cwd: '/Users/dev/repo',
        timestamp: '2026-11-30T12:00:00.000Z',
      });
    }
    expect(a.attachment).toEqual({
      type: 'engram_context',
      kind: 'relevant_memories',
      content: 'Recalled: use pnpm',
    });
    // Engram still renders its own attachment from `message`.
    expect(renderChainToApiMessages([u, a])).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'hello' },
          { type: 'text', text: 'Recalled: use pnpm' },
        ],
      },
    ]);
  });

  // Claude Code 2.1.328 keeps recalled memories and the background-memory notice as attachments of its own
  // types (docs/claude-code-format.md, "Attachments"); an attachment type it does not know is not replayed.
  const MEM = '/Users/dev/.claude/projects/-Users-dev-repo/memory';
  const recalledText = `<system-reminder>\nMemory (saved today): ${MEM}/feedback_pnpm.md:\n\nUse pnpm, never npm.\n</system-reminder>`;
  const relevantMemories = {
    type: 'relevant_memories',
    memories: [
      {
        path: `${MEM}/feedback_pnpm.md`,
        content: 'Use pnpm, never npm.',
        mtimeMs: 1764590000000,
        header: `Memory (saved today): ${MEM}/feedback_pnpm.md:`,
      },
    ],
  };
  const memoryUpdate = {
    type: 'memory_update',
    source: 'extract',
    summary: 'saved 1 memory',
    paths: [`${MEM}/feedback_pnpm.md`],
    inContextPaths: [],
  };

  it("writes recalled memories and the memory notice in Claude Code's attachment shapes, rendered as before", () => {
    const at = () => new Date('2026-11-30T12:00:00.000Z');
    const base = { sessionId: SESSION, cwd: '/Users/dev/repo', gitBranch: 'main', now: at };
    const u = createUserEntry({ ...base, parentUuid: null }, 'which package manager?');
    const recall = createAttachmentEntry({ ...base, parentUuid: u.uuid }, recalledText, {
      attachmentKind: 'relevant_memories',
      attachment: relevantMemories,
    });
    const notice = createAttachmentEntry(
      { ...base, parentUuid: recall.uuid },
      '<system-reminder>saved</system-reminder>',
      {
        attachmentKind: 'memory_notice',
        attachment: memoryUpdate,
      },
    );
    expect(recall).toMatchObject({
      type: 'attachment',
      attachment: relevantMemories,
      rendered: [{ content: recalledText }],
      renderedRole: 'system',
    });
    expect(notice).toMatchObject({
      type: 'attachment',
      attachment: memoryUpdate,
      rendered: [{ content: '<system-reminder>saved</system-reminder>' }],
      renderedRole: 'system',
    });
    // The model sees the same text as from Engram's own attachment (the request bytes do not change).
    expect(renderChainToApiMessages([u, recall, notice])).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'which package manager?' },
          { type: 'text', text: recalledText },
          { type: 'text', text: '<system-reminder>saved</system-reminder>' },
        ],
      },
    ]);
    // An object of a type that is not one of Claude Code's falls back to Engram's own attachment.
    const other = createAttachmentEntry({ ...base, parentUuid: u.uuid }, 'x', {
      attachment: { type: 'mystery' },
    });
    expect(other.attachment).toEqual({ type: 'engram_context', content: 'x' });
  });

  it("round-trips Claude Code's attachments through the transcript writer and reader, and renders the ones Claude Code wrote", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'engram-cc-attach-'));
    const path = join(dir, `${SESSION}.jsonl`);
    const at = () => new Date('2026-11-30T12:00:00.000Z');
    const base = { sessionId: SESSION, cwd: '/Users/dev/repo', gitBranch: 'main', now: at };
    const u = createUserEntry({ ...base, parentUuid: null }, 'which package manager?');
    const recall = createAttachmentEntry({ ...base, parentUuid: u.uuid }, recalledText, {
      attachmentKind: 'relevant_memories',
      attachment: relevantMemories,
    });
    // An entry exactly as Claude Code writes it: the attachment, its rendered text and role, no message.
    const ccNotice = stamped('cc-notice', recall.uuid as string, {
      type: 'attachment',
      attachment: memoryUpdate,
      rendered: [{ content: '<system-reminder>Saved 1 memory: feedback_pnpm.md</system-reminder>' }],
      renderedRole: 'system',
    });
    const store = new TranscriptStore(path);
    await store.append([u, recall]);
    writeFileSync(path, `${JSON.stringify(ccNotice)}\n`, { flag: 'a' });
    const { entries, invalid } = await new TranscriptStore(path).readAll();
    expect(invalid).toEqual([]);
    const read = entries.find((e) => e.uuid === recall.uuid);
    expect(read).toMatchObject({
      attachment: relevantMemories,
      rendered: [{ content: recalledText }],
      renderedRole: 'system',
    });
    const chain = buildChain(entries);
    expect(chain.live.map((e) => e.uuid)).toEqual([u.uuid, recall.uuid, 'cc-notice']);
    expect(renderChainToApiMessages(chain.live)).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'which package manager?' },
          { type: 'text', text: recalledText },
          { type: 'text', text: '<system-reminder>Saved 1 memory: feedback_pnpm.md</system-reminder>' },
        ],
      },
    ]);
  });
});
