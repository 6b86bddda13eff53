import { access, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stripCacheControl } from '@engram/testkit/prefix';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { useModelTestbed } from '../fixtures.test-helpers.js';
import type { SystemBlock } from '../model/types.js';
import { ATTENDED } from '../sandbox/boundary.js';
import { defaultTools } from '../tools/registry.js';
import { allowAll, type CanUseTool, defineTool } from '../tools/tool.js';
import { buildChain } from '../transcript/chain.js';
import { type ChainEntry, createUserEntry } from '../transcript/entry.js';
import { renderChainToApiMessages } from '../transcript/render.js';
import { TranscriptStore } from '../transcript/store.js';
import { emptyOutputText, type QueryLoopOptions, runQueryLoop } from './query-loop.js';

const bed = useModelTestbed();

const system: SystemBlock[] = [{ type: 'text', text: 'You are a careful coding agent.' }];

function options(prompt: string, extra: Partial<QueryLoopOptions> = {}): QueryLoopOptions {
  const first = createUserEntry({ sessionId: 's1', cwd: bed.dir, parentUuid: null }, prompt);
  return {
    client: bed.client,
    model: 'claude-sonnet-5-5',
    system,
    tools: defaultTools(),
    maxTokens: 4_096,
    messages: [first],
    canUseTool: allowAll,
    cwd: bed.dir,
    sessionId: 's1',
    boundary: ATTENDED,
    ...extra,
  };
}

const lastRequestMessages = () => bed.server.messageRequests().at(-1)!.body.messages;

describe('runQueryLoop', () => {
  it('runs a tool call, sends its result back and stops at a reply without tool calls', async () => {
    await writeFile(join(bed.dir, 'notes.txt'), 'remember the milk\n');
    bed.server.script(
      reply(text('Reading.'), toolUse('Read', { file_path: join(bed.dir, 'notes.txt') }, 'toolu_read1')),
      textReply('It says to remember the milk.'),
    );
    const seen: ChainEntry[] = [];
    const opts = options('What is in notes.txt?', { onMessage: (e) => void seen.push(e) });
    const result = await runQueryLoop(opts);

    expect(result.endReason).toBe('completed');
    expect(result.stopReason).toBe('end_turn');
    expect(result.turns).toBe(2);
    expect(seen).toEqual(result.newMessages);
    expect(result.newMessages.map((m) => m.type)).toEqual(['assistant', 'user', 'assistant']);
    expect(lastRequestMessages()[2]).toEqual({
      role: 'user',
      content: [
        {
          type: 'tool_result',
          tool_use_id: 'toolu_read1',
          content: '     1\tremember the milk',
          cache_control: { type: 'ephemeral' },
        },
      ],
    });
    const [r1, r2] = bed.server.messageRequests();
    expect(result.usage.outputTokens).toBe(
      r1!.response!.usage!.output_tokens + r2!.response!.usage!.output_tokens,
    );
    // Chained: each new entry's parent is the previous one.
    expect(result.newMessages[0]!.parentUuid).toBe(opts.messages[0]!.uuid);
    expect(result.newMessages[1]!.parentUuid).toBe(result.newMessages[0]!.uuid);
    // Claude Code's per-entry field: one result per entry, its facts in `toolUseResult`.
    expect(result.newMessages[1]!.toolUseResult).toMatchObject({ filePath: join(bed.dir, 'notes.txt') });
    expect(result.newMessages[1]!.toolUseResults).toBeUndefined();
  });

  it('runs independent read-only calls in parallel and writing calls alone, results in call order', async () => {
    let active = 0;
    let maxActive = 0;
    const log: string[] = [];
    const probe = (name: string, safe: boolean) =>
      defineTool<{ id: string }>({
        name,
        description: `probe ${name}`,
        inputSchema: z.object({ id: z.string() }),
        maxResultChars: 1_000,
        isReadOnly: () => safe,
        async call(input) {
          active++;
          maxActive = Math.max(maxActive, active);
          log.push(`start ${input.id}`);
          await new Promise((r) => setTimeout(r, 20));
          log.push(`end ${input.id}`);
          active--;
          return { content: `done ${input.id}` };
        },
      });
    bed.server.script(
      reply(
        toolUse('Look', { id: 'r1' }, 'toolu_1'),
        toolUse('Look', { id: 'r2' }, 'toolu_2'),
        toolUse('Change', { id: 'w1' }, 'toolu_3'),
        toolUse('Look', { id: 'r3' }, 'toolu_4'),
      ),
      textReply('done'),
    );
    await runQueryLoop(options('go', { tools: [probe('Look', true), probe('Change', false)] }));
    expect(maxActive).toBe(2);
    // The writer starts only after both readers ended, and the last reader only after the writer.
    expect(log.indexOf('start w1')).toBeGreaterThan(log.indexOf('end r2'));
    expect(log.indexOf('start w1')).toBeGreaterThan(log.indexOf('end r1'));
    expect(log.indexOf('start r3')).toBeGreaterThan(log.indexOf('end w1'));
    const results = lastRequestMessages()[2]!.content as Array<{ tool_use_id: string; content: string }>;
    expect(results.map((r) => [r.tool_use_id, r.content])).toEqual([
      ['toolu_1', 'done r1'],
      ['toolu_2', 'done r2'],
      ['toolu_3', 'done w1'],
      ['toolu_4', 'done r3'],
    ]);
  });

  it('turns a denied Write into an is_error result with the denial text and leaves the disk untouched', async () => {
    const target = join(bed.dir, 'secret-plan.md');
    const denyWrites: CanUseTool = async (tool, input) =>
      tool.name === 'Write'
        ? { behavior: 'deny', message: `Write to ${String(input.file_path)} is not allowed in this context.` }
        : { behavior: 'allow' };
    bed.server.script(
      reply(toolUse('Write', { file_path: target, content: 'plan' }, 'toolu_w')),
      textReply('Understood, I will not write it.'),
    );
    const result = await runQueryLoop(options('Save the plan.', { canUseTool: denyWrites }));
    await expect(access(target)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(lastRequestMessages()[2]!.content).toEqual([
      {
        type: 'tool_result',
        tool_use_id: 'toolu_w',
        content: `Write to ${target} is not allowed in this context.`,
        is_error: true,
        cache_control: { type: 'ephemeral' },
      },
    ]);
    expect(result.deniedCalls).toEqual([
      { tool: 'Write', toolUseId: 'toolu_w', message: `Write to ${target} is not allowed in this context.` },
    ]);
  });

  it('passes the Bash tool to the permission hook with its read-only classification', async () => {
    const decisions: Array<[string, boolean | undefined]> = [];
    const readOnlyBash: CanUseTool = (tool, input) => {
      const ro = tool.isReadOnly?.(input);
      decisions.push([String(input.command), ro]);
      return ro
        ? { behavior: 'allow' }
        : { behavior: 'deny', message: 'Only read-only commands are allowed.' };
    };
    bed.server.script(
      reply(
        toolUse('Bash', { command: 'ls' }, 'toolu_a'),
        toolUse('Bash', { command: 'touch created.txt' }, 'toolu_b'),
      ),
      textReply('ok'),
    );
    await runQueryLoop(options('look around', { canUseTool: readOnlyBash }));
    expect(decisions).toEqual([
      ['ls', true],
      ['touch created.txt', false],
    ]);
    await expect(access(join(bed.dir, 'created.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('accepts a policy typed only structurally (as memory-core declares it) and passes its reason through', async () => {
    type Descriptor = { name: string; isReadOnly?(input: Record<string, unknown>): boolean };
    type Decision =
      | { behavior: 'allow' }
      | { behavior: 'deny'; message: string; reason?: 'tool_not_allowed' };
    const policy = async (tool: Descriptor, _input: Record<string, unknown>): Promise<Decision> =>
      tool.name === 'Bash'
        ? { behavior: 'deny', message: 'No shell here.', reason: 'tool_not_allowed' }
        : { behavior: 'allow' };
    const canUseTool: CanUseTool = policy; // must compile: memory-core's policies plug straight in
    bed.server.script(reply(toolUse('Bash', { command: 'ls' }, 'toolu_b')), textReply('ok'));
    const result = await runQueryLoop(options('list', { canUseTool }));
    expect(result.deniedCalls).toEqual([
      { tool: 'Bash', toolUseId: 'toolu_b', message: 'No shell here.', reason: 'tool_not_allowed' },
    ]);
  });

  it('treats a throwing permission hook as a denial and runs nothing', async () => {
    const target = join(bed.dir, 'never.txt');
    bed.server.script(
      reply(toolUse('Write', { file_path: target, content: 'x' }, 'toolu_w')),
      textReply('ok'),
    );
    const result = await runQueryLoop(
      options('write', {
        canUseTool: () => {
          throw new Error('policy exploded');
        },
      }),
    );
    await expect(access(target)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(result.deniedCalls[0]).toMatchObject({ message: 'Permission check failed: policy exploded' });
  });

  it('ends normally with max_turns when the budget is spent', async () => {
    bed.server.respond(() => reply(toolUse('Bash', { command: 'echo again' })));
    const result = await runQueryLoop(options('loop forever', { maxTurns: 2 }));
    expect(result.endReason).toBe('max_turns');
    expect(result.turns).toBe(2);
    expect(bed.server.messageRequests()).toHaveLength(2);
    expect(result.newMessages.at(-1)!.type).toBe('user'); // the last tool results are kept
  });

  it('replaces empty tool output, reports unknown tools and invalid input as errors', async () => {
    bed.server.script(
      reply(
        toolUse('Bash', { command: 'true' }, 'toolu_empty'),
        toolUse('Teleport', { to: 'mars' }, 'toolu_unknown'),
        toolUse('Read', { path: 'wrong field' }, 'toolu_invalid'),
      ),
      textReply('ok'),
    );
    await runQueryLoop(options('try things'));
    const results = lastRequestMessages()[2]!.content as Array<Record<string, unknown>>;
    expect(results[0]).toMatchObject({ tool_use_id: 'toolu_empty', content: emptyOutputText('Bash') });
    expect(results[0]).not.toHaveProperty('is_error');
    expect(results[1]).toMatchObject({
      content: '<tool_use_error>Error: No such tool available: Teleport</tool_use_error>',
      is_error: true,
    });
    expect(results[2]!.content).toMatch(/^<tool_use_error>InputValidationError: Read failed/);
    expect(results[2]!.is_error).toBe(true);
  });

  it('injects attachments before a model call and calls the reply and turn-end hooks', async () => {
    bed.server.script(reply(toolUse('Bash', { command: 'echo hi' }, 'toolu_1')), textReply('done'));
    const calls: string[] = [];
    const result = await runQueryLoop(
      options('hello', {
        beforeModelCall: (state) => {
          calls.push(`before ${state.turn}`);
          return state.turn === 1
            ? ['<system-reminder>Recalled: user prefers pnpm</system-reminder>']
            : undefined;
        },
        afterReply: (r, state) => void calls.push(`reply ${state.turn} ${r.message.stopReason}`),
        onTurnEnd: (state) => void calls.push(`end ${state.endReason} ${state.turn}`),
      }),
    );
    expect(calls).toEqual([
      'before 0',
      'reply 1 tool_use',
      'before 1',
      'reply 2 end_turn',
      'end completed 2',
    ]);
    expect(result.newMessages.map((m) => m.type)).toEqual(['assistant', 'user', 'attachment', 'assistant']);
    const second = lastRequestMessages();
    expect(second).toHaveLength(3);
    expect(second[2]!.content).toEqual([
      { type: 'tool_result', tool_use_id: 'toolu_1', content: 'hi' },
      {
        type: 'text',
        text: '<system-reminder>Recalled: user prefers pnpm</system-reminder>',
        cache_control: { type: 'ephemeral' },
      },
    ]);
  });

  it('stops with endReason aborted when the signal fires during a model call', async () => {
    bed.server.script({ ...textReply('too late'), latencyMs: 2_000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const result = await runQueryLoop(options('slow', { signal: controller.signal }));
    expect(result.endReason).toBe('aborted');
    expect(result.newMessages).toEqual([]);
  });

  it('persists a large Bash result and the <persisted-output> block round-trips through the transcript', async () => {
    const transcript = new TranscriptStore(join(bed.dir, 'project', 's1.jsonl'));
    const toolResultsDir = join(bed.dir, 'project', 's1', 'tool-results');
    bed.server.script(
      reply(toolUse('Bash', { command: 'seq 1 20000' }, 'toolu_big')),
      textReply('That is a lot of numbers.'),
    );
    const opts = options('count to 20000', {
      toolResultsDir,
      onMessage: (e) => transcript.append([e]).then(() => {}),
    });
    await transcript.append(opts.messages);
    const result = await runQueryLoop(opts);

    const persistedPath = join(toolResultsDir, 'toolu_big.txt');
    const full = await readFile(persistedPath, 'utf8');
    expect(full.split('\n')).toHaveLength(20_000);
    const sent = lastRequestMessages()[2]!.content as Array<{ content: string }>;
    expect(sent[0]!.content).toMatch(
      new RegExp(
        `^<persisted-output>\\nOutput too large \\(\\d+(\\.\\d)?KB\\)\\. Full output saved to: ${persistedPath}\\n`,
      ),
    );
    expect(result.newMessages[1]!.toolUseResult).toEqual({ persistedOutputPath: persistedPath });

    // Rebuilt from disk, the conversation renders to exactly what was sent.
    const { entries } = await transcript.readAll();
    const rebuilt = renderChainToApiMessages(buildChain(entries, result.newMessages[1]!.uuid).live);
    expect(rebuilt).toEqual(stripCacheControl(lastRequestMessages()));
  });
});
