import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { autoCompactThreshold } from '@engram/agent-runtime/compact/thresholds';
import { tokenCountWithEstimation } from '@engram/agent-runtime/model/tokens';
import { JobProducer } from '@engram/queue/producer';
import type { RecordedRequest } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { describe, expect, it } from 'vitest';
import { lastUserText } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';
import {
  createSmSession,
  isCompactRequest,
  isSessionMemoryRequest,
  MAX_TOKENS,
  type SmSession,
} from './session-memory.test-helpers.js';

// One scripted 200-turn session, run twice against the same scripted model: with session-memory compaction
// (workers keep the notes; compaction needs no model call) and without it (every compaction is a model
// summary). Prints the prompt tokens the model was sent in each run, from the testkit server's recorded usage.

const TURNS = 200;
const CONTEXT_WINDOW = 60_000;
const THRESHOLD = autoCompactThreshold({ contextWindow: CONTEXT_WINDOW, maxOutputTokens: MAX_TOKENS });
const WORKLOG = '_A terse, step-by-step log of what was done_';

const scripted = useModelServer();
const { closer } = scripted;

interface Totals {
  requests: number;
  /** input + cache reads + cache writes: everything the model was sent. */
  sent: number;
  /** input + cache writes: what was not served from the prompt cache. */
  uncached: number;
  /** Generated tokens (a summarising call's output is what makes it slow). */
  output: number;
}

function totals(requests: RecordedRequest[]): Totals {
  const t: Totals = { requests: 0, sent: 0, uncached: 0, output: 0 };
  for (const r of requests) {
    const u = r.response?.usage;
    if (!u) continue;
    t.requests++;
    t.sent += u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
    t.uncached += u.input_tokens + u.cache_creation_input_tokens;
    t.output += u.output_tokens;
  }
  return t;
}

async function run(withSessionMemory: boolean) {
  scripted.server.reset();
  const engramHome = mkdtempSync(join(tmpdir(), 'engram-home-'));
  const service = await startTestWorkerService({
    modelUrl: scripted.server.url,
    engramHome,
    queues: 'session-memory',
    closer,
  });
  const producer = closer.add(new JobProducer(service.engine));
  const queue = producer.queue('session-memory');
  let s!: SmSession;
  s = createSmSession(scripted.server, {
    engine: service.engine,
    producer,
    engramHome,
    sessionMemory: withSessionMemory,
    onEnqueued: async (jobId) => {
      for (;;) {
        const state = await queue.getJobState(jobId);
        if (state === 'completed' || state === 'failed') return;
        await new Promise((r) => setTimeout(r, 10));
      }
    },
  });
  mkdirSync(join(s.cwd, 'src'), { recursive: true });
  for (let f = 0; f < 10; f++) {
    writeFileSync(
      join(s.cwd, 'src', `mod${f}.ts`),
      Array.from({ length: 30 }, (_, l) => `export const v${l} = '${'x'.repeat(60)}';`).join('\n'),
    );
  }
  let notes = 0;
  scripted.server.route(
    'notes',
    (r) => isSessionMemoryRequest(r.body),
    (r) => {
      if (!lastUserText(r.body).includes('<current_notes_content>')) return textReply('Notes updated.');
      notes++;
      return reply(
        toolUse('Edit', {
          file_path: s.summaryPath,
          old_string: WORKLOG,
          new_string: `${WORKLOG}\n- step ${notes}: read src/mod${notes % 10}.ts, fixed the export, tests pass`,
        }),
      );
    },
  );
  scripted.server.route(
    'compact',
    (r) => isCompactRequest(r.body),
    () =>
      textReply(
        `<summary>1. Primary request: refactor src/ module by module.\n${'- detail\n'.repeat(100)}</summary>`,
      ),
  );
  let calls = 0;
  scripted.server.route(
    'parent',
    (r) => !isSessionMemoryRequest(r.body) && !isCompactRequest(r.body),
    () => {
      const i = calls++;
      // Odd calls end the turn; even ones read a file first.
      if (i % 2 === 0)
        return reply(
          text(`Reading module ${(i / 2) % 10}.`),
          toolUse('Read', { file_path: join(s.cwd, 'src', `mod${(i / 2) % 10}.ts`) }),
        );
      return textReply(`Done with step ${i}: ${'the change is in place and the tests pass. '.repeat(20)}`);
    },
  );

  const compactions = { sessionMemory: 0, model: 0 };
  for (let t = 0; t < TURNS; t++) {
    if (tokenCountWithEstimation(s.live) >= THRESHOLD) {
      const outcome = await s.autoCompact({ threshold: THRESHOLD });
      if (!outcome.compacted) throw new Error(`compaction failed at turn ${t}: ${outcome.reason}`);
      compactions[outcome.via === 'session-memory' ? 'sessionMemory' : 'model']++;
    }
    await s.turn(
      `Step ${t}: refactor the next module. ${'Keep the public API stable and explain what changed. '.repeat(25)}`,
    );
  }
  return {
    compactions,
    parent: totals(scripted.server.messageRequests('parent')),
    compact: totals(scripted.server.messageRequests('compact')),
    notes: totals(scripted.server.messageRequests('notes')),
  };
}

describe('tokens sent over a 200-turn session', () => {
  it('with session-memory compaction vs model-summary compaction', async () => {
    const withSm = await run(true);
    const without = await run(false);
    const all = (r: typeof withSm) => ({
      sent: r.parent.sent + r.compact.sent + r.notes.sent,
      uncached: r.parent.uncached + r.compact.uncached + r.notes.uncached,
    });
    // The point of this test is to report these figures (see the issue-7 closing note).
    console.log(
      JSON.stringify(
        {
          turns: TURNS,
          contextWindow: CONTEXT_WINDOW,
          threshold: THRESHOLD,
          withSessionMemory: { ...withSm, total: all(withSm) },
          withoutSessionMemory: { ...without, total: all(without) },
        },
        null,
        2,
      ),
    );
    expect(withSm.compactions.sessionMemory).toBeGreaterThan(0);
    expect(withSm.compactions.model).toBe(0);
    expect(withSm.compact.requests).toBe(0);
    expect(without.compactions.model).toBeGreaterThan(0);
    expect(without.compact.requests).toBe(without.compactions.model);
    expect(without.notes.requests).toBe(0);
  }, 300_000);
});
