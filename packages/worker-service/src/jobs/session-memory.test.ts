import { existsSync, promises as fs, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { sessionMemoryWaitPlan } from '@engram/agent-runtime/compact/auto-compact';
import { DEFAULT_SESSION_MEMORY_TEMPLATE } from '@engram/memory-core/session-memory/template';
import type { SessionMemoryResult } from '@engram/queue/jobs/session-memory';
import { JobProducer } from '@engram/queue/producer';
import type { RecordedRequest } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { comparePrefix } from '@engram/testkit/prefix';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob } from '@engram/testkit/wait';
import type { Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import type { WorkerService } from '../service.js';
import { lastUserText } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';
import { createSmSession, isSessionMemoryRequest, type SmSession } from './session-memory.test-helpers.js';

const scripted = useModelServer({ requireScripted: true });
const { closer } = scripted;

async function startService(engramHome: string): Promise<{ service: WorkerService; producer: JobProducer }> {
  const service = await startTestWorkerService({
    modelUrl: scripted.server.url,
    engramHome,
    queues: 'session-memory',
    closer,
  });
  const producer = closer.add(
    new JobProducer(service.engine, {
      config: { 'session-memory': { backoff: { type: 'exponential', delayMs: 50, jitter: 0 } } },
    }),
  );
  return { service, producer };
}

function newHome(): string {
  return mkdtempSync(join(tmpdir(), 'engram-home-'));
}

function waitForJob(producer: JobProducer, jobId: string, timeoutMs = 15_000): Promise<Job> {
  return waitForFinishedJob(producer.queue('session-memory'), jobId, timeoutMs);
}

const usage = (total: number) => ({
  usage: {
    input_tokens: total,
    output_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
  },
});
const WORKLOG = '_A terse, step-by-step log of what was done_';

/** The fork: one Edit adding a worklog line (plus optional extra calls), then a closing text reply. */
function notesScript(
  sm: () => SmSession,
  opts: {
    extra?: () => ReturnType<typeof toolUse>[];
    edit?: (n: number, current: string) => Record<string, unknown>;
  } = {},
) {
  const first: RecordedRequest[] = [];
  scripted.server.route(
    'notes',
    (r) => isSessionMemoryRequest(r.body),
    async (r): Promise<ScriptStep> => {
      if (!lastUserText(r.body).includes('<current_notes_content>')) return textReply('Notes updated.');
      first.push(r);
      const n = first.length;
      const current = await fs.readFile(sm().summaryPath, 'utf8');
      const edit = opts.edit?.(n, current) ?? {
        old_string: WORKLOG,
        new_string: `${WORKLOG}\n- update ${n}`,
      };
      return reply(
        text('Updating the notes.'),
        ...(opts.extra?.() ?? []),
        toolUse('Edit', { file_path: sm().summaryPath, ...edit }),
      );
    },
  );
  return first;
}

describe('session-memory job', () => {
  it('is enqueued at the right replies only, and the worker re-gates each request against the last update', async () => {
    const engramHome = newHome();
    const { service, producer } = await startService(engramHome);
    const results: Record<number, SessionMemoryResult> = {};
    const markersAfter: Record<number, Awaited<ReturnType<SmSession['state']['sessionMemory']>>> = {};
    let s!: SmSession;
    s = createSmSession(scripted.server, {
      engine: service.engine,
      producer,
      engramHome,
      onEnqueued: async (jobId, rec) => {
        const job = await waitForJob(producer, jobId);
        results[rec.index] = job.returnvalue as SessionMemoryResult;
        markersAfter[rec.index] = await s.state.sessionMemory();
      },
    });
    writeFileSync(join(s.cwd, 'app.ts'), 'export const answer = 42;\n');
    const read = () => toolUse('Read', { file_path: join(s.cwd, 'app.ts') });
    // r0..r10 with exact context sizes (the reply's usage is the whole context right after it).
    scripted.server.route('parent', (r) => !isSessionMemoryRequest(r.body), [
      textReply('r0', usage(4_000)),
      { ...reply(read()), ...usage(9_999) }, // r1: not initialised yet
      { ...reply(read()), ...usage(10_000) }, // r2: initialises; only 2 tool calls, mid loop → no update
      textReply('r3', usage(10_500)), // natural break → update 1
      { ...reply(read()), ...usage(14_000) }, // r4: growth 3,500
      { ...reply(read()), ...usage(15_499) }, // r5: growth 4,999
      { ...reply(read()), ...usage(15_500) }, // r6: growth 5,000 and 3 tool calls → update 2 (tools pending)
      { ...reply(read()), ...usage(21_000) }, // r7: growth 5,500 but 1 tool call
      { ...reply(read()), ...usage(21_100) }, // r8: 2 tool calls
      textReply('r9', usage(22_000)), // natural break, growth 6,500 → update 3
      textReply('r10', usage(24_000)), // growth 2,000
    ]);
    const forkFirst = notesScript(() => s);

    await s.turn('turn A: say hi');
    await s.turn('turn B: read app.ts twice');
    await s.turn('turn C: keep reading');
    await s.turn('turn D: summarise');

    expect(s.replies.map((r) => r.contextTokens)).toEqual([
      4_000, 9_999, 10_000, 10_500, 14_000, 15_499, 15_500, 21_000, 21_100, 22_000, 24_000,
    ]);
    expect(s.replies.filter((r) => r.enqueued).map((r) => r.index)).toEqual([3, 6, 9]);
    expect(Object.keys(results).map(Number)).toEqual([3, 6, 9]);
    for (const i of [3, 6, 9]) expect(results[i]).toMatchObject({ outcome: 'updated', deniedToolCalls: 0 });
    expect(forkFirst).toHaveLength(3);

    // "Last summarised" moves only where no tool call was pending (r3, r9), never to r6.
    const r = s.replies;
    expect(markersAfter[3]).toMatchObject({
      tokensAtLastUpdate: 10_500,
      lastSummarizedUuid: r[3]!.uuid,
      lastUpdateSeq: r[3]!.seq,
    });
    expect(markersAfter[6]).toMatchObject({
      tokensAtLastUpdate: 15_500,
      lastSummarizedUuid: r[3]!.uuid,
      lastUpdateSeq: r[6]!.seq,
    });
    expect(results[6]!.lastSummarizedUuid).toBeUndefined();
    expect(markersAfter[9]).toMatchObject({
      tokensAtLastUpdate: 22_000,
      lastSummarizedUuid: r[9]!.uuid,
      initialized: true,
    });
    expect(markersAfter[9]!.finishedAtMs).toBeGreaterThanOrEqual(markersAfter[9]!.startedAtMs!);

    // Requests the foreground would not have made are re-gated by the worker: not due, or stale.
    const notDue = await waitForJob(
      producer,
      (await producer.enqueue('session-memory', s.payload(r[10]!, 24_000))).jobId,
    );
    expect(notDue.returnvalue).toMatchObject({ outcome: 'skipped-not-due', contextTokens: 24_000 });
    const stale = await waitForJob(
      producer,
      (await producer.enqueue('session-memory', s.payload(r[4]!, 14_000))).jobId,
    );
    expect(stale.returnvalue).toMatchObject({ outcome: 'skipped-stale' });
    expect(forkFirst).toHaveLength(3);

    // The notes were edited three times, in place.
    const notes = await fs.readFile(s.summaryPath, 'utf8');
    expect(notes).toBe(
      DEFAULT_SESSION_MEMORY_TEMPLATE.replace(WORKLOG, `${WORKLOG}\n- update 3\n- update 2\n- update 1`),
    );
    expect(statSync(s.summaryPath).mode & 0o777).toBe(0o600);
    expect(statSync(dirname(s.summaryPath)).mode & 0o777).toBe(0o700);

    // The fork repeats the parent's request and adds the reply it was triggered by plus the instruction.
    const parentForR3 = scripted.server.messageRequests('parent')[3]!;
    const cmp = comparePrefix(parentForR3.body, forkFirst[0]!.body);
    expect(cmp).toMatchObject({ sameModel: true, sameSystem: true, sameTools: true, aIsPrefixOfB: true });
    expect(forkFirst[0]!.body.messages.length).toBe(parentForR3.body.messages.length + 2);
    expect(lastUserText(forkFirst[0]!.body)).toContain(`The notes file is ${s.summaryPath}.`);
  });
});

describe('session-memory job safety', () => {
  const EVERY_REPLY = { initTokens: 1, minGrowthTokens: 1, toolCalls: 1 };

  it('runs one update per session at a time, publishing when it started for the compactor, and re-gates the next', async () => {
    const engramHome = newHome();
    const { service, producer } = await startService(engramHome);
    const jobs: string[] = [];
    const s = createSmSession(scripted.server, {
      engine: service.engine,
      producer,
      engramHome,
      thresholds: EVERY_REPLY,
      onEnqueued: (jobId) => void jobs.push(jobId),
    });
    scripted.server.route(
      'parent',
      (r) => !isSessionMemoryRequest(r.body),
      (r) => textReply(`ok ${r.index}`),
    );
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const firstJobStateAtSecondFork: string[] = [];
    const forkFirst: RecordedRequest[] = [];
    scripted.server.route(
      'notes',
      (r) => isSessionMemoryRequest(r.body),
      async (r): Promise<ScriptStep> => {
        if (!lastUserText(r.body).includes('<current_notes_content>')) return textReply('Notes updated.');
        forkFirst.push(r);
        const n = forkFirst.length;
        if (n === 1) await gate;
        else {
          const first = await producer.queue('session-memory').getJob(jobs[0]!);
          firstJobStateAtSecondFork.push((await first?.getState()) ?? 'missing');
        }
        return reply(
          toolUse('Edit', {
            file_path: s.summaryPath,
            old_string: WORKLOG,
            new_string: `${WORKLOG}\n- gated ${n}`,
          }),
        );
      },
    );

    await s.turn('first turn');
    await waitUntil(() => forkFirst.length === 1, 'first fork running');
    const during = await s.state.sessionMemory();
    expect(sessionMemoryWaitPlan(during, Date.now()).wait).toBe(true);

    await s.turn('second turn');
    // A replica re-sending the first request: stale once the first update has landed.
    const duplicate = (
      await producer.enqueue('session-memory', s.payload(s.replies[0]!, s.replies[0]!.contextTokens))
    ).jobId;
    await new Promise((r) => setTimeout(r, 300));
    expect(forkFirst).toHaveLength(1); // the second request waits for the lease
    release();
    const [a, b, dup] = [
      await waitForJob(producer, jobs[0]!),
      await waitForJob(producer, jobs[1]!),
      await waitForJob(producer, duplicate),
    ];
    expect(a.returnvalue).toMatchObject({ outcome: 'updated' });
    expect(b.returnvalue).toMatchObject({ outcome: 'updated' });
    expect(dup.returnvalue).toMatchObject({ outcome: 'skipped-stale' });
    expect(firstJobStateAtSecondFork).toEqual(['completed']);
    expect(sessionMemoryWaitPlan(await s.state.sessionMemory(), Date.now())).toEqual({
      wait: false,
      reason: 'idle',
    });
    expect(await fs.readFile(s.summaryPath, 'utf8')).toContain(`${WORKLOG}\n- gated 2\n- gated 1`);
  });

  it('changes the notes only through Edit: Write, Read and Bash on the notes are denied', async () => {
    const engramHome = newHome();
    const { service, producer } = await startService(engramHome);
    const results: SessionMemoryResult[] = [];
    const s: SmSession = createSmSession(scripted.server, {
      engine: service.engine,
      producer,
      engramHome,
      thresholds: EVERY_REPLY,
      onEnqueued: async (jobId) => void results.push((await waitForJob(producer, jobId)).returnvalue),
    });
    scripted.server.route(
      'parent',
      (r) => !isSessionMemoryRequest(r.body),
      (r) => textReply(`ok ${r.index}`),
    );
    notesScript(() => s, {
      extra: () => [
        toolUse('Write', { file_path: s.summaryPath, content: 'overwritten' }),
        toolUse('Read', { file_path: s.summaryPath }),
        toolUse('Bash', { command: `cat ${s.summaryPath}` }),
      ],
    });
    await s.turn('hello');
    expect(results).toEqual([expect.objectContaining({ outcome: 'updated', deniedToolCalls: 3 })]);
    const notes = await fs.readFile(s.summaryPath, 'utf8');
    expect(notes).toContain(`${WORKLOG}\n- update 1`);
    expect(notes).not.toContain('overwritten');
    const toolResults = JSON.stringify(scripted.server.messageRequests('notes').at(-1)!.body.messages.at(-1));
    expect(toolResults).toContain('Only Edit on the session notes file');
  });

  it('keeps the old notes and fails the job with the reason when the update empties them, resets them to the template, or drops a header', async () => {
    const engramHome = newHome();
    const { service, producer } = await startService(engramHome);
    const jobs: Job[] = [];
    const s: SmSession = createSmSession(scripted.server, {
      engine: service.engine,
      producer,
      engramHome,
      thresholds: EVERY_REPLY,
      onEnqueued: async (jobId) => void jobs.push(await waitForJob(producer, jobId)),
    });
    scripted.server.route(
      'parent',
      (r) => !isSessionMemoryRequest(r.body),
      (r) => textReply(`ok ${r.index}`),
    );
    notesScript(() => s, {
      edit: (n, current) => {
        if (n === 1) return { old_string: WORKLOG, new_string: `${WORKLOG}\n- real work` };
        if (n === 2) return { old_string: current, new_string: '' };
        if (n === 3) return { old_string: current, new_string: DEFAULT_SESSION_MEMORY_TEMPLATE };
        return { old_string: '# Learnings\n', new_string: '' };
      },
    });
    await s.turn('first');
    const good = await fs.readFile(s.summaryPath, 'utf8');
    const markers = await s.state.sessionMemory();
    expect(good).toContain('- real work');
    for (const [turn, code] of [
      ['second', 'SUMMARY_EMPTY'],
      ['third', 'SUMMARY_TEMPLATE_ONLY'],
      ['fourth', 'SUMMARY_LOST_HEADERS'],
    ] as const) {
      await s.turn(turn);
      const job = jobs.at(-1)!;
      expect(await job.getState()).toBe('failed');
      expect(job.failedReason).toContain(code);
      expect(job.attemptsMade).toBe(1);
      expect(await fs.readFile(s.summaryPath, 'utf8')).toBe(good);
    }
    expect(jobs[3]!.failedReason).toContain('"# Learnings"');
    const after = await s.state.sessionMemory();
    // Nothing about the rejected updates was recorded as done, and nobody is told to wait for them.
    expect(after.tokensAtLastUpdate).toBe(markers.tokensAtLastUpdate);
    expect(after.lastUpdateSeq).toBe(markers.lastUpdateSeq);
    expect(sessionMemoryWaitPlan(after, Date.now()).wait).toBe(false);
    expect(existsSync(join(dirname(s.summaryPath), 'summary.md'))).toBe(true);
  });
});

async function waitUntil(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}
