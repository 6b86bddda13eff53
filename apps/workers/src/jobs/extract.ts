import { promises as fs } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { cacheSafeParamsPathFor, loadCacheSafeParams } from '@engram/agent-runtime/fork/cache-safe-params';
import { runForkedAgent } from '@engram/agent-runtime/fork/run-forked-agent';
import type { ModelClient } from '@engram/agent-runtime/model/client';
import { buildChain } from '@engram/agent-runtime/transcript/chain';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import { removeStaleTempFiles } from '@engram/fs-atomic/atomic-write';
import {
  countModelVisibleMessagesSince,
  hasMemoryWritesSince,
  isMemoryPathSync,
} from '@engram/memory-core/extraction/memory-writes';
import { loadMemoryIndex } from '@engram/memory-core/memdir/index-file';
import { ensureIndexPointer } from '@engram/memory-core/memdir/memory-files';
import { formatMemoryManifest, scanMemoryDir } from '@engram/memory-core/memdir/scan';
import { memoryWritePolicy } from '@engram/memory-core/policy/memory-permissions';
import { buildExtractionPrompt } from '@engram/memory-core/prompts/extraction-prompt';
import type { ExtractPayload, ExtractResult } from '@engram/queue/jobs/extract';
import { extractQueueConfig } from '@engram/queue/queues/extract.config';
import { tryHoldLease } from '@engram/queue/state/held-lease';
import { SessionState, type TranscriptCursor } from '@engram/queue/state/session-state';
import type { HandlerContext } from '@engram/queue/worker';
import { PermanentJobError } from '@engram/queue/worker';
import type { HandlerDeps } from '../service.js';
import { pathsForJob } from './job-paths.js';

// extract: turn the messages since the session's cursor into memories with a forked agent (DESIGN §5, §6).
// Idempotent and cursor-based: the cursor moves only after a successful run, to the leaf the run covered,
// so a retried or re-delivered job redoes exactly the uncovered range and a stale one does nothing.

/** The extraction fork's turn cap: a well-behaved extraction reads in turn 1 and writes in turn 2. */
export const EXTRACT_MAX_TURNS = 5;

export interface ExtractDeps extends HandlerDeps {
  client: ModelClient;
}

interface ExtractJournal {
  existedBefore: string[];
  written: string[];
}

/** A job's journal outlives its retries comfortably (attempts with backoff span about a minute). */
const EXTRACT_JOURNAL_TTL_MS = 24 * 3600 * 1000;

function extractJournalKey(jobId: string | undefined): string {
  return `extract-journal:${jobId ?? 'unknown'}`;
}

async function fileExists(path: string): Promise<boolean> {
  return fs.stat(path).then(
    (s) => s.isFile(),
    () => false,
  );
}

/** Absolute targets of the Write/Edit calls an assistant entry makes (before they run). */
function writeTargets(entry: ChainEntry, cwd: string): string[] {
  const content = entry.type === 'assistant' ? entry.message?.content : undefined;
  if (!Array.isArray(content)) return [];
  const out: string[] = [];
  for (const block of content as Array<{ type: string; name?: string; input?: { file_path?: unknown } }>) {
    if (block.type !== 'tool_use' || (block.name !== 'Write' && block.name !== 'Edit')) continue;
    if (typeof block.input?.file_path === 'string') out.push(resolve(cwd, block.input.file_path));
  }
  return out;
}

export function projectWriterLeaseKey(projectDir: string): string {
  return `project-writer:${projectDir}`;
}

export function createExtractHandler(deps: ExtractDeps) {
  const { config, engine, metrics, logger } = deps;
  // The project's writer lease lives as long as a job lock: a killed worker frees both on the same schedule.
  const writerTtlMs = config.lockDurationMs ?? extractQueueConfig.lockDurationMs;
  return async (payload: ExtractPayload, ctx: HandlerContext): Promise<ExtractResult> => {
    const log = logger.child({
      queue: 'extract',
      jobId: ctx.job.id,
      sessionId: payload.sessionId,
      project: payload.projectDir,
    });
    const paths = pathsForJob(config, payload);
    const state = new SessionState(engine.state, payload);
    const [cursor, latest] = await Promise.all([state.extractCursor(), state.latestExtractRequest()]);
    const requested: TranscriptCursor = { leafUuid: payload.leafUuid, leafSeq: payload.leafSeq };
    const target = latest && latest.leafSeq > requested.leafSeq ? latest : requested;
    const base = { sessionId: payload.sessionId, fromSeq: cursor?.leafSeq ?? 0, toSeq: target.leafSeq };
    const nothing = {
      memories: [],
      turns: 0,
      usage: { inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 },
      deniedToolCalls: 0,
    };

    if (cursor && cursor.leafSeq >= target.leafSeq) {
      return { outcome: 'skipped-stale', ...base, ...nothing };
    }

    const transcriptPath = paths.transcriptPath(payload.sessionId);
    const { entries } = await new TranscriptStore(transcriptPath)
      .readAll()
      .catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') {
          throw new PermanentJobError(
            'TRANSCRIPT_MISSING',
            `No transcript for session ${payload.sessionId}.`,
          );
        }
        throw error;
      });
    if (!entries.some((e) => e.uuid === target.leafUuid)) {
      throw new PermanentJobError(
        'LEAF_NOT_FOUND',
        `Transcript of session ${payload.sessionId} has no entry ${target.leafUuid}; the job cannot cover it.`,
      );
    }
    const chain = buildChain(entries, target.leafUuid).live;
    const isMemoryPath = (p: string) => isMemoryPathSync(p, paths.memoryDir);

    // The agent itself wrote memory since the cursor: that range is covered; extraction would duplicate it.
    if (hasMemoryWritesSince(chain, cursor?.leafUuid, isMemoryPath)) {
      await state.advanceExtractCursor(target);
      log.info({ toSeq: target.leafSeq }, 'main agent wrote memory itself; cursor advanced without a fork');
      return { outcome: 'skipped-direct-write', ...base, ...nothing };
    }
    const newMessageCount = countModelVisibleMessagesSince(chain, cursor?.leafUuid);
    if (newMessageCount === 0) {
      await state.advanceExtractCursor(target);
      return { outcome: 'skipped-no-new-messages', ...base, ...nothing };
    }

    // One memory writer per project at a time: parallel sessions of one repo would otherwise race on MEMORY.md.
    const writer = await tryHoldLease(engine.state, projectWriterLeaseKey(payload.projectDir), {
      ttlMs: writerTtlMs,
      holder: `extract:${ctx.job.id}`,
    });
    if (!writer) throw await ctx.defer(1_000 + Math.floor(Math.random() * 1_000));
    const signal = AbortSignal.any([ctx.signal, writer.signal]);
    try {
      await fs.mkdir(paths.memoryDir, { recursive: true, mode: 0o700 });
      await removeStaleTempFiles(paths.memoryDir, writerTtlMs);
      const before = await scanMemoryDir(paths.memoryDir);
      // The job's journal (memoised across attempts): which memories existed before its first attempt, and
      // which files any attempt set out to write — recorded before each write runs, so an attempt killed
      // mid-fork still tells its retry exactly what it may have written (nothing else is attributed to it).
      const journalKey = extractJournalKey(ctx.job.id);
      const journal = (await engine.state.getJson<ExtractJournal>(journalKey)) ?? {
        existedBefore: before.headers.map((h) => h.filename),
        written: [],
      };
      await engine.state.setJson(journalKey, journal, EXTRACT_JOURNAL_TTL_MS);
      const existing = new Set(journal.existedBefore);
      const toRel = (p: string) => relative(paths.memoryDir, p).split(sep).join('/');
      const isMemoryFile = (p: string) => isMemoryPath(p) && !p.endsWith(`${sep}MEMORY.md`);
      const params = await loadCacheSafeParams(cacheSafeParamsPathFor(transcriptPath)).catch(
        (error: Error) => {
          throw new PermanentJobError(
            'NO_CACHE_SAFE_PARAMS',
            `Session ${payload.sessionId}: ${error.message}`,
          );
        },
      );
      const fork = await runForkedAgent({
        client: deps.client,
        params,
        transcriptPath,
        leafUuid: target.leafUuid,
        instruction: buildExtractionPrompt({
          newMessageCount,
          manifest: formatMemoryManifest(before.headers),
          memoryDir: paths.memoryDir,
          maxTurns: EXTRACT_MAX_TURNS,
        }),
        canUseTool: memoryWritePolicy(paths.memoryDir, { teamDir: paths.teamDir }),
        maxTurns: EXTRACT_MAX_TURNS,
        signal,
        cwd: paths.memoryDir,
        toolResultsDir: paths.toolResultsDir(payload.sessionId),
        onMessage: async (entry) => {
          const intended = writeTargets(entry, paths.memoryDir).filter(isMemoryFile).map(toRel);
          const fresh = intended.filter((rel) => !journal.written.includes(rel));
          if (fresh.length === 0) return;
          journal.written.push(...fresh);
          await engine.state.setJson(journalKey, journal, EXTRACT_JOURNAL_TTL_MS);
        },
      });
      if (fork.endReason === 'aborted')
        throw new Error('extraction aborted (lock or lease lost, or shutdown)');

      // Memory files this job touched: this attempt's successful writes, plus whatever an earlier attempt set
      // out to write (it may have landed before that attempt died) if the file exists now.
      const touched = new Set<string>(fork.writtenPaths.filter(isMemoryFile).map(toRel));
      for (const rel of journal.written) {
        if (!touched.has(rel) && (await fileExists(join(paths.memoryDir, rel)))) touched.add(rel);
      }
      const memories: ExtractResult['memories'] = [];
      for (const rel of touched) {
        // Pointer maintenance is mechanical: guarantee it rather than trust the model did step two.
        const item = await ensureIndexPointer(paths.memoryDir, rel);
        const action = existing.has(rel) ? 'updated' : 'created';
        memories.push({ path: rel, ...(item.type ? { type: item.type } : {}), action });
        metrics.memoriesWritten.inc({ queue: 'extract', action });
      }
      // A cut index is never silent: count it and say which memories no longer make it into the context.
      const index = await loadMemoryIndex(paths.memoryIndexPath).catch(() => undefined);
      if (index?.overflow) {
        metrics.indexOverflows.inc({ queue: 'extract', cap: index.overflow.cap });
        log.warn(
          {
            cap: index.overflow.cap,
            entriesLost: index.overflow.entriesLost.length,
            lines: index.overflow.totalLines,
          },
          'MEMORY.md is over its load caps; run a consolidation (engram dream) to bring it back under',
        );
      }
      for (const denied of fork.deniedCalls) metrics.toolDenials.inc({ queue: 'extract', tool: denied.tool });
      metrics.forkTokens.inc({ queue: 'extract', kind: 'input' }, fork.usage.inputTokens);
      metrics.forkTokens.inc({ queue: 'extract', kind: 'output' }, fork.usage.outputTokens);
      metrics.forkTokens.inc({ queue: 'extract', kind: 'cache_read' }, fork.usage.cacheReadInputTokens);
      metrics.forkTokens.inc(
        { queue: 'extract', kind: 'cache_creation' },
        fork.usage.cacheCreationInputTokens,
      );

      // Only now, after every write landed, does the cursor move: a crash before this line redoes the range.
      await state.advanceExtractCursor(target);
      await state.recordExtractReceipt({
        fromSeq: base.fromSeq,
        toSeq: target.leafSeq,
        memories,
        atMs: Date.now(),
      });
      await engine.state.delete(journalKey);
      log.info(
        {
          toSeq: target.leafSeq,
          memories: memories.length,
          turns: fork.turns,
          cacheRead: fork.usage.cacheReadInputTokens,
        },
        'extraction done',
      );
      return {
        outcome: 'extracted',
        ...base,
        memories,
        turns: fork.turns,
        usage: fork.usage,
        deniedToolCalls: fork.deniedCalls.length,
      };
    } finally {
      await writer.release();
    }
  };
}
