import { describe, expect, it } from 'vitest';
import { buildChain, ChainError, createCompactBoundary } from './chain.js';
import { type ChainEntry, createAssistantEntry, createUserEntry, type EntryStamp } from './entry.js';
import { renderChainToApiMessages } from './render.js';

const s = (parentUuid: string | null): EntryStamp => ({ sessionId: 's', cwd: '/repo', parentUuid });

function conversation(): ChainEntry[] {
  const u1 = createUserEntry(s(null), 'first question');
  const a1 = createAssistantEntry(s(u1.uuid), { content: [{ type: 'text', text: 'first answer' }] });
  const u2 = createUserEntry(s(a1.uuid), 'second question');
  const a2 = createAssistantEntry(s(u2.uuid), { content: [{ type: 'text', text: 'second answer' }] });
  return [u1, a1, u2, a2];
}

describe('buildChain', () => {
  it('walks from the newest leaf to the root', () => {
    const entries = conversation();
    const chain = buildChain(entries);
    expect(chain.entries.map((e) => e.uuid)).toEqual(entries.map((e) => e.uuid));
    expect(chain.live).toEqual(chain.entries);
    expect(chain.cycle).toBe(false);
  });

  it('follows only the branch of the given leaf', () => {
    const [u1, a1, u2, a2] = conversation();
    const branch = createUserEntry(s(a1!.uuid), 'edited second question');
    const chain = buildChain([u1!, a1!, u2!, a2!, branch], a2!.uuid);
    expect(chain.entries.map((e) => e.uuid)).toEqual([u1!.uuid, a1!.uuid, u2!.uuid, a2!.uuid]);
    expect(buildChain([u1!, a1!, u2!, a2!, branch]).entries.at(-1)!.uuid).toBe(branch.uuid);
  });

  it('stops at a cycle instead of looping', () => {
    const a = createUserEntry(s('b'), 'a', { uuid: 'a' });
    const b = createUserEntry(s('a'), 'b', { uuid: 'b' });
    const c = createUserEntry(s('b'), 'c', { uuid: 'c' });
    const chain = buildChain([a, b, c], 'c');
    expect(chain.cycle).toBe(true);
    expect(chain.entries.map((e) => e.uuid)).toEqual(['a', 'b', 'c']);
  });

  it('reports a parent that is missing from the file', () => {
    const orphan = createUserEntry(s('gone'), 'orphan');
    const chain = buildChain([orphan]);
    expect(chain.missingParent).toBe('gone');
    expect(chain.entries).toEqual([orphan]);
  });

  it('throws a typed error for an unknown leaf', () => {
    expect(() => buildChain(conversation(), 'nope')).toThrow(ChainError);
  });

  it('crosses a compact boundary: the full history stays reachable, the live part starts after it', () => {
    const before = conversation();
    const boundary = createCompactBoundary({
      sessionId: 's',
      cwd: '/repo',
      logicalParentUuid: before.at(-1)!.uuid,
      trigger: 'auto',
      preTokens: 150_000,
    });
    const summary = createUserEntry(s(boundary.uuid), 'Summary of the earlier conversation', {
      isCompactSummary: true,
    });
    const reply = createAssistantEntry(s(summary.uuid), { content: [{ type: 'text', text: 'continuing' }] });
    const next = createUserEntry(s(reply.uuid), 'third question');
    const entries = [...before, boundary, summary, reply, next];

    const chain = buildChain(entries);
    expect(boundary.parentUuid).toBeNull();
    expect(chain.boundary?.uuid).toBe(boundary.uuid);
    expect(chain.entries.map((e) => e.uuid)).toEqual(entries.map((e) => e.uuid));
    expect(chain.live.map((e) => e.uuid)).toEqual([summary.uuid, reply.uuid, next.uuid]);
    expect(renderChainToApiMessages(chain.live)).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Summary of the earlier conversation' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'continuing' }] },
      { role: 'user', content: [{ type: 'text', text: 'third question' }] },
    ]);
    const notCrossing = buildChain(entries, undefined, { crossBoundaries: false });
    expect(notCrossing.entries.map((e) => e.uuid)).toEqual([
      boundary.uuid,
      summary.uuid,
      reply.uuid,
      next.uuid,
    ]);
    expect(notCrossing.live).toEqual(chain.live);
  });

  it('uses the last of several compact boundaries for the live part', () => {
    const first = createUserEntry(s(null), 'one');
    const b1 = createCompactBoundary({
      sessionId: 's',
      cwd: '/r',
      logicalParentUuid: first.uuid,
      trigger: 'auto',
      preTokens: 1,
    });
    const sum1 = createUserEntry(s(b1.uuid), 'summary 1', { isCompactSummary: true });
    const b2 = createCompactBoundary({
      sessionId: 's',
      cwd: '/r',
      logicalParentUuid: sum1.uuid,
      trigger: 'manual',
      preTokens: 2,
    });
    const sum2 = createUserEntry(s(b2.uuid), 'summary 2', { isCompactSummary: true });
    const chain = buildChain([first, b1, sum1, b2, sum2]);
    expect(chain.entries).toHaveLength(5);
    expect(chain.live.map((e) => e.uuid)).toEqual([sum2.uuid]);
  });
});
