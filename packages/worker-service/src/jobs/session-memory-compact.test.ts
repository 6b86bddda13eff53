import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContextTooLongError, reactiveCompact } from '@engram/agent-runtime/compact/auto-compact';
import { buildChain } from '@engram/agent-runtime/transcript/chain';
import { isCompactBoundary } from '@engram/agent-runtime/transcript/entry';
import { JobProducer } from '@engram/queue/producer';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { errors, type ScriptStep, textReply } from '@engram/testkit/replies';
import { describe, expect, it } from 'vitest';
import { lastUserText } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';
import {
  createSmSession,
  isCompactRequest,
  isSessionMemoryRequest,
  type SmSession,
} from './session-memory.test-helpers.js';

// Compaction in a session whose notes the workers keep (docs/design.md §7): from the notes with no model call when
// they are usable, from one model summary when not, and once (reactively) on a prompt-too-long reply.

const scripted = useModelServer({ requireScripted: true });
const { closer } = scripted;

let producer: JobProducer;

async function session(opts: { sessionMemory?: boolean } = {}): Promise<SmSession> {
  const engramHome = mkdtempSync(join(tmpdir(), 'engram-home-'));
  const service = await startTestWorkerService({
    modelUrl: scripted.server.url,
    engramHome,
    queues: 'session-memory',
    closer,
  });
  producer = closer.add(new JobProducer(service.engine));
  const queue = producer.queue('session-memory');
  return createSmSession(scripted.server, {
    engine: service.engine,
    producer,
    engramHome,
    ...(opts.sessionMemory === false ? { sessionMemory: false } : {}),
    // Wait for each update, as a fast worker pool would have finished it before the next compaction.
    onEnqueued: async (jobId) => {
      for (;;) {
        const state = await queue.getJobState(jobId);
        if (state === 'completed' || state === 'failed') return;
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  });
}

const WORKLOG = '_A terse, step-by-step log of what was done_';

function scriptModel(s: () => SmSession, parent: ScriptStep[] | ((i: number) => ScriptStep)) {
  let notes = 0;
  scripted.server.route(
    'notes',
    (r) => isSessionMemoryRequest(r.body),
    (r) => {
      if (!lastUserText(r.body).includes('<current_notes_content>')) return textReply('Notes updated.');
      notes++;
      return {
        content: [
          {
            type: 'tool_use',
            name: 'Edit',
            input: {
              file_path: s().summaryPath,
              old_string: WORKLOG,
              new_string: `${WORKLOG}\n- notes update ${notes}`,
            },
          },
        ],
      };
    },
  );
  scripted.server.route(
    'compact',
    (r) => isCompactRequest(r.body),
    () =>
      textReply(
        '<analysis>thinking</analysis><summary>1. Primary request: build the parser (model summary)</summary>',
      ),
  );
  let i = 0;
  scripted.server.route(
    'parent',
    (r) => !isSessionMemoryRequest(r.body) && !isCompactRequest(r.body),
    Array.isArray(parent) ? parent : () => parent(i++),
  );
}

const bigPrompt = (i: number) => `prompt ${i}: ${'p'.repeat(8_000)}`;

describe('auto-compaction with session memory', () => {
  it('compacts from the notes without any summarising model call once the threshold is crossed, and the next turn starts from the boundary', async () => {
    let s!: SmSession;
    s = await session();
    scriptModel(
      () => s,
      (i) => textReply(`answer ${i}: ${'a'.repeat(2_000)}`),
    );
    for (let i = 0; i < 8; i++) await s.turn(bigPrompt(i));
    expect(scripted.server.messageRequests('notes').length).toBeGreaterThan(0);
    const before = s.replies.at(-1)!.contextTokens;
    const outcome = await s.autoCompact({ threshold: before - 1 });
    expect(outcome).toMatchObject({ compacted: true, via: 'session-memory' });
    expect(scripted.server.messageRequests('compact')).toHaveLength(0);
    if (!outcome.compacted) throw new Error('unreachable');
    expect(outcome.result.postTokens).toBeLessThan(before - 1);
    expect(outcome.result.summary.message!.content).toContain('- notes update');

    // The JSONL rebuilds to exactly the compacted conversation, starting after the boundary.
    const chain = buildChain((await s.store.readAll()).entries);
    expect(chain.boundary?.uuid).toBe(outcome.result.boundary.uuid);
    expect(chain.live.map((e) => e.uuid)).toEqual(s.live.map((e) => e.uuid));
    expect(chain.live[0]!.isCompactSummary).toBe(true);

    // A request for a leaf the compaction replaced is stale: the notes follow the compacted conversation.
    const old = s.replies.at(-1)!;
    await s.state.updateSessionMemory({ lastUpdateSeq: 1 }); // so only the leaf check can call it stale
    const { jobId } = await producer.enqueue('session-memory', s.payload(old, old.contextTokens + 50_000));
    let stale: unknown;
    for (let i = 0; i < 750 && stale === undefined; i++) {
      if ((await producer.queue('session-memory').getJobState(jobId)) === 'completed') {
        stale = (await producer.queue('session-memory').getJob(jobId))?.returnvalue;
      } else await new Promise((r) => setTimeout(r, 20));
    }
    expect(stale).toMatchObject({ outcome: 'skipped-stale' });

    await s.turn('what next?');
    const next = scripted.server.messageRequests('parent').at(-1)!.body;
    const sent = JSON.stringify(next.messages);
    expect(JSON.stringify(next.messages[0])).toContain('This session continues an earlier conversation');
    expect(sent).toContain('- notes update');
    expect(sent).not.toContain('prompt 0:');
    expect(sent).toContain('prompt 7:'); // the recent tail is kept verbatim
    expect(scripted.server.messageRequests('compact')).toHaveLength(0);
  });

  it('falls back to exactly one model summary when there are no notes yet', async () => {
    let s!: SmSession;
    s = await session();
    scriptModel(
      () => s,
      (i) => textReply(`answer ${i}`),
    );
    await s.turn('hello there');
    await s.turn('build the parser');
    expect(scripted.server.messageRequests('notes')).toHaveLength(0);
    const outcome = await s.autoCompact({ threshold: 100 });
    expect(outcome).toMatchObject({ compacted: true, via: 'model' });
    expect(scripted.server.messageRequests('compact')).toHaveLength(1);
    await s.turn('go on');
    const sent = JSON.stringify(scripted.server.messageRequests('parent').at(-1)!.body.messages);
    expect(sent).toContain('1. Primary request: build the parser (model summary)');
    expect(sent).not.toContain('hello there');
    expect(buildChain((await s.store.readAll()).entries).live[0]!.isCompactSummary).toBe(true);
  });
});

describe('reactive compaction', () => {
  async function boundaries(s: SmSession) {
    return (await s.store.readAll()).entries.filter(isCompactBoundary).length;
  }

  it('compacts exactly once on a prompt-too-long reply and retries once', async () => {
    let s!: SmSession;
    s = await session({ sessionMemory: false });
    scriptModel(
      () => s,
      [textReply('one'), textReply('two'), errors.promptTooLong(250_000), textReply('three')],
    );
    await s.turn('first');
    await s.turn('second');
    let compactions = 0;
    const out = await reactiveCompact({
      entries: s.live,
      attempt: (entries) => s.turn('third', { messages: entries }),
      compact: async (entries) => {
        compactions++;
        const o = await s.autoCompact({ threshold: 0, force: true, entries });
        return o.compacted ? o.newEntries : null;
      },
    });
    expect(out.compacted).toBe(true);
    expect(compactions).toBe(1);
    expect(await boundaries(s)).toBe(1);
    expect(scripted.server.messageRequests('compact')).toHaveLength(1);
    expect(scripted.server.messageRequests('parent').map((r) => r.response?.status)).toEqual([
      200, 200, 400, 200,
    ]);
    expect(s.live.at(-1)!.message!.content).toEqual([{ type: 'text', text: 'three' }]);
  });

  it('ends with a clear error after one compaction when the retry is still too long', async () => {
    let s!: SmSession;
    s = await session({ sessionMemory: false });
    scriptModel(() => s, [textReply('one'), errors.promptTooLong(250_000), errors.promptTooLong(240_000)]);
    await s.turn('first');
    const failure = await reactiveCompact({
      entries: s.live,
      attempt: (entries) => s.turn('second', { messages: entries }),
      compact: async (entries) => {
        const o = await s.autoCompact({ threshold: 0, force: true, entries });
        return o.compacted ? o.newEntries : null;
      },
    }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ContextTooLongError);
    expect((failure as Error).message).toContain('240,000 tokens, the maximum is 200,000');
    expect((failure as Error).message).toContain('start a new session');
    expect(await boundaries(s)).toBe(1);
    expect(scripted.server.messageRequests('compact')).toHaveLength(1);
  });
});
