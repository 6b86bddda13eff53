import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAssistantEntry, createUserEntry } from '@engram/agent-runtime/transcript/entry';
import { MemoryQueue, type SessionRef } from '@engram/memory-client/memory-queue';
import {
  outboxPath,
  readOutbox,
  readSessionRecord,
  sessionRecordPath,
} from '@engram/memory-core/extraction/session-record';
import { engramPathsFor } from '@engram/memory-core/paths/memory-paths';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { describe, expect, inject, it } from 'vitest';
import { loadAgentConfig } from '../config.js';

// The session's durable record (memory-session.json, how the reconciliation sweep finds a session) is written
// off the turn's path: afterTurn does not wait for it. What relies on it still finds it: it is on disk once
// the queue is closed (a short-lived process never exits without it), and before any outbox that kept work
// (the sweep reaches an outbox only through the record).

function setup(redisUrl: string, recordedSessionsMax?: number) {
  const dir = mkdtempSync(join(tmpdir(), 'engram-session-record-'));
  const engramHome = join(dir, 'home');
  const cwd = join(dir, 'repo');
  mkdirSync(cwd, { recursive: true });
  const config = loadAgentConfig({
    HOME: dir,
    ENGRAM_HOME: engramHome,
    REDIS_URL: redisUrl,
    ENGRAM_NAMESPACE: uniquePrefix('session-record'),
    ENGRAM_ENQUEUE_TIMEOUT_MS: '1000',
    LOG_LEVEL: 'silent',
  });
  const paths = engramPathsFor({ engramHome, cwd, projectRoot: cwd });
  const memory = new MemoryQueue({ ...config, ...(recordedSessionsMax ? { recordedSessionsMax } : {}) });
  const sessionId = 'session-record-1';
  const stamp = { sessionId, cwd, parentUuid: null };
  const user = createUserEntry(stamp, 'Look at src/a.ts');
  const assistant = createAssistantEntry(
    { ...stamp, parentUuid: user.uuid },
    {
      id: 'msg_1',
      model: 'claude-sonnet-5-5',
      content: [{ type: 'text', text: 'Done.' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 1, output_tokens: 1 },
    },
  );
  const ref: SessionRef = { sessionId, paths };
  return {
    memory,
    paths,
    ref,
    entries: [user, assistant],
    leaf: { leafUuid: assistant.uuid, leafSeq: 2 },
  };
}

describe('the session record, off the turn path', () => {
  it('a queued turn: the record is on disk once the queue closes, with the session and its project', async () => {
    const { memory, ref, entries, leaf } = setup(inject('redisUrl'));
    const outcome = await memory.afterTurn(ref, entries, leaf);
    expect(outcome.status).toBe('queued');
    await memory.close();
    const dir = ref.paths.sessionDir(ref.sessionId);
    expect(await readSessionRecord(dir)).toMatchObject({ version: 1, sessionId: ref.sessionId });
    expect(existsSync(outboxPath(dir))).toBe(false);
  });

  it('a turn whose work is kept in the outbox: the record is on disk when afterTurn returns, before the outbox', async () => {
    const { memory, ref, entries, leaf } = setup('redis://127.0.0.1:1');
    const outcome = await memory.afterTurn(ref, entries, leaf);
    expect(outcome).toMatchObject({ status: 'not-queued', kept: true });
    const dir = ref.paths.sessionDir(ref.sessionId);
    // Both already there, without waiting for close(): the outbox write waited for the record.
    expect(existsSync(sessionRecordPath(dir))).toBe(true);
    expect((await readOutbox(dir)).map((i) => i.kind)).toEqual(['extract']);
    await memory.close();
    expect(await readSessionRecord(dir)).toMatchObject({ sessionId: ref.sessionId });
  });

  it('a long-lived process remembers a bounded number of sessions; a forgotten one writes its record again', async () => {
    const { memory, paths, entries, leaf } = setup(inject('redisUrl'), 2);
    const remembered = () => (memory as unknown as { recorded: Map<string, unknown> }).recorded;
    const turn = async (sessionId: string) => {
      expect((await memory.afterTurn({ sessionId, paths }, entries, leaf)).status).toBe('queued');
      await memory.sessionRecordsWritten();
      return sessionRecordPath(paths.sessionDir(sessionId));
    };
    const a = await turn('bounded-a');
    const b = await turn('bounded-b');
    await turn('bounded-a'); // a is now the most recently active
    const c = await turn('bounded-c'); // past the bound: b, the least recently active, is forgotten
    expect(remembered().size).toBe(2);
    for (const file of [a, b, c]) rmSync(file);
    // A remembered session does not write its record again; a forgotten one does, at its next turn.
    await turn('bounded-a');
    await turn('bounded-c');
    expect([existsSync(a), existsSync(c)]).toEqual([false, false]);
    await turn('bounded-b');
    expect(existsSync(b)).toBe(true);
    expect(await readSessionRecord(paths.sessionDir('bounded-b'))).toMatchObject({ sessionId: 'bounded-b' });
    expect(remembered().size).toBe(2);
    await memory.close();
  });
});
