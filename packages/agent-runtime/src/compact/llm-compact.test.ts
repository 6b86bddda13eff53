import { useModelServer } from '@engram/testkit/model-server-hooks';
import { comparePrefix, type MessagesRequestBody } from '@engram/testkit/prefix';
import { errors, textReply } from '@engram/testkit/replies';
import { describe, expect, it } from 'vitest';
import { clientFor } from '../fixtures.test-helpers.js';
import { PromptTooLongError } from '../model/errors.js';
import type { SystemBlock } from '../model/types.js';
import { defaultTools, toolDefinitions } from '../tools/registry.js';
import { renderChainToApiMessages } from '../transcript/render.js';
import { ChainBuilder } from './chain.test-helpers.js';
import { CompactionError } from './compaction.js';
import {
  compactWithModel,
  dropOldestRounds,
  formatCompactSummary,
  groupByApiRound,
  PTL_RETRY_MARKER,
} from './llm-compact.js';

const scripted = useModelServer({ requireScripted: true });

const system: SystemBlock[] = [{ type: 'text', text: 'You are Engram, a coding agent.' }];
const params = {
  model: 'claude-sonnet-5-5',
  system,
  tools: toolDefinitions(defaultTools()),
  maxTokens: 8_192,
  userContext: '# claudeMd\nUse pnpm.',
};

function conversation(turns: number, chars = 4_000) {
  const c = new ChainBuilder();
  for (let i = 0; i < turns; i++) {
    c.user(`turn ${i} ${'u'.repeat(chars)}`);
    const a = c.assistant({ text: `looking ${i}`, tools: 1 });
    c.results(a, chars);
    c.assistant({ text: `done ${i}` });
  }
  return c;
}

const SUMMARY_REPLY =
  '<analysis>scratch thoughts</analysis>\n<summary>\n1. Primary request: fix src/retry.ts\n</summary>';

describe('compactWithModel', () => {
  it('asks once, with the session prefix plus one instruction, and builds boundary + summary with nothing kept', async () => {
    const c = conversation(4);
    scripted.server.script(textReply(SUMMARY_REPLY));
    const result = await compactWithModel({
      client: clientFor(scripted.server, 0),
      params,
      entries: c.entries,
      transcriptPath: '/t/s.jsonl',
    });
    const [request] = scripted.server.messageRequests();
    expect(scripted.server.messageRequests()).toHaveLength(1);
    const expectedPrefix = renderChainToApiMessages(c.entries, { userContext: params.userContext });
    const cmp = comparePrefix(
      {
        model: params.model,
        system,
        tools: params.tools,
        messages: expectedPrefix,
      } as unknown as MessagesRequestBody,
      request!.body,
    );
    expect(cmp).toMatchObject({ sameModel: true, sameSystem: true, sameTools: true, aIsPrefixOfB: true });
    expect(JSON.stringify(request!.body.messages.at(-1))).toContain(
      'Write a detailed summary of the conversation so far',
    );
    expect(result).toMatchObject({ via: 'model', attempts: 1, kept: [] });
    const text = result.summary.message!.content as string;
    expect(text).toContain('1. Primary request: fix src/retry.ts');
    expect(text).not.toContain('scratch thoughts');
    expect(text).toContain('read the full transcript at /t/s.jsonl');
    expect(text).not.toContain('follow verbatim');
    expect(result.boundary.logicalParentUuid).toBe(c.entries.at(-1)!.uuid);
    expect(
      result.usage.inputTokens + result.usage.cacheReadInputTokens + result.usage.cacheCreationInputTokens,
    ).toBeGreaterThan(0);
  });

  it('drops the oldest API rounds to cover the reported gap when the compact request itself is too long, then succeeds', async () => {
    const c = conversation(10);
    const full = renderChainToApiMessages(c.entries);
    // A window that fits about half the conversation: the server answers with the real token counts.
    scripted.server.setContextWindow(Math.floor(JSON.stringify(full).length / 4 / 2));
    scripted.server.respond(() => textReply(SUMMARY_REPLY));
    const result = await compactWithModel({
      client: clientFor(scripted.server, 0),
      params,
      entries: c.entries,
    });
    const statuses = scripted.server.messageRequests().map((r) => r.response?.status);
    expect(statuses.at(-1)).toBe(200);
    expect(statuses.slice(0, -1).every((s) => s === 400)).toBe(true);
    expect(result.attempts).toBe(statuses.length);
    expect(result.attempts).toBeGreaterThan(1);
    expect(result.attempts).toBeLessThanOrEqual(4);
    const sizes = scripted.server.messageRequests().map((r) => r.body.messages.length);
    for (let i = 1; i < sizes.length; i++) expect(sizes[i]).toBeLessThan(sizes[i - 1]!);
    // The retry starts at an assistant reply, so it opens with the truncation marker.
    const retried = scripted.server.messageRequests().at(-1)!.body.messages;
    expect(JSON.stringify(retried.slice(0, 2))).toContain(PTL_RETRY_MARKER);
    // The boundary still points at the real leaf: nothing of the transcript is lost.
    expect(result.boundary.logicalParentUuid).toBe(c.entries.at(-1)!.uuid);
  });

  it('gives up after 3 retries with a typed error the user can act on', async () => {
    const c = conversation(10);
    scripted.server.respond(() => errors.promptTooLong(300_000, 200_000));
    const failure = await compactWithModel({
      client: clientFor(scripted.server, 0),
      params,
      entries: c.entries,
    }).catch((e) => e);
    expect(failure).toBeInstanceOf(CompactionError);
    expect(failure).toMatchObject({ code: 'COMPACTION_PROMPT_TOO_LONG' });
    expect(failure.message).toContain('Start a new session');
    expect(scripted.server.messageRequests()).toHaveLength(4);
  });
});

describe('PTL retry helpers', () => {
  it('groups entries by API round: a reply starts a round, its results and the next prompt follow it', () => {
    const c = conversation(2);
    const groups = groupByApiRound(c.entries);
    expect(groups.map((g) => g.map((e) => e.type))).toEqual([
      ['user'],
      ['assistant', 'user'],
      ['assistant', 'user'],
      ['assistant', 'user'],
      ['assistant'],
    ]);
  });

  it('drops enough rounds to cover the gap, else 20%, always keeping one', () => {
    const c = conversation(10, 4_000); // rounds of ~1,000 tokens
    const stamp = { sessionId: c.sessionId, cwd: c.cwd };
    const rounds = groupByApiRound(c.entries).length;
    const gap = dropOldestRounds(c.entries, new PromptTooLongError(203_500, 200_000, 'x'), stamp)!;
    expect(gap[0]!.message!.content).toBe(PTL_RETRY_MARKER);
    expect(gap[0]!.isMeta).toBe(true);
    const keptRounds = groupByApiRound(gap.slice(1)).length;
    expect(rounds - keptRounds).toBeGreaterThanOrEqual(3);
    expect(rounds - keptRounds).toBeLessThanOrEqual(5);
    const unknown = dropOldestRounds(c.entries, new PromptTooLongError(undefined, undefined, 'x'), stamp)!;
    expect(groupByApiRound(unknown.slice(1)).length).toBe(rounds - Math.floor(rounds * 0.2));
    const huge = dropOldestRounds(c.entries, new PromptTooLongError(10_000_000, 1, 'x'), stamp)!;
    expect(huge.filter((e) => e.type === 'assistant')).toHaveLength(1);
    const single = new ChainBuilder();
    single.user('only');
    expect(dropOldestRounds(single.entries, new PromptTooLongError(2, 1, 'x'), stamp)).toBeUndefined();
  });

  it('extracts the summary from the reply', () => {
    expect(formatCompactSummary(SUMMARY_REPLY)).toBe('1. Primary request: fix src/retry.ts');
    expect(formatCompactSummary('plain summary')).toBe('plain summary');
  });
});
