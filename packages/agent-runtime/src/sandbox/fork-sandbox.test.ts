import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { comparePrefix } from '@engram/testkit/prefix';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { describe, expect, it } from 'vitest';
import { localForkBoundary, useModelTestbed } from '../fixtures.test-helpers.js';
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
import { ATTENDED } from './boundary.js';
import { rootsBoundary } from './read-boundary.js';
import { prepareUnattended } from './unattended.js';

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
    boundary: ATTENDED,
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
    canUseTool: allowAll,
    maxTurns: 3,
    cwd: mem,
    boundary: localForkBoundary(mem),
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

  it("a tenant's fork: its Bash cannot cat, grep -r or find another tenant's memory, transcripts or ENGRAM_HOME's secrets; its own it can", async () => {
    const put = async (rel: string, content: string, mode = 0o644) => {
      await mkdir(join(bed.dir, rel, '..'), { recursive: true });
      await writeFile(join(bed.dir, rel), content, { mode });
    };
    await put('engram/secrets/team.key', 'ENGRAM-SECRET\n', 0o600);
    await put('engram/tenants/a/home/projects/p/memory/own.md', 'A-MEMORY\n');
    await put('engram/tenants/a/home/projects/p/s.jsonl', '{"A-TRANSCRIPT":1}\n');
    await put('engram/tenants/b/home/projects/p/memory/theirs.md', 'B-MEMORY\n');
    await put('engram/tenants/b/home/projects/p/s.jsonl', '{"B-TRANSCRIPT":1}\n');
    await put('ws/a/notes.md', 'A-WORKSPACE\n');
    await put('ws/b/plans.md', 'B-WORKSPACE\n');
    const engram = join(bed.dir, 'engram');
    const homeA = join(engram, 'tenants/a/home');
    const memA = join(homeA, 'projects/p/memory');
    const parent = await parentTurn();
    const probes = {
      cat: `cat ${engram}/tenants/b/home/projects/p/memory/theirs.md ${engram}/tenants/b/home/projects/p/s.jsonl ${engram}/secrets/team.key ${bed.dir}/ws/b/plans.md`,
      grep: `grep -rhE '(ENGRAM|A|B)-(SECRET|MEMORY|TRANSCRIPT|WORKSPACE)' ${bed.dir} 2>/dev/null | sort`,
      find: `find ${bed.dir} -type f | sort`,
      environ:
        'cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n" | grep -c -e FORK-WORKER-SECRET -e REDIS_URL',
    };
    bed.server.script(
      reply(...Object.entries(probes).map(([id, command]) => toolUse('Bash', { command }, `toolu_${id}`))),
      textReply('Looked.'),
    );
    process.env.ENGRAM_TEST_FORK_SECRET = 'FORK-WORKER-SECRET';
    try {
      // A tenant's job states its read boundary's roots as Bash's world (job-paths.ts `jobBoundary`).
      const read = await rootsBoundary([homeA, join(bed.dir, 'ws/a')]);
      await forkOf(parent, memA, {
        boundary: { ...localForkBoundary(memA), read, world: read.kind === 'roots' ? read.roots : [] },
      });
    } finally {
      delete process.env.ENGRAM_TEST_FORK_SECRET;
    }
    const results = new Map(
      (
        bed.server.messageRequests().at(-1)!.body.messages.at(-1)!.content as Array<Record<string, unknown>>
      ).map((b) => [String(b.tool_use_id).replace('toolu_', ''), String(b.content)]),
    );
    for (const [id, out] of results)
      expect(out, id).not.toMatch(/ENGRAM-SECRET|B-MEMORY|B-TRANSCRIPT|B-WORKSPACE|FORK-WORKER/);
    expect(results.get('cat')).toMatch(/No such file or directory/);
    expect(results.get('find')).not.toMatch(/tenants\/b|secrets|ws\/b/);
    expect(results.get('environ')).toBe('0\nExit code 1'); // grep -c found nothing
    // Positive controls: the same commands reach the tenant's own memory, transcripts and workspace.
    expect(results.get('grep')).toBe('A-MEMORY\nA-WORKSPACE\n{"A-TRANSCRIPT":1}');
    expect(results.get('find')).toContain(join(memA, 'own.md'));
    expect(results.get('find')).toContain(join(bed.dir, 'ws/a/notes.md'));
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

  it('a caller handing an unattended boundary to runQueryLoop directly gets the sandbox too', async () => {
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
      canUseTool: allowAll,
      cwd: mem,
      sessionId: 'd1',
      boundary: await prepareUnattended(localForkBoundary(mem)),
    });
    expect(existsSync(join(mem, 'x.md'))).toBe(false);
    const results = bed.server.messageRequests()[1]!.body.messages.at(-1)!.content as Array<
      Record<string, unknown>
    >;
    expect(String(results[0]!.content)).toMatch(/Read-only file system/);
    expect(String(results[0]!.content)).toContain('/tmp/home');
  });
});
