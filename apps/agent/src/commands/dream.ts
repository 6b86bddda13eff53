import { describeDreamReceipt } from '@engram/agent-session/memory/dream-trigger';
import { MemoryQueue, QueueNotConfiguredError } from '@engram/memory-client/memory-queue';
import { listSessionsTouchedSince } from '@engram/memory-core/dream/sessions';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import { type DreamProgress, type DreamResult, dreamProgress } from '@engram/queue/jobs/dream';
import { lastConsolidatedAt } from '@engram/queue/state/consolidation-lock';
import type { AgentConfig } from '../config.js';
import { EXIT, type Output } from './output.js';

// `engram dream [--cwd <dir>] [--force]`: enqueue a consolidation of this project's memory now and follow it
// to the end with a progress bar from the job's reported phase and files touched.

const PHASES: DreamProgress['phase'][] = ['orient', 'gather', 'consolidate', 'prune', 'done'];

export function progressBar(p: DreamProgress, width = 20): string {
  const done = Math.max(0, PHASES.indexOf(p.phase)) + (p.phase === 'done' ? 1 : 0);
  const filled = Math.round((done / PHASES.length) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${p.phase.padEnd(11)} files touched: ${p.filesTouched.length}, turns: ${p.turns}`;
}

export async function dreamCommand(
  config: AgentConfig,
  opts: { cwd: string; force: boolean; timeoutMs?: number },
  io: Output,
): Promise<number> {
  // A dream is followed to its end on the queue: with none for this home there is nothing to wait on.
  if (config.backend.implicit) {
    io.err(`engram dream: ${new QueueNotConfiguredError(config.engramHome).message}`);
    return EXIT.usage;
  }
  const paths = await resolveEngramPaths({
    engramHome: config.engramHome,
    cwd: opts.cwd,
    ...(config.memoryDirOverride ? { memoryDirOverride: config.memoryDirOverride } : {}),
  });
  const memory = new MemoryQueue(config);
  try {
    const projectDir = sanitizePath(paths.projectRoot);
    await memory.engine.state.ready();
    const last = await lastConsolidatedAt(memory.engine.state, projectDir);
    const sessionIds = await listSessionsTouchedSince(paths.transcriptDir, last ?? 0, {});
    const queued = await memory.enqueue('dream', {
      projectDir,
      transcriptDir: sanitizePath(paths.cwd),
      sessionIds: sessionIds.slice(0, 50),
      force: opts.force,
      requestedAt: new Date().toISOString(),
      minHours: config.dream.minHours,
      minSessions: config.dream.minSessions,
    });
    if (queued.status !== 'queued') {
      io.err(`engram dream: could not enqueue the consolidation: ${'reason' in queued ? queued.reason : ''}`);
      return EXIT.failure;
    }
    io.err(
      `Consolidating ${paths.memoryDir} (${sessionIds.length} session${sessionIds.length === 1 ? '' : 's'} since ${
        last ? new Date(last).toISOString() : 'ever'
      })${opts.force ? '' : '; without --force it runs only if due'}`,
    );
    const deadline = Date.now() + (opts.timeoutMs ?? 30 * 60_000);
    let lastLine = '';
    while (Date.now() < deadline) {
      const job = await memory.producer.queue('dream').getJob(queued.jobId);
      const progress = dreamProgress.safeParse(job?.progress);
      if (progress.success) {
        const line = progressBar(progress.data);
        if (line !== lastLine) io.err(line);
        lastLine = line;
      }
      if (job?.finishedOn) {
        if (job.failedReason) {
          io.err(`engram dream: consolidation failed: ${job.failedReason}`);
          return EXIT.failure;
        }
        const result = job.returnvalue as DreamResult;
        io.out(describeDreamReceipt(result));
        for (const f of result.files?.created ?? []) io.out(`  + ${f}`);
        for (const f of result.files?.updated ?? []) io.out(`  ~ ${f}`);
        for (const f of result.files?.deleted ?? []) io.out(`  - ${f}`);
        return result.outcome === 'consolidated' || result.outcome.startsWith('skipped')
          ? EXIT.ok
          : EXIT.failure;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    io.err('engram dream: still running after the timeout; it continues in the workers (see the dashboard).');
    return EXIT.failure;
  } finally {
    await memory.close();
  }
}
