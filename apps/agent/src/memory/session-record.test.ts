import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
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

function setup(redisUrl: string) {
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
  const memory = new MemoryQueue(config);
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
  return { memory, ref, entries: [user, assistant], leaf: { leafUuid: assistant.uuid, leafSeq: 2 } };
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
});
