import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { textReply } from '@engram/testkit/replies';
import { describe, expect, it } from 'vitest';
import { localForkBoundary, useModelTestbed } from '../fixtures.test-helpers.js';
import { runForkedAgent } from '../fork/run-forked-agent.js';
import { runQueryLoop } from '../loop/query-loop.js';
import { readTool } from '../tools/read.js';
import { defaultTools } from '../tools/registry.js';
import { allowAll, ReadFileState, type ToolContext } from '../tools/tool.js';
import { createUserEntry } from '../transcript/entry.js';
import { ATTENDED } from './boundary.js';

// The filesystem boundary is a required field of every run, fork and tool call (boundary.ts): a caller that
// forgets it gets a compile error (each `@ts-expect-error` below fails `npm run typecheck` the day the field
// turns optional), and if it got past the compiler anyway, the run fails before any model call or file access
// instead of running unconfined.

const bed = useModelTestbed();

describe('the boundary is required', () => {
  it('a query loop, a fork and a tool call without one do not compile, and do not run', async () => {
    const first = createUserEntry({ sessionId: 's1', cwd: bed.dir, parentUuid: null }, 'go');
    const loop = {
      client: bed.client,
      model: 'claude-sonnet-5-5',
      system: [{ type: 'text' as const, text: 'You are Engram.' }],
      tools: defaultTools(),
      maxTokens: 1_024,
      messages: [first],
      canUseTool: allowAll,
      cwd: bed.dir,
      sessionId: 's1',
    };
    // @ts-expect-error `boundary` is required: a run that forgot its jail must not compile.
    await expect(runQueryLoop(loop)).rejects.toBeInstanceOf(TypeError);

    const fork = {
      client: bed.client,
      params: { model: 'claude-sonnet-5-5', system: loop.system, tools: [], maxTokens: 1_024 },
      transcriptPath: join(bed.dir, 's1.jsonl'),
      entries: [first],
      leafUuid: first.uuid,
      instruction: 'Save what is worth remembering.',
      canUseTool: allowAll,
      maxTurns: 1,
      cwd: bed.dir,
    };
    // @ts-expect-error `boundary` is required: a fork is never attended, and never runs without its jail.
    await expect(runForkedAgent(fork)).rejects.toBeInstanceOf(TypeError);
    expect(bed.server.messageRequests()).toHaveLength(0);

    writeFileSync(join(bed.dir, 'a.md'), 'A\n');
    // @ts-expect-error `boundary` is required in every tool call's context.
    const unbounded: ToolContext = { cwd: bed.dir, readFileState: new ReadFileState(), toolUseId: 't' };
    await expect(readTool.call({ file_path: join(bed.dir, 'a.md') }, unbounded)).rejects.toBeInstanceOf(
      TypeError,
    );
    // Positive controls: the same calls with a boundary run (attended, and a CLI fork's).
    const read = await readTool.call(
      { file_path: join(bed.dir, 'a.md') },
      { ...unbounded, boundary: ATTENDED },
    );
    expect(read.content).toBe('     1\tA');
    bed.server.script(textReply('Nothing to save.'));
    const forked = await runForkedAgent({ ...fork, boundary: localForkBoundary(bed.dir) });
    expect(forked.endReason).toBe('completed');
  });
});
