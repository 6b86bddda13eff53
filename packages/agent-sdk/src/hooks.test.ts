import { existsSync, promises as fs, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type {
  HookCallback,
  PreCompactHookInput,
  SessionEndHookInput,
  StopHookInput,
  UserPromptSubmitHookInput,
} from '@anthropic-ai/claude-agent-sdk';
import { outboxPath, readOutbox } from '@engram/memory-core/extraction/session-record';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { startPrivateRedis } from '@engram/testkit/private-redis';
import { describe, expect, it } from 'vitest';
import { engramHooks } from './hooks.js';

// The hook callbacks invoked the way the Agent SDK invokes them (its own typed inputs, an AbortSignal), without
// the binary: with the queue down a callback answers at once with nothing for the model and parks the
// extraction in the session's outbox (what `engram hook` does); input that names a transcript outside the
// home is refused with a note and nothing is written; the positive control is the same session's own path.

const signal = new AbortController().signal;

async function session(claudeHome: string) {
  const repo = mkdtempSync(join(tmpdir(), 'engram-sdkhooks-repo-'));
  await fs.mkdir(join(repo, '.git'));
  const paths = await resolveEngramPaths({ engramHome: claudeHome, cwd: repo });
  const sessionId = crypto.randomUUID();
  await fs.mkdir(paths.transcriptDir, { recursive: true });
  const transcript = paths.transcriptPath(sessionId);
  const entry = (e: Record<string, unknown>) =>
    `${JSON.stringify({ parentUuid: null, isSidechain: false, cwd: repo, sessionId, version: '2.1.328', timestamp: new Date().toISOString(), ...e })}\n`;
  await fs.writeFile(
    transcript,
    entry({
      type: 'user',
      uuid: 'b0a1c3f2-0000-4000-8000-000000000001',
      message: { role: 'user', content: 'Remember that we deploy to region ams.' },
    }) +
      entry({
        type: 'assistant',
        uuid: 'b0a1c3f2-0000-4000-8000-000000000002',
        parentUuid: 'b0a1c3f2-0000-4000-8000-000000000001',
        message: {
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          model: 'claude-sonnet-5-5',
          content: [{ type: 'text', text: 'Noted.' }],
          stop_reason: 'end_turn',
          usage: { input_tokens: 1, output_tokens: 1 },
        },
      }),
  );
  const stop: StopHookInput = {
    session_id: sessionId,
    transcript_path: transcript,
    cwd: repo,
    hook_event_name: 'Stop',
    stop_hook_active: false,
  };
  return { repo, paths, sessionId, stop };
}

function only(callbacks: { hooks: HookCallback[] }[] | undefined): HookCallback {
  expect(callbacks).toHaveLength(1);
  return callbacks![0]!.hooks[0]!;
}

describe('engramHooks callbacks with the SDK typed inputs', () => {
  it('registers the five memory events, each with a timeout', () => {
    const engram = engramHooks({ engramHome: tmpdir(), queue: { url: 'redis://127.0.0.1:1' } });
    expect(Object.keys(engram.hooks).sort()).toEqual(
      ['PreCompact', 'SessionEnd', 'SessionStart', 'Stop', 'UserPromptSubmit'].sort(),
    );
    for (const matchers of Object.values(engram.hooks)) expect(matchers![0]!.timeout).toBeGreaterThan(0);
  });

  it('with the queue down: Stop answers fast with nothing and parks the extraction in the outbox', async () => {
    const closer = new Closer();
    const claudeHome = mkdtempSync(join(tmpdir(), 'engram-sdkhooks-down-'));
    const s = await session(claudeHome);
    const notes: string[] = [];
    // Port 1: nothing listens, the connection is refused at once.
    const engram = engramHooks({
      engramHome: claudeHome,
      queue: { url: 'redis://127.0.0.1:1', enqueueTimeoutMs: 500 },
      onNote: (_e, n) => notes.push(n),
    });
    closer.defer(() => engram.close());
    try {
      const started = Date.now();
      const out = await only(engram.hooks.Stop)(s.stop, undefined, { signal });
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(out).toEqual({});
      expect(notes.join('\n')).toMatch(/Kept in the session's outbox/);
      const items = await readOutbox(s.paths.sessionDir(s.sessionId));
      expect(items).toEqual([
        expect.objectContaining({
          kind: 'extract',
          payload: expect.objectContaining({ sessionId: s.sessionId, leafSeq: 2 }),
        }),
      ]);

      // UserPromptSubmit with the queue down: no context, no throw (recall is not durable: nothing parked).
      const prompt: UserPromptSubmitHookInput = {
        ...s.stop,
        hook_event_name: 'UserPromptSubmit',
        prompt: 'Which region do we deploy to, and why was it chosen?',
      };
      expect(await only(engram.hooks.UserPromptSubmit)(prompt, undefined, { signal })).toEqual({});
      expect(await readOutbox(s.paths.sessionDir(s.sessionId))).toHaveLength(1);

      // SessionEnd hands the session over: the last extraction and a forced session-memory update, both kept.
      const end: SessionEndHookInput = { ...s.stop, hook_event_name: 'SessionEnd', reason: 'other' };
      expect(await only(engram.hooks.SessionEnd)(end, undefined, { signal })).toEqual({});
      expect(notes.at(-1)).toMatch(
        /^engram SessionEnd: extraction not-queued.*session memory not-queued.*Kept in the session's outbox/,
      );
      const kinds = (await readOutbox(s.paths.sessionDir(s.sessionId))).map((i) => i.kind).sort();
      expect(kinds).toEqual(['extract', 'session-memory']);
    } finally {
      await closer.closeAll();
    }
  }, 30_000);

  it('a transcript outside the home or malformed input is refused with a note; nothing is written', async () => {
    const claudeHome = mkdtempSync(join(tmpdir(), 'engram-sdkhooks-bad-'));
    const s = await session(claudeHome);
    const notes: string[] = [];
    const engram = engramHooks({
      engramHome: claudeHome,
      queue: { url: 'redis://127.0.0.1:1', enqueueTimeoutMs: 500 },
      onNote: (_e, n) => notes.push(n),
    });
    try {
      const stop = only(engram.hooks.Stop);
      const elsewhere = { ...s.stop, transcript_path: '/etc/passwd' };
      expect(await stop(elsewhere, undefined, { signal })).toEqual({});
      expect(notes.at(-1)).toMatch(/not under ENGRAM_HOME/);
      const badId = { ...s.stop, session_id: '../../x' };
      expect(await stop(badId, undefined, { signal })).toEqual({});
      expect(notes.at(-1)).toMatch(/session_id/);
      const wrongEvent = { ...s.stop, hook_event_name: 'SessionEnd' } as unknown as StopHookInput;
      expect(await stop(wrongEvent, undefined, { signal })).toEqual({});
      expect(notes.at(-1)).toMatch(/not Stop/);
      expect(existsSync(s.paths.sessionDir(s.sessionId))).toBe(false);
      // Positive control: the session's own transcript gets past the check (and, the queue being down, is parked).
      await stop(s.stop, undefined, { signal });
      expect(existsSync(outboxPath(s.paths.sessionDir(s.sessionId)))).toBe(true);
    } finally {
      await engram.close();
    }
  }, 30_000);

  it('with the queue up: PreCompact and SessionEnd enqueue the extraction and a valid session-memory job', async () => {
    const closer = new Closer();
    try {
      const redis = await startPrivateRedis(closer, { prefix: 'engram-sdkhooks-up-' });
      const claudeHome = mkdtempSync(join(tmpdir(), 'engram-sdkhooks-up-'));
      const s = await session(claudeHome);
      const notes: string[] = [];
      const engram = engramHooks({
        engramHome: claudeHome,
        queue: { url: redis.url, namespace: uniquePrefix('sdkhooks') },
        onNote: (_e, n) => notes.push(n),
      });
      closer.defer(() => engram.close());
      const compact: PreCompactHookInput = {
        ...s.stop,
        hook_event_name: 'PreCompact',
        trigger: 'auto',
        custom_instructions: null,
      };
      expect(await only(engram.hooks.PreCompact)(compact, undefined, { signal })).toEqual({});
      expect(notes.at(-1)).toMatch(
        /^engram PreCompact: extraction queued \(job .+\); session memory queued \(job .+\)$/,
      );
      const jobId = /session memory queued \(job ([^)]+)\)/.exec(notes.at(-1)!)![1]!;
      const job = await engram.memory.producer.queue('session-memory').getJob(jobId);
      expect(job?.data).toMatchObject({ sessionId: s.sessionId, leafSeq: 2, thresholds: { initTokens: 1 } });
      expect(existsSync(outboxPath(s.paths.sessionDir(s.sessionId)))).toBe(false);

      // No recall worker runs: UserPromptSubmit would wait its 4 s; an aborted query stops the wait at once.
      const aborter = new AbortController();
      const prompt: UserPromptSubmitHookInput = {
        ...s.stop,
        hook_event_name: 'UserPromptSubmit',
        prompt: 'Which region do we deploy to, and why was it chosen?',
      };
      const started = Date.now();
      setTimeout(() => aborter.abort(), 100);
      expect(
        await only(engram.hooks.UserPromptSubmit)(prompt, undefined, { signal: aborter.signal }),
      ).toEqual({});
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(notes.at(-1)).toMatch(/aborted/);
    } finally {
      await closer.closeAll();
    }
  }, 30_000);
});
