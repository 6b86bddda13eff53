import { access, mkdir, readFile, utimes, writeFile } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { comparePrefix } from '@engram/testkit/prefix';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { describe, expect, it } from 'vitest';
import { clientFor, localForkBoundary, useModelTestbed } from '../fixtures.test-helpers.js';
import { runQueryLoop } from '../loop/query-loop.js';
import type { SystemBlock } from '../model/types.js';
import { ATTENDED } from '../sandbox/boundary.js';
import { MODIFIED_SINCE_READ_MESSAGE, NOT_READ_MESSAGE } from '../tools/file-state.js';
import { defaultTools, toolDefinitions } from '../tools/registry.js';
import { allowAll, type CanUseTool } from '../tools/tool.js';
import { appendCompactBoundary, buildChain } from '../transcript/chain.js';
import { createAssistantEntry, createUserEntry } from '../transcript/entry.js';
import { TranscriptStore } from '../transcript/store.js';
import { cacheSafeParamsPathFor, loadCacheSafeParams, saveCacheSafeParams } from './cache-safe-params.js';
import { runForkedAgent, seedReadFileState } from './run-forked-agent.js';

const bed = useModelTestbed();

const MODEL = 'claude-sonnet-5-5';
const system: SystemBlock[] = [
  { type: 'text', text: 'You are Engram, a coding agent.' },
  { type: 'text', text: `Environment: ${'details '.repeat(200)}` },
];
const userContext = '# claudeMd\nUse pnpm. Never commit to main.';
const INSTRUCTION = 'You are now the memory extraction subagent. Save what is worth remembering.';

/** Only Read/Grep/Glob, and Edit/Write inside <dir>/memory — the shape of memory-core's policy. */
function memoryPolicy(memoryDir: string): CanUseTool {
  return async (tool, input) => {
    if (['Read', 'Grep', 'Glob'].includes(tool.name)) return { behavior: 'allow' };
    if (
      (tool.name === 'Edit' || tool.name === 'Write') &&
      String(input.file_path).startsWith(memoryDir + sep)
    ) {
      return { behavior: 'allow' };
    }
    return {
      behavior: 'deny',
      message: `${tool.name} is not allowed here; only files in the memory directory may change.`,
    };
  };
}

/** The foreground's side: run a turn, append every entry to the transcript, save the cache-safe params. */
async function runParentTurn(prompt: string) {
  const transcriptPath = join(bed.dir, 'projects', '-repo', 's1.jsonl');
  const store = new TranscriptStore(transcriptPath);
  const first = createUserEntry(
    { sessionId: 's1', cwd: bed.dir, parentUuid: (await store.leaf())?.uuid ?? null },
    prompt,
  );
  await store.append([first]);
  const { entries } = await store.readAll();
  const tools = defaultTools();
  const result = await runQueryLoop({
    client: bed.client,
    model: MODEL,
    system,
    tools,
    maxTokens: 8_192,
    messages: buildChain(entries).live,
    userContext,
    canUseTool: allowAll,
    cwd: bed.dir,
    sessionId: 's1',
    boundary: ATTENDED,
    onMessage: async (e) => void (await store.append([e])),
    onRequest: (request) =>
      saveCacheSafeParams(cacheSafeParamsPathFor(transcriptPath), {
        model: request.model,
        system: request.system,
        tools: request.tools,
        userContext,
        maxTokens: request.maxTokens,
      }),
  });
  return { transcriptPath, store, result, leafUuid: result.newMessages.at(-1)!.uuid };
}

describe('runForkedAgent', () => {
  it("repeats the parent's last request as its prefix and reads it from the prompt cache", async () => {
    const memoryDir = join(bed.dir, 'memory');
    const notes = join(memoryDir, 'user_prefs.md');
    await mkdir(memoryDir, { recursive: true });
    await writeFile(notes, '---\nname: prefs\n---\nUses npm.\n');
    bed.server.script(
      reply(text('Let me check your notes.'), toolUse('Read', { file_path: notes }, 'toolu_parent_read')),
      textReply('Noted: you switched from npm to pnpm.'),
    );
    const parent = await runParentTurn('I use pnpm now, not npm.');
    const linesBefore = (await readFile(parent.transcriptPath, 'utf8')).split('\n').length;

    bed.server.script(
      reply(
        toolUse(
          'Edit',
          { file_path: notes, old_string: 'Uses npm.', new_string: 'Uses pnpm.' },
          'toolu_fork_edit',
        ),
        toolUse('Write', { file_path: join(bed.dir, 'src', 'evil.ts'), content: 'x' }, 'toolu_fork_write'),
      ),
      textReply('Saved 1 memory.'),
    );
    const params = await loadCacheSafeParams(cacheSafeParamsPathFor(parent.transcriptPath));
    const fork = await runForkedAgent({
      client: clientFor(bed.server, 1),
      params,
      transcriptPath: parent.transcriptPath,
      leafUuid: parent.leafUuid,
      instruction: INSTRUCTION,
      canUseTool: memoryPolicy(memoryDir),
      maxTurns: 5,
      cwd: bed.dir,
      boundary: localForkBoundary(bed.dir),
    });

    const [, parentLast, forkFirst] = bed.server.messageRequests();
    const cmp = comparePrefix(parentLast!.body, forkFirst!.body);
    expect(cmp).toMatchObject({ sameModel: true, sameSystem: true, sameTools: true, aIsPrefixOfB: true });
    expect(cmp.commonMessages).toBe(parentLast!.body.messages.length);
    expect(forkFirst!.body.max_tokens).toBe(parentLast!.body.max_tokens);
    expect(forkFirst!.body.messages).toHaveLength(parentLast!.body.messages.length + 2);
    expect(forkFirst!.body.messages.at(-1)).toEqual({
      role: 'user',
      content: [{ type: 'text', text: INSTRUCTION, cache_control: { type: 'ephemeral' } }],
    });
    const parentUsage = parentLast!.response!.usage!;
    const parentCachedPrefix = parentUsage.cache_read_input_tokens + parentUsage.cache_creation_input_tokens;
    expect(parentCachedPrefix).toBeGreaterThan(0);
    expect(forkFirst!.response!.usage!.cache_read_input_tokens).toBeGreaterThanOrEqual(parentCachedPrefix);

    // The inherited Read lets the Edit through; the Write outside memory is denied and never happens.
    expect(await readFile(notes, 'utf8')).toBe('---\nname: prefs\n---\nUses pnpm.\n');
    await expect(access(join(bed.dir, 'src', 'evil.ts'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(fork).toMatchObject({ endReason: 'completed', turns: 2, writtenPaths: [notes] });
    expect(fork.deniedCalls).toEqual([
      {
        tool: 'Write',
        toolUseId: 'toolu_fork_write',
        message: 'Write is not allowed here; only files in the memory directory may change.',
      },
    ]);
    const denial = (
      bed.server.messageRequests()[3]!.body.messages.at(-1)!.content as Array<Record<string, unknown>>
    )[1];
    expect(denial).toMatchObject({
      tool_use_id: 'toolu_fork_write',
      is_error: true,
      content: fork.deniedCalls[0]!.message,
    });
    expect(fork.usage.cacheReadInputTokens).toBeGreaterThanOrEqual(parentCachedPrefix);
    // The fork never writes to the parent's transcript.
    expect((await readFile(parent.transcriptPath, 'utf8')).split('\n')).toHaveLength(linesBefore);
  });

  it('forks from an earlier leaf with only that part of the conversation', async () => {
    bed.server.script(textReply('first answer'));
    const first = await runParentTurn('first question');
    bed.server.script(textReply('second answer'));
    await runParentTurn('second question');
    bed.server.script(textReply('nothing to save'));
    await runForkedAgent({
      client: bed.client,
      params: await loadCacheSafeParams(cacheSafeParamsPathFor(first.transcriptPath)),
      transcriptPath: first.transcriptPath,
      leafUuid: first.leafUuid,
      instruction: INSTRUCTION,
      canUseTool: allowAll,
      maxTurns: 1,
      cwd: bed.dir,
      boundary: localForkBoundary(bed.dir),
    });
    const [parentFirst, , forkRequest] = bed.server.messageRequests();
    const cmp = comparePrefix(parentFirst!.body, forkRequest!.body);
    expect(cmp.aIsPrefixOfB).toBe(true);
    expect(forkRequest!.body.messages).toHaveLength(3); // question, answer, instruction
  });

  it('rebuilds only the live conversation after a compact boundary', async () => {
    const transcriptPath = join(bed.dir, 's2.jsonl');
    const store = new TranscriptStore(transcriptPath);
    const s = (parentUuid: string | null) => ({ sessionId: 's2', cwd: bed.dir, parentUuid });
    const old = createUserEntry(s(null), 'an old question nobody needs any more');
    const oldReply = createAssistantEntry(s(old.uuid), { content: [{ type: 'text', text: 'old answer' }] });
    await store.append([old, oldReply]);
    const boundary = await appendCompactBoundary(store, {
      sessionId: 's2',
      cwd: bed.dir,
      logicalParentUuid: oldReply.uuid,
      trigger: 'auto',
      preTokens: 170_000,
    });
    const summary = createUserEntry(s(boundary.uuid), 'Summary: the user prefers pnpm.', {
      isCompactSummary: true,
    });
    const after = createAssistantEntry(s(summary.uuid), { content: [{ type: 'text', text: 'Continuing.' }] });
    await store.append([summary, after]);

    bed.server.script(textReply('ok'));
    await runForkedAgent({
      client: bed.client,
      params: { model: MODEL, system, tools: toolDefinitions(defaultTools()), maxTokens: 1_024 },
      transcriptPath,
      leafUuid: after.uuid,
      instruction: INSTRUCTION,
      canUseTool: allowAll,
      maxTurns: 1,
      cwd: bed.dir,
      boundary: localForkBoundary(bed.dir),
    });
    const sent = bed.server.messageRequests()[0]!.body.messages;
    expect(JSON.stringify(sent)).not.toContain('old question');
    expect(sent.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(sent[0]!.content).toEqual([{ type: 'text', text: 'Summary: the user prefers pnpm.' }]);
  });

  it('sends the parent tool list verbatim but only executes the tools it has', async () => {
    const transcriptPath = join(bed.dir, 's3.jsonl');
    const store = new TranscriptStore(transcriptPath);
    const q = createUserEntry({ sessionId: 's3', cwd: bed.dir, parentUuid: null }, 'hi');
    await store.append([q]);
    const parentTools = [
      ...toolDefinitions(defaultTools()),
      { name: 'mcp__github__create_issue', description: 'Create an issue', input_schema: { type: 'object' } },
    ];
    bed.server.script(
      reply(toolUse('mcp__github__create_issue', { title: 'x' }, 'toolu_mcp')),
      textReply('ok'),
    );
    await runForkedAgent({
      client: bed.client,
      params: { model: MODEL, system, tools: parentTools, maxTokens: 1_024 },
      transcriptPath,
      leafUuid: q.uuid,
      instruction: INSTRUCTION,
      canUseTool: allowAll,
      maxTurns: 3,
      cwd: bed.dir,
      boundary: localForkBoundary(bed.dir),
    });
    const [first, second] = bed.server.messageRequests();
    expect(first!.body.tools).toEqual(parentTools);
    expect(second!.body.messages.at(-1)!.content).toEqual([
      {
        type: 'tool_result',
        tool_use_id: 'toolu_mcp',
        content: '<tool_use_error>Error: No such tool available: mcp__github__create_issue</tool_use_error>',
        is_error: true,
        cache_control: { type: 'ephemeral' },
      },
    ]);
  });
});

describe('seedReadFileState', () => {
  it('lets a fork Edit what the parent read, but not a file changed since or never read', async () => {
    const readFile1 = join(bed.dir, 'read.md');
    const changed = join(bed.dir, 'changed.md');
    const unread = join(bed.dir, 'unread.md');
    await Promise.all([writeFile(readFile1, 'a'), writeFile(changed, 'b'), writeFile(unread, 'c')]);
    bed.server.script(
      reply(
        toolUse('Read', { file_path: readFile1 }, 'toolu_r1'),
        toolUse('Read', { file_path: changed }, 'toolu_r2'),
      ),
      textReply('read both'),
    );
    const parent = await runParentTurn('read them');
    const later = new Date(Date.now() + 60_000);
    await utimes(changed, later, later);

    const state = seedReadFileState((await parent.store.readAll()).entries, bed.dir);
    expect([...state.entries()].map(([p]) => p).sort()).toEqual([changed, readFile1].sort());

    bed.server.script(
      reply(
        toolUse('Edit', { file_path: readFile1, old_string: 'a', new_string: 'A' }, 'toolu_e1'),
        toolUse('Edit', { file_path: changed, old_string: 'b', new_string: 'B' }, 'toolu_e2'),
        toolUse('Edit', { file_path: unread, old_string: 'c', new_string: 'C' }, 'toolu_e3'),
      ),
      textReply('done'),
    );
    const fork = await runForkedAgent({
      client: bed.client,
      params: await loadCacheSafeParams(cacheSafeParamsPathFor(parent.transcriptPath)),
      transcriptPath: parent.transcriptPath,
      leafUuid: parent.leafUuid,
      instruction: INSTRUCTION,
      canUseTool: allowAll,
      maxTurns: 2,
      cwd: bed.dir,
      boundary: localForkBoundary(bed.dir),
    });
    const results = bed.server.messageRequests().at(-1)!.body.messages.at(-1)!.content as Array<
      Record<string, unknown>
    >;
    expect(results[0]).not.toHaveProperty('is_error');
    expect(results[1]).toMatchObject({
      is_error: true,
      content: `<tool_use_error>${MODIFIED_SINCE_READ_MESSAGE}</tool_use_error>`,
    });
    expect(results[2]).toMatchObject({
      is_error: true,
      content: `<tool_use_error>${NOT_READ_MESSAGE}</tool_use_error>`,
    });
    expect(fork.writtenPaths).toEqual([readFile1]);
    expect(await readFile(changed, 'utf8')).toBe('b');
  });
});
