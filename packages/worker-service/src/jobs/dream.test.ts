import { existsSync, promises as fs, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONSOLIDATION_PROMPT_TITLE } from '@engram/memory-core/dream/consolidation-prompt';
import { CONSOLIDATE_LOCK_FILE } from '@engram/memory-core/dream/lock-file';
import { listSnapshots } from '@engram/memory-core/dream/snapshot';
import { parseMemoryFile } from '@engram/memory-core/memdir/frontmatter';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import type { DreamPayload, DreamProgress, DreamResult } from '@engram/queue/jobs/dream';
import { JobProducer } from '@engram/queue/producer';
import {
  lastConsolidatedAt,
  readConsolidationState,
  recordConsolidatedAt,
  tryAcquireConsolidation,
} from '@engram/queue/state/consolidation-lock';
import { ProjectChanges, projectChangesScope } from '@engram/queue/state/project-changes';
import type { RecordedRequest } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { comparePrefix } from '@engram/testkit/prefix';
import { errors, reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitForFinishedJob } from '@engram/testkit/wait';
import { describe, expect, it } from 'vitest';
import type { WorkerService } from '../service.js';
import { createForeground, type ForegroundSession } from '../testing/foreground.test-helpers.js';
import { startTestWorkerService } from '../testing/service.test-helpers.js';
import { isDreamRequest, seedDreamMemories, seedSessions } from './dream.test-helpers.js';

const scripted = useModelServer();
const { closer } = scripted;

const DAY = 24 * 3_600_000;

async function startService(engramHome: string): Promise<WorkerService> {
  return startTestWorkerService({ modelUrl: scripted.server.url, engramHome, queues: 'dream', closer });
}

function producerFor(service: WorkerService) {
  return closer.add(
    new JobProducer(service.engine, {
      config: { dream: { backoff: { type: 'exponential', delayMs: 50, jitter: 0 } } },
    }),
  );
}

function waitForJob(service: WorkerService, jobId: string, timeoutMs = 15_000) {
  return waitForFinishedJob(producerFor(service).queue('dream'), jobId, timeoutMs);
}

function payloadFor(fg: ForegroundSession, extra: Partial<DreamPayload> = {}): DreamPayload {
  return {
    projectDir: sanitizePath(fg.cwd),
    transcriptDir: sanitizePath(fg.cwd),
    sessionIds: [],
    force: false,
    requestedAt: new Date().toISOString(),
    ...extra,
  };
}

const MERGED = [
  '---',
  'name: Use pnpm',
  'description: The user wants pnpm, never npm, for installs and scripts',
  'type: feedback',
  'merged_from: [feedback_pnpm_again.md]',
  '---',
  'Always use pnpm in this repository (stated 2026-11-20 and again 2026-11-28).',
  '',
  '**Why:** npm breaks the workspace links.',
  '**How to apply:** pnpm install / pnpm test, never npm.',
  '',
].join('\n');

describe('dream end to end', () => {
  it('merges two duplicate memories into one, rewrites the index, reports progress phases and a receipt', async () => {
    const fg = createForeground(scripted.server);
    scripted.server.route('parent', (r) => !isDreamRequest(r.body), [textReply('Done.')]);
    const leaf = await fg.turn('please run the tests with pnpm');
    const mem = fg.paths.memoryDir;
    const seeded = seedDreamMemories(mem);
    const prior = Date.now() - 3 * DAY;

    const newIndex =
      '- [Use pnpm](feedback_pnpm.md) — pnpm, never npm\n- [Deploy freeze](project_deploy.md) — no Friday deploys\n- [Role](user_role.md) — Go backend dev\n';
    scripted.server.route('dream', (r) => isDreamRequest(r.body), [
      reply(
        text('Orienting.'),
        toolUse('Read', { file_path: join(mem, 'MEMORY.md') }),
        toolUse('Read', { file_path: join(mem, 'feedback_pnpm.md') }),
        toolUse('Read', { file_path: join(mem, 'feedback_pnpm_again.md') }),
      ),
      reply(toolUse('Grep', { pattern: 'pnpm', path: fg.paths.transcriptDir, glob: '*.jsonl' })),
      reply(
        toolUse('Write', { file_path: join(mem, 'feedback_pnpm.md'), content: MERGED }),
        toolUse('Write', { file_path: join(mem, 'feedback_pnpm_again.md'), content: '' }),
        toolUse('Bash', { command: `rm ${join(mem, 'user_role.md')}` }),
        toolUse('Write', { file_path: join(mem, '.history', 'tampered.md'), content: 'x' }),
      ),
      reply(toolUse('Read', { file_path: join(mem, 'MEMORY.md') })),
      reply(toolUse('Write', { file_path: join(mem, 'MEMORY.md'), content: newIndex })),
      textReply('Merged the two pnpm memories and rebuilt the index.'),
    ]);

    const service = await startService(fg.engramHome);
    await recordConsolidatedAt(service.engine.state, sanitizePath(fg.cwd), prior);
    const events = closer.add(service.engine.createQueueEvents('memory-dream'));
    const progress: DreamProgress[] = [];
    events.on('progress', ({ data }) => {
      progress.push(data as DreamProgress);
    });
    await events.waitUntilReady();

    const receipt = await producerFor(service).enqueue(
      'dream',
      payloadFor(fg, { force: true, sessionId: fg.sessionId, leafUuid: leaf.leafUuid }),
    );
    const job = await waitForJob(service, receipt.jobId);
    expect(job.failedReason).toBeUndefined();
    const result = job.returnvalue as DreamResult;
    expect(result).toMatchObject({
      outcome: 'consolidated',
      forkedFrom: 'session',
      files: { created: [], updated: ['feedback_pnpm.md'], deleted: ['feedback_pnpm_again.md'] },
      indexLines: { before: 4, after: 3 },
      turns: 6,
      // `rm` (not read-only) and a write into the snapshots are denied.
      deniedToolCalls: 2,
      previousConsolidatedAt: new Date(prior).toISOString(),
    });

    // Every session of the project hears of the changed files (the foreground's notice reads this feed).
    const feed = new ProjectChanges(
      service.engine.state,
      projectChangesScope({ projectDir: sanitizePath(fg.cwd) }),
    );
    expect((await feed.since({})).changes).toMatchObject([
      {
        source: 'dream',
        memories: [
          { path: 'feedback_pnpm.md', action: 'updated' },
          { path: 'feedback_pnpm_again.md', action: 'deleted' },
        ],
      },
    ]);

    // Files: the duplicate is gone, the survivor holds the merged content, the index points at the three left.
    expect(
      readdirSync(mem)
        .filter((f) => f.endsWith('.md'))
        .sort(),
    ).toEqual(['MEMORY.md', 'feedback_pnpm.md', 'project_deploy.md', 'user_role.md']);
    expect(parseMemoryFile(await fs.readFile(join(mem, 'feedback_pnpm.md'), 'utf8'), 'x').name).toBe(
      'Use pnpm',
    );
    const index = await fs.readFile(join(mem, 'MEMORY.md'), 'utf8');
    expect(parseIndexEntries(index).map((e) => e.file)).toEqual([
      'feedback_pnpm.md',
      'project_deploy.md',
      'user_role.md',
    ]);
    // The untouched memory is byte-identical.
    expect(await fs.readFile(join(mem, 'project_deploy.md'), 'utf8')).toBe(seeded['project_deploy.md']);

    // The fork repeated the parent's request (cache sharing) and carried the consolidation prompt.
    const forkRequests: RecordedRequest[] = scripted.server.messageRequests('dream');
    const parentLast = scripted.server.messageRequests('parent').at(-1)!;
    expect(comparePrefix(parentLast.body, forkRequests[0]!.body)).toMatchObject({
      sameModel: true,
      sameSystem: true,
      sameTools: true,
      aIsPrefixOfB: true,
    });
    expect(JSON.stringify(forkRequests[0]!.body.messages.at(-1))).toContain(
      '## Phase 4 — Prune and re-index',
    );

    // Progress advanced through the phases in order, ending with done.
    await waitUntil(() => progress.at(-1)?.phase === 'done', 'final progress event');
    const phases = progress.map((p) => p.phase).filter((p, i, all) => all[i - 1] !== p);
    expect(phases).toEqual(['orient', 'gather', 'consolidate', 'prune', 'done']);
    expect(progress.at(-1)?.filesTouched).toEqual([
      'feedback_pnpm.md',
      'feedback_pnpm_again.md',
      'MEMORY.md',
    ]);
    expect(progress.at(-1)?.snapshotId).toBe(result.snapshotId);

    // Lock: "last consolidated at" is this run's start, free again; the Claude Code lock file agrees.
    const state = await readConsolidationState(service.engine.state, sanitizePath(fg.cwd));
    expect(state.running).toBeUndefined();
    expect(state.lastConsolidatedAtMs).toBe(Date.parse(result.consolidatedAt!));
    expect(Math.round(statSync(join(mem, CONSOLIDATE_LOCK_FILE)).mtimeMs)).toBe(
      Date.parse(result.consolidatedAt!),
    );
    // The pre-run snapshot holds the deleted duplicate, and is not a memory.
    const [snapshot] = await listSnapshots(mem);
    expect(snapshot?.id).toBe(result.snapshotId);
    expect(snapshot?.files.map((f) => f.path)).toContain('feedback_pnpm_again.md');
    expect(existsSync(join(mem, '.history', 'tampered.md'))).toBe(false);
  });

  it('restores the snapshot and fails the job with the reason when a run deletes every memory', async () => {
    const fg = createForeground(scripted.server);
    const mem = fg.paths.memoryDir;
    const seeded = seedDreamMemories(mem);
    const lockFile = join(mem, CONSOLIDATE_LOCK_FILE);
    const prior = Math.floor((Date.now() - 2 * DAY) / 1000) * 1000;
    writeFileSync(lockFile, '');
    utimesSync(lockFile, new Date(prior), new Date(prior));

    const files = Object.keys(seeded);
    scripted.server.route('dream', (r) => isDreamRequest(r.body), [
      reply(...files.map((f) => toolUse('Read', { file_path: join(mem, f) }))),
      reply(...files.map((f) => toolUse('Write', { file_path: join(mem, f), content: '' }))),
      textReply('Cleaned everything up.'),
    ]);
    const service = await startService(fg.engramHome);
    // No record in the store: the Claude Code lock file's mtime is imported as "last consolidated at".
    const receipt = await producerFor(service).enqueue('dream', payloadFor(fg, { force: true }));
    const job = await waitForJob(service, receipt.jobId);

    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(1);
    expect(job.failedReason).toContain('DREAM_TOO_MANY_DELETED');
    expect(job.failedReason).toContain('deleted 4 of 4 memories (100%, limit 50%)');
    for (const [file, content] of Object.entries(seeded)) {
      expect(await fs.readFile(join(mem, file), 'utf8')).toBe(content);
    }
    // Rolled back: the store and the lock file show the prior time again.
    expect(await lastConsolidatedAt(service.engine.state, sanitizePath(fg.cwd))).toBe(prior);
    expect(statSync(lockFile).mtimeMs).toBe(prior);
    // The minimal-context fork: memory prompt as system, the consolidation prompt as the only message.
    const first = scripted.server.messageRequests('dream')[0]!.body;
    expect(JSON.stringify(first.system)).toContain('# auto memory');
    expect(first.messages).toHaveLength(1);
    expect(JSON.stringify(first.messages[0])).toContain(CONSOLIDATION_PROMPT_TITLE);
    // The refused result is kept as a snapshot next to the pre-run one.
    const snaps = await listSnapshots(mem);
    expect(snaps).toHaveLength(2);
    expect(snaps[0]?.label).toContain('refused dream');
  });

  it('restores the snapshot when the fork fails, and a retry completes', async () => {
    const fg = createForeground(scripted.server);
    const mem = fg.paths.memoryDir;
    const seeded = seedDreamMemories(mem);
    let firsts = 0;
    scripted.server.route(
      'dream',
      (r) => isDreamRequest(r.body),
      (r) => {
        const turn = r.body.messages.length;
        if (turn === 1) {
          firsts++;
          return firsts === 1
            ? reply(toolUse('Read', { file_path: join(mem, 'user_role.md') }))
            : textReply('Nothing needs to change.');
        }
        if (turn === 3)
          return reply(toolUse('Write', { file_path: join(mem, 'user_role.md'), content: 'half' }));
        return errors.overloaded();
      },
    );
    const service = await startService(fg.engramHome);
    const receipt = await producerFor(service).enqueue('dream', payloadFor(fg, { force: true }));
    const job = await waitForJob(service, receipt.jobId);
    expect(await job.getState()).toBe('completed');
    expect(job.attemptsMade).toBe(2);
    expect((job.returnvalue as DreamResult).files).toEqual({ created: [], updated: [], deleted: [] });
    // The first attempt's half-done write was undone before the retry.
    expect(await fs.readFile(join(mem, 'user_role.md'), 'utf8')).toBe(seeded['user_role.md']);
  });

  it('skips when another consolidation holds the lock, or when the gate is shut', async () => {
    const fg = createForeground(scripted.server);
    seedDreamMemories(fg.paths.memoryDir);
    scripted.server.route('dream', (r) => isDreamRequest(r.body), [textReply('should never run')]);
    const service = await startService(fg.engramHome);
    const project = sanitizePath(fg.cwd);
    const producer = producerFor(service);

    const other = await tryAcquireConsolidation(service.engine.state, project, 'other-machine', {
      ttlMs: 30_000,
    });
    const locked = await waitForJob(
      service,
      (await producer.enqueue('dream', payloadFor(fg, { force: true }))).jobId,
    );
    expect(locked.returnvalue).toMatchObject({ outcome: 'skipped-locked' });
    await other!.release({ success: true });

    // The other machine's run just finished: the time gate is shut.
    const recent = await waitForJob(service, (await producer.enqueue('dream', payloadFor(fg))).jobId);
    expect(recent.returnvalue).toMatchObject({ outcome: 'skipped-not-due' });
    expect((recent.returnvalue as DreamResult).reason).toMatch(/h ago/);

    // Two days ago, but only 4 other sessions touched since (the triggering one does not count).
    await recordConsolidatedAt(service.engine.state, project, Date.now() - 2 * DAY);
    seedSessions(fg.paths.transcriptDir, ['a1', 'a2', 'a3', 'a4', 'trigger'], Date.now() - DAY);
    const few = await waitForJob(
      service,
      (await producer.enqueue('dream', payloadFor(fg, { triggeredBy: 'trigger' }))).jobId,
    );
    expect(few.returnvalue).toMatchObject({ outcome: 'skipped-not-due' });
    expect((few.returnvalue as DreamResult).reason).toContain('only 4 session');
    expect(scripted.server.messageRequests('dream')).toHaveLength(0);
    expect(existsSync(join(fg.paths.memoryDir, '.history'))).toBe(false);
  });
});

async function waitUntil(check: () => boolean, what: string, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}
