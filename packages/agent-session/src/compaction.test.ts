import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ContextTooLongError } from '@engram/agent-runtime/compact/auto-compact';
import { createModelClient } from '@engram/agent-runtime/model/client';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import { DEFAULT_SESSION_MEMORY_TEMPLATE } from '@engram/memory-core/session-memory/template';
import { SessionState } from '@engram/queue/state/session-state';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import type { RecordedRequest } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { errors, reply, type ScriptedReply, textReply, toolUse } from '@engram/testkit/replies';
import { describe, expect, inject, it } from 'vitest';
import { AgentSession } from './agent-session.js';
import { type AgentSessionConfig, loadAgentSessionConfig } from './config.js';
import { mainAgentPolicy } from './permissions.js';

// The foreground's side of session memory and compaction (docs/design.md §5 `session-memory`, §7): when it enqueues
// note updates, how it compacts from the notes or with a model summary, reactive compaction, and resuming.

const COMPACT_MARK = 'Write a detailed summary of the conversation so far';

const scripted = useModelServer();
const { closer } = scripted;

function config(extra: Record<string, string> = {}): AgentSessionConfig {
  const home = mkdtempSync(join(tmpdir(), 'engram-compact-home-'));
  return loadAgentSessionConfig({
    HOME: home,
    ENGRAM_HOME: home,
    ENGRAM_NAMESPACE: uniquePrefix('compact'),
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: scripted.server.url,
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent',
    ...extra,
  });
}

async function open(cfg: AgentSessionConfig, sessionId?: string) {
  const memory = new MemoryQueue(cfg);
  closer.defer(() => memory.close());
  const cwd = join(cfg.engramHome, 'project');
  mkdirSync(cwd, { recursive: true });
  const session = await AgentSession.open(
    {
      config: cfg,
      client: createModelClient({ apiKey: 'test', baseURL: scripted.server.url, maxRetries: 0 }),
      memory,
    },
    { cwd, ...(sessionId ? { sessionId } : {}) },
  );
  return { session, memory };
}

/** A reply whose usage says the context now holds `tokens` input tokens. */
function at(tokens: number, r: ScriptedReply): ScriptedReply {
  return {
    ...r,
    usage: {
      input_tokens: tokens,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: 0,
      output_tokens: 10,
    },
  };
}

const isCompact = (r: RecordedRequest) => JSON.stringify(r.body.messages.at(-1) ?? '').includes(COMPACT_MARK);
const policy = (s: AgentSession) => mainAgentPolicy({ paths: s.paths, allowedTools: new Set() });

describe('session-memory trigger in the foreground', () => {
  it('enqueues note updates at exactly the replies the rule picks (init, growth, tool calls, natural break)', async () => {
    const cfg = config();
    const { session, memory } = await open(cfg);
    const glob = () => reply(toolUse('Glob', { pattern: '*' }));
    scripted.server.script(
      at(4_000, textReply('t1')), // below the 10k initialisation
      at(10_000, textReply('t2')), // initialises; 10k growth, natural break → update #1
      at(12_000, textReply('t3')), // growth 2,000
      at(14_999, textReply('t4')), // growth 4,999: one short
      at(15_000, textReply('t5')), // growth 5,000, natural break → update #2
      at(21_000, glob()), // growth 6,000 but 1 tool call and the reply has tools
      at(22_000, glob()), // 2 tool calls
      at(23_000, glob()), // 3 tool calls → update #3
      at(24_000, textReply('t6 done')), // growth 1,000
    );
    const updates: number[] = [];
    for (const p of ['one two', 'three four', 'five six', 'seven eight', 'nine ten', 'eleven twelve']) {
      updates.push(
        (await session.runTurn(p, { boundary: ATTENDED, canUseTool: policy(session) })).memory
          .sessionMemoryUpdates,
      );
    }
    expect(updates).toEqual([0, 1, 0, 0, 1, 1]);
    const jobs = await memory.producer.queue('session-memory').getJobs(['waiting']);
    // The context size is the reply's whole usage (input + output tokens), as the reference measures it.
    expect(jobs.map((j) => j.data.contextTokens).sort((a, b) => a - b)).toEqual([10_010, 15_010, 23_010]);
    const state = new SessionState(memory.engine.state, {
      transcriptDir: sanitizePath(session.paths.cwd),
      sessionId: session.sessionId,
    });
    expect((await state.sessionMemory()).initialized).toBe(true);

    // A later process resuming the session starts from the stored baseline (as if the worker had recorded the
    // last update at 23,010), not from zero: +1,990 tokens is no reason to update again.
    await state.updateSessionMemory({ tokensAtLastUpdate: 23_010 });
    const { session: resumed } = await open(cfg, session.sessionId);
    scripted.server.script(at(25_000, textReply('resumed')));
    const turn = await resumed.runTurn('resumed prompt here', {
      boundary: ATTENDED,
      canUseTool: policy(resumed),
    });
    expect(turn.memory.sessionMemoryUpdates).toBe(0);
  });
});

describe('compaction in the foreground', () => {
  const small = { ENGRAM_CONTEXT_WINDOW: '30000', ENGRAM_MAX_OUTPUT_TOKENS: '2000' }; // threshold 15,000

  /** Six turns with long answers (≈3,000 tokens each), the last reply reporting `tokens` of context. */
  async function fill(session: AgentSession, tokens: number) {
    for (let i = 1; i <= 6; i++) {
      const answer = `${i === 1 ? 'first answer about the FIRST-TOPIC ' : `answer ${i} `}${'x'.repeat(12_000)}`;
      scripted.server.script(at(i === 6 ? tokens : 2_000, textReply(answer)));
      await session.runTurn(`question number ${i}`, { boundary: ATTENDED, canUseTool: policy(session) });
    }
  }

  it('compacts from the session notes with no summarising model call when notes exist', async () => {
    const cfg = config(small);
    const { session, memory } = await open(cfg);
    await fill(session, 16_000);
    const notesPath = session.paths.sessionMemoryPath(session.sessionId);
    mkdirSync(dirname(notesPath), { recursive: true });
    writeFileSync(
      notesPath,
      DEFAULT_SESSION_MEMORY_TEMPLATE.replace(
        /(# Current State\n_[^\n]*_\n)/,
        '$1Working through the second topic; FIRST-TOPIC settled.\n',
      ),
    );
    const { chain } = await session.liveChain();
    const state = new SessionState(memory.engine.state, {
      transcriptDir: sanitizePath(session.paths.cwd),
      sessionId: session.sessionId,
    });
    await state.updateSessionMemory({ lastSummarizedUuid: chain.at(-1)!.uuid });
    scripted.server.script(textReply('third answer'));
    const turn = await session.runTurn('now the third question', {
      boundary: ATTENDED,
      canUseTool: policy(session),
    });
    expect(turn.compaction).toEqual({ via: 'session-memory', reactive: false });
    expect(scripted.server.messageRequests().filter(isCompact)).toHaveLength(0);
    // The summary replaces the old turns; a verbatim recent tail (≥10k tokens, ≥5 text messages) is kept.
    const last = JSON.stringify(scripted.server.messageRequests().at(-1)!.body.messages);
    expect(last).toContain('Working through the second topic');
    expect(last).not.toContain('first answer about the FIRST-TOPIC');
    expect(last).toContain('answer 6 ');

    // A resumed session (a new process) rebuilds from the boundary: the pre-compaction turns are gone.
    const { session: resumed } = await open(cfg, session.sessionId);
    scripted.server.script(textReply('fourth answer'));
    await resumed.runTurn('resumed question here', { boundary: ATTENDED, canUseTool: policy(resumed) });
    const resumedRequest = JSON.stringify(scripted.server.messageRequests().at(-1)!.body.messages);
    expect(resumedRequest).toContain('Working through the second topic');
    expect(resumedRequest).not.toContain('first answer about the FIRST-TOPIC');
    expect(resumedRequest).toContain('answer 6 ');
    expect(resumedRequest).toContain('third answer');
  });

  it('falls back to exactly one model-written summary when there are no notes', async () => {
    const { session } = await open(config(small));
    await fill(session, 16_000);
    scripted.server.route('compact', isCompact, [
      textReply('<summary>The user asked about two topics.</summary>'),
    ]);
    scripted.server.script(textReply('third answer'));
    const turn = await session.runTurn('now the third question', {
      boundary: ATTENDED,
      canUseTool: policy(session),
    });
    expect(turn.compaction).toEqual({ via: 'model', reactive: false });
    expect(scripted.server.messageRequests('compact')).toHaveLength(1);
    const after = JSON.stringify(scripted.server.messageRequests().at(-1)!.body.messages);
    expect(after).toContain('The user asked about two topics.');
    expect(after).not.toContain('first answer about the FIRST-TOPIC');
  });

  it('answers a prompt-too-long reply with exactly one reactive compaction and one retry', async () => {
    const { session } = await open(config());
    scripted.server.script(textReply('a'), textReply('b'));
    await session.runTurn('first question here', { boundary: ATTENDED, canUseTool: policy(session) });
    await session.runTurn('second question here', { boundary: ATTENDED, canUseTool: policy(session) });
    scripted.server.route('compact', isCompact, [textReply('<summary>Two questions were asked.</summary>')]);
    scripted.server.script(errors.promptTooLong(210_000, 200_000), textReply('answered after compaction'));
    const turn = await session.runTurn('third question here', {
      boundary: ATTENDED,
      canUseTool: policy(session),
    });
    expect(turn.answer).toBe('answered after compaction');
    expect(turn.compaction).toEqual({ via: 'model', reactive: true });
    // The leaf the turn reports (what extraction is enqueued for) is the transcript's last line, even after the
    // reactive compaction appended its boundary and copies mid-turn.
    const { entries } = await session.store.readAll();
    expect(turn.leaf).toEqual({ leafUuid: entries.at(-1)!.uuid, leafSeq: entries.length });
    expect(scripted.server.messageRequests('compact')).toHaveLength(1);
  });

  it('gives a clear error when the retry after the reactive compaction is still too long', async () => {
    const { session } = await open(config());
    scripted.server.script(textReply('a'));
    await session.runTurn('first question here', { boundary: ATTENDED, canUseTool: policy(session) });
    scripted.server.route('compact', isCompact, [textReply('<summary>One question.</summary>')]);
    scripted.server.script(errors.promptTooLong(210_000, 200_000), errors.promptTooLong(205_000, 200_000));
    const error = await session
      .runTurn('second question here', { boundary: ATTENDED, canUseTool: policy(session) })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ContextTooLongError);
    expect((error as Error).message).toContain('205,000 tokens, the maximum is 200,000');
    expect((error as ContextTooLongError).compacted).toBe(true);
    expect(scripted.server.messageRequests('compact')).toHaveLength(1);
  });
});
