import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { comparePrefix } from '@engram/testkit/prefix';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { withWriteJail } from '@engram/write-jail/write-jail';
import { describe, expect, it } from 'vitest';
import { useModelTestbed } from '../fixtures.test-helpers.js';
import {
  cacheSafeParamsPathFor,
  loadCacheSafeParams,
  saveCacheSafeParams,
} from '../fork/cache-safe-params.js';
import { runForkedAgent } from '../fork/run-forked-agent.js';
import { runQueryLoop } from '../loop/query-loop.js';
import { defaultTools } from '../tools/registry.js';
import { allowAll } from '../tools/tool.js';
import { buildChain } from '../transcript/chain.js';
import { createUserEntry } from '../transcript/entry.js';
import { TranscriptStore } from '../transcript/store.js';

// A fork end to end (scripted model, real SDK): its Bash runs in the OS sandbox whatever its policy lets
// through, and where the sandbox is unavailable Bash is denied with the reason while the request keeps the
// parent's tool list (so the prompt cache is still shared).

const bed = useModelTestbed();

async function parentTurn() {
  const transcriptPath = join(bed.dir, 's1.jsonl');
  const store = new TranscriptStore(transcriptPath);
  await store.append([
    createUserEntry({ sessionId: 's1', cwd: bed.dir, parentUuid: null }, 'remember: I use pnpm'),
  ]);
  bed.server.script(textReply('Noted.'));
  const result = await runQueryLoop({
    client: bed.client,
    model: 'claude-sonnet-5-5',
    system: [{ type: 'text', text: 'You are Engram.' }],
    tools: defaultTools(),
    maxTokens: 4_096,
    messages: buildChain((await store.readAll()).entries).live,
    canUseTool: allowAll,
    cwd: bed.dir,
    sessionId: 's1',
    onMessage: async (e) => void (await store.append([e])),
    onRequest: (request) =>
      saveCacheSafeParams(cacheSafeParamsPathFor(transcriptPath), {
        model: request.model,
        system: request.system,
        tools: request.tools,
        maxTokens: request.maxTokens,
      }),
  });
  return { transcriptPath, leafUuid: result.newMessages.at(-1)!.uuid };
}

/** A fork of the parent's turn that may change `mem`, with a policy that allows every tool call. */
async function forkOf(
  parent: { transcriptPath: string; leafUuid: string },
  mem: string,
  extra: Partial<Parameters<typeof runForkedAgent>[0]> = {},
) {
  return runForkedAgent({
    client: bed.client,
    params: await loadCacheSafeParams(cacheSafeParamsPathFor(parent.transcriptPath)),
    transcriptPath: parent.transcriptPath,
    leafUuid: parent.leafUuid,
    instruction: 'Save what is worth remembering.',
    canUseTool: withWriteJail(allowAll, { root: mem }),
    maxTurns: 3,
    cwd: mem,
    ...extra,
  });
}

describe('a fork in the OS sandbox', () => {
  it('runs Bash sandboxed even when its policy lets a writing command through', async () => {
    const mem = join(bed.dir, 'memory');
    await mkdir(mem, { recursive: true });
    const outside = join(bed.dir, 'outside.txt');
    const parent = await parentTurn();
    bed.server.script(
      reply(
        text('Saving.'),
        toolUse(
          'Bash',
          { command: `echo pwned > ${outside}; touch ${mem}/behind-the-policy.md; echo $HOME` },
          'toolu_bash',
        ),
        toolUse('Write', { file_path: join(mem, 'pnpm.md'), content: '# Uses pnpm\n' }, 'toolu_write'),
      ),
      textReply('Saved 1 memory.'),
    );
    // A policy that allows everything: the sandbox alone must hold.
    const fork = await forkOf(parent, mem);
    // The outside path is on the sandbox's private /tmp; the memory directory is read-only to Bash.
    expect(existsSync(outside)).toBe(false);
    expect(existsSync(join(mem, 'behind-the-policy.md'))).toBe(false);
    expect(await readFile(join(mem, 'pnpm.md'), 'utf8')).toBe('# Uses pnpm\n');
    expect(fork.sandbox).toMatchObject({ writableRoot: mem, status: { available: true } });
    const results = bed.server.messageRequests()[2]!.body.messages.at(-1)!.content as Array<
      Record<string, unknown>
    >;
    expect(String(results[0]!.content)).toMatch(/Read-only file system/);
    expect(String(results[0]!.content)).toMatch(/\/tmp\/home/);
  });

  it('without a sandbox: Bash denied with the reason, the same tool list sent, writes still jailed', async () => {
    const mem = join(bed.dir, 'memory');
    await mkdir(mem, { recursive: true });
    const parent = await parentTurn();
    bed.server.script(
      reply(
        toolUse('Bash', { command: 'ls' }, 'toolu_bash'),
        toolUse('Write', { file_path: join(mem, 'pnpm.md'), content: '# Uses pnpm\n' }, 'toolu_write'),
        toolUse('Write', { file_path: join(bed.dir, 'outside.md'), content: 'x' }, 'toolu_outside'),
      ),
      textReply('Done.'),
    );
    const fork = await forkOf(parent, mem, { sandboxProbe: { env: { ENGRAM_SANDBOX: 'off' } } });
    const [parentRequest, forkRequest] = bed.server.messageRequests();
    expect(comparePrefix(parentRequest!.body, forkRequest!.body)).toMatchObject({ sameTools: true });
    expect(fork.deniedCalls).toEqual([
      expect.objectContaining({ tool: 'Bash', reason: 'sandbox_unavailable' }),
    ]);
    expect(fork.deniedCalls[0]!.message).toContain('disabled by ENGRAM_SANDBOX=off');
    expect(await readFile(join(mem, 'pnpm.md'), 'utf8')).toBe('# Uses pnpm\n');
    // The policy allowed the outside Write; the jailed write refused it.
    expect(existsSync(join(bed.dir, 'outside.md'))).toBe(false);
    expect(fork.writtenPaths).toEqual([join(mem, 'pnpm.md')]);
  });

  it('a caller handing a jailed policy to runQueryLoop directly gets the sandbox too', async () => {
    const mem = join(bed.dir, 'memory');
    await mkdir(mem, { recursive: true });
    bed.server.script(
      reply(toolUse('Bash', { command: `touch ${mem}/x.md; echo $HOME` }, 'toolu_bash')),
      textReply('Done.'),
    );
    await runQueryLoop({
      client: bed.client,
      model: 'claude-sonnet-5-5',
      system: [{ type: 'text', text: 'Consolidate.' }],
      tools: defaultTools(),
      maxTokens: 4_096,
      messages: [createUserEntry({ sessionId: 'd1', cwd: mem, parentUuid: null }, 'go')],
      canUseTool: withWriteJail(allowAll, { root: mem }),
      cwd: mem,
      sessionId: 'd1',
    });
    expect(existsSync(join(mem, 'x.md'))).toBe(false);
    const results = bed.server.messageRequests()[1]!.body.messages.at(-1)!.content as Array<
      Record<string, unknown>
    >;
    expect(String(results[0]!.content)).toMatch(/Read-only file system/);
    expect(String(results[0]!.content)).toContain('/tmp/home');
  });
});
