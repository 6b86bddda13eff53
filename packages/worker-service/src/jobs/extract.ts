import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import type { ModelClient } from '@engram/agent-runtime/model/client';
import { buildChain } from '@engram/agent-runtime/transcript/chain';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import {
  completeExchangeEnd,
  countModelVisibleMessagesSince,
  hasMemoryWritesSince,
  isMemoryPathSync,
} from '@engram/memory-core/extraction/memory-writes';
import { advanceExtractedMark, readExtractedMark } from '@engram/memory-core/extraction/session-record';
import { loadMemoryIndex } from '@engram/memory-core/memdir/index-file';
import { ensureIndexPointers, readMemoryFile } from '@engram/memory-core/memdir/memory-files';
import { formatMemoryManifest, type MemoryHeader, scanMemoryDir } from '@engram/memory-core/memdir/scan';
import { ENTRYPOINT_NAME, TEAM_DIRNAME } from '@engram/memory-core/paths/memory-paths';
import { memoryWritePolicy } from '@engram/memory-core/policy/memory-permissions';
import { buildExtractionPrompt } from '@engram/memory-core/prompts/extraction-prompt';
import { type ForkOutcome, type ForkPlan, type Receipt, runForkPipeline } from '@engram/memory-work/pipeline';
import {
  type CommitStepHook,
  removeJobStagingDirs,
  runStagedForkPipeline,
  type StagedJournal,
  settleCoveredStaged,
} from '@engram/memory-work/staged';
import { type ExtractJournal, JOURNAL_TTL_MS, journalTransaction } from '@engram/memory-work/transactions';
import { hashFile } from '@engram/memory-work/tree-hash';
import { writerHolder } from '@engram/memory-work/writer-turn';
import type { ExtractPayload, ExtractResult } from '@engram/queue/jobs/extract';
import { extractQueueConfig } from '@engram/queue/queues/extract.config';
import { SessionState, type TranscriptCursor } from '@engram/queue/state/session-state';
import { RESERVED_HOLDER_PREFIX } from '@engram/queue/state/state-store';
import { type ProjectScope, projectKey } from '@engram/queue/state/tenant-scope';
import type { HandlerContext } from '@engram/queue/worker';
import { PermanentJobError } from '@engram/queue/worker';
import type { HandlerDeps } from '../service.js';
import { jobBoundary, pathsForJob } from './job-paths.js';
import { requestAuthoredTeamPush } from './team-authored-push.js';

// extract: turn the messages since the session's cursor into memories with a forked agent (docs/design.md §5, §6),
// as configuration over the one fork pipeline (@engram/memory-work): the project's writer lease, the job's
// journal (so a retry knows what an earlier attempt wrote), the extraction instruction, pointer maintenance.
// Idempotent and cursor-based: the cursor moves only after a successful run, to the leaf the run covered,
// so a retried or re-delivered job redoes exactly the uncovered range and a stale one does nothing.

/** The extraction fork's turn cap: a well-behaved extraction reads in turn 1 and writes in turn 2. */
export const EXTRACT_MAX_TURNS = 5;

export interface ExtractDeps extends HandlerDeps {
  client: ModelClient;
  /** Called as each step of a staged commit completes (unset in production; the crash tests stop there). */
  onCommitStep?: CommitStepHook;
}

function extractJournalKey(jobId: string | undefined): string {
  return `extract-journal:${jobId ?? 'unknown'}`;
}

/** The staged path's commit journal (from/to hashes of the files a commit publishes). */
function stagedJournalKey(jobId: string | undefined): string {
  return `extract-commit:${jobId ?? 'unknown'}`;
}

export function projectWriterLeaseKey(project: ProjectScope): string {
  return projectKey(project, (dir) => `project-writer:${dir}`);
}

const isIndexFile = (rel: string) => rel === ENTRYPOINT_NAME || rel.endsWith(`/${ENTRYPOINT_NAME}`);

export function createExtractHandler(deps: ExtractDeps) {
  const { config, engine, metrics, logger } = deps;
  const ttlMs = config.lockDurationMs ?? extractQueueConfig.lockDurationMs;
  return async (payload: ExtractPayload, ctx: HandlerContext): Promise<ExtractResult> => {
    const log = logger.child({
      queue: 'extract',
      jobId: ctx.job.id,
      sessionId: payload.sessionId,
      project: payload.projectDir,
    });
    const paths = pathsForJob(config, payload);
    const state = new SessionState(engine.state, payload, { ttlMs: config.sessionStateTtlMs });
    const sessionDir = paths.sessionDir(payload.sessionId);
    const [stateCursor, diskCursor, latest] = await Promise.all([
      state.extractCursor(),
      readExtractedMark(sessionDir),
      state.latestExtractRequest(),
    ]);
    // The further of the engine's cursor and the one beside the transcript (another namespace's finished job).
    const cursor: TranscriptCursor | undefined =
      diskCursor && (!stateCursor || diskCursor.leafSeq > stateCursor.leafSeq)
        ? { leafUuid: diskCursor.leafUuid, leafSeq: diskCursor.leafSeq }
        : stateCursor;
    const advance = async (to: TranscriptCursor) => {
      await state.advanceExtractCursor(to);
      await advanceExtractedMark(sessionDir, to);
    };
    const requested: TranscriptCursor = { leafUuid: payload.leafUuid, leafSeq: payload.leafSeq };
    let target = latest && latest.leafSeq > requested.leafSeq ? latest : requested;
    const base = { sessionId: payload.sessionId, fromSeq: cursor?.leafSeq ?? 0, toSeq: target.leafSeq };
    const nothing = {
      memories: [],
      turns: 0,
      usage: { inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 },
      deniedToolCalls: 0,
    };
    const pipelineDeps = {
      client: deps.client,
      state: engine.state,
      metrics,
      ...(deps.waker ? { waker: deps.waker } : {}),
    };
    const writer = { key: projectWriterLeaseKey(payload), ttlMs };

    if (cursor && cursor.leafSeq >= target.leafSeq) {
      // An earlier attempt killed after its staged commit moved the cursor left its journal and copy behind.
      await settleCoveredStaged(pipelineDeps, {
        ctx,
        memoryDir: paths.memoryDir,
        journalKey: stagedJournalKey(ctx.job.id),
        writer,
        ...(deps.onCommitStep ? { onCommitStep: deps.onCommitStep } : {}),
      });
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
    const asked = buildChain(entries, target.leafUuid).live;
    // Only complete exchanges are covered (foreground, sweep and retry alike): a trailing prompt whose turn
    // failed is left for the run after the turn that answers it, and the cursor stops before it.
    const end = completeExchangeEnd(asked);
    const chain = asked.slice(0, end);
    if (end < asked.length) {
      const leaf = chain.at(-1);
      const targetIndex = entries.findIndex((e) => e.uuid === target.leafUuid);
      const leafSeq = leaf
        ? target.leafSeq - (targetIndex - entries.findIndex((e) => e.uuid === leaf.uuid))
        : 0;
      if (!leaf || (cursor && cursor.leafSeq >= leafSeq)) {
        log.info({ toSeq: target.leafSeq }, 'only an unanswered turn since the cursor; left for later');
        return { outcome: 'skipped-incomplete-turn', ...base, toSeq: cursor?.leafSeq ?? 0, ...nothing };
      }
      target = { leafUuid: leaf.uuid, leafSeq };
      base.toSeq = leafSeq;
    }
    const isMemoryPath = (p: string) => isMemoryPathSync(p, paths.memoryDir);

    // The agent itself wrote memory since the cursor: that range is covered; extraction would duplicate it.
    if (hasMemoryWritesSince(chain, cursor?.leafUuid, isMemoryPath)) {
      await advance(target);
      log.info({ toSeq: target.leafSeq }, 'main agent wrote memory itself; cursor advanced without a fork');
      return { outcome: 'skipped-direct-write', ...base, ...nothing };
    }
    const newMessageCount = countModelVisibleMessagesSince(chain, cursor?.leafUuid);
    if (newMessageCount === 0) {
      await advance(target);
      return { outcome: 'skipped-no-new-messages', ...base, ...nothing };
    }

    // The fork's plan with its files at `root`: the live memory directory (serial path) or the job's staging
    // copy of it (staged path: the pipeline aliases the live path onto the copy). Either way the fork is told
    // the live directory, the path its session's cached system prompt names, so a staged request is the
    // serial one's; the manifest and the policy judge `root`, where the files the tools open are.
    const planFor = async (root: string, recovered: readonly string[]): Promise<ForkPlan> => {
      // The fork sees what earlier attempts of this job wrote whatever the manifest's newest-200 window
      // holds now (more than 200 newer files may have landed between attempts), and is told those facts
      // are saved — so a retry updates them instead of saving them again under another name.
      const alreadyWritten = recovered.filter((rel) => !isIndexFile(rel));
      const scan = await scanMemoryDir(root);
      const headers: MemoryHeader[] = [...scan.headers];
      const missing = alreadyWritten.filter((rel) => !headers.some((h) => h.filename === rel));
      if (missing.length > 0) {
        const all = await scanMemoryDir(root, { maxFiles: Number.POSITIVE_INFINITY });
        headers.unshift(...all.headers.filter((h) => missing.includes(h.filename)));
      }
      if (alreadyWritten.length > 0) {
        log.info({ files: alreadyWritten }, 'resuming: an earlier attempt of this job already wrote these');
      }
      return {
        source: {
          kind: 'session',
          transcriptPath,
          entries,
          leafUuid: target.leafUuid,
          sessionId: payload.sessionId,
        },
        instruction: buildExtractionPrompt({
          newMessageCount,
          manifest: formatMemoryManifest(headers),
          memoryDir: paths.memoryDir,
          maxTurns: EXTRACT_MAX_TURNS,
          alreadyWritten,
        }),
        canUseTool: memoryWritePolicy(root, { teamDir: join(root, TEAM_DIRNAME) }),
        maxTurns: EXTRACT_MAX_TURNS,
        cwd: paths.memoryDir,
        toolResultsDir: paths.toolResultsDir(payload.sessionId),
        // The fork may change only `root` (Bash may not), and reads within the job's world.
        boundary: await jobBoundary(config, payload, { root, bash: 'read-only' }, paths.memoryDir),
      };
    };
    // Files this run changed get Claude Code's metadata (originSessionId, modified).
    const stamp = () => ({ originSessionId: payload.sessionId, modified: new Date().toISOString() });

    const finish = async (receipt: Receipt, fork: ForkOutcome | undefined): Promise<ExtractResult> => {
      const memories: ExtractResult['memories'] = [];
      // The types of the files the receipt names (read from their frontmatter; this runs under the writer
      // lease, so not a scan of the whole directory).
      const typeOf = new Map<string, MemoryHeader['type']>();
      for (const rel of [...receipt.created, ...receipt.updated]) {
        if (isIndexFile(rel)) continue;
        const type = (await readMemoryFile(paths.memoryDir, rel).catch(() => undefined))?.type;
        if (type) typeOf.set(rel, type);
      }
      for (const [action, files] of [
        ['created', receipt.created],
        ['updated', receipt.updated],
      ] as const) {
        for (const rel of files) {
          if (isIndexFile(rel)) continue;
          const type = typeOf.get(rel);
          memories.push({ path: rel, ...(type ? { type } : {}), action });
        }
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
      // The receipt before the cursor: a caller that sees the cursor cover its turn (drainExtraction, `engram
      // run`, the demo) reads the receipts at once, so they must already name what this run saved. A crash between
      // the two redoes the range, and the retry's receipt for the same range merges into this one.
      await state.recordExtractReceipt({
        fromSeq: base.fromSeq,
        toSeq: target.leafSeq,
        memories,
        atMs: Date.now(),
      });
      // Only now, after every write landed, does the cursor move: a crash before this line redoes the range.
      await advance(target);
      // Written into a store-backed team/: a push that names this job as the author of the new versions.
      await requestAuthoredTeamPush(deps, payload, receipt.files, `extract:${ctx.job.id}`).catch((error) =>
        log.warn({ err: (error as Error).message }, 'could not request the authored team push'),
      );
      const usage = fork?.usage ?? nothing.usage;
      log.info(
        {
          toSeq: target.leafSeq,
          memories: memories.length,
          turns: fork?.turns ?? 0,
          cacheRead: usage.cacheReadInputTokens,
        },
        'extraction done',
      );
      return {
        outcome: 'extracted',
        ...base,
        memories,
        turns: fork?.turns ?? 0,
        usage,
        deniedToolCalls: fork?.deniedCalls.length ?? 0,
      };
    };
    // Staged when asked to always, or (auto) when another extraction of this project is in flight or its writer
    // lease is busy — so this fork need not wait a fork's length for it — and whenever an interrupted staged
    // commit of this job is to be rolled forward. A lone job, and one the lease was handed to, runs serial.
    const activeKey = projectKey(payload, (dir) => `extract-active:${dir}`);
    const myId = ctx.job.id ?? 'unknown';
    const runsStaged = async (): Promise<boolean> => {
      if (config.extractStaged === 'always') return true;
      if (config.extractStaged === 'never') return false;
      if (await engine.state.getJson(stagedJournalKey(ctx.job.id))) return true;
      const lease = await engine.state.getLease(writer.key);
      // The lease handed to this job, or still held by an earlier attempt of it (killed): the serial line.
      const mine = writerHolder('extract', ctx.job.id);
      if (lease?.holder === mine || lease?.holder === `${RESERVED_HOLDER_PREFIX}${mine}`) return false;
      // One atomic step: of jobs starting at the same instant, every one but the first sees another.
      const others = (await engine.state.joinPresence(activeKey, myId, ACTIVE_TTL_MS)).length > 0;
      return others || (lease !== undefined && lease.expiresAtMs > Date.now());
    };

    const extractOn = async (staged: boolean): Promise<ExtractResult> => {
      if (staged) {
        // Staged: the fork runs in parallel with the project's other extractions against a private
        // copy, and only its commit takes the project-writer lease, for milliseconds (docs/concurrency.md).
        // What an earlier serial attempt of this job wrote (its journal) is credited to this run and shown to
        // the fork as already saved.
        const serialJournal = await engine.state.getJson<ExtractJournal>(extractJournalKey(ctx.job.id));
        const carried: Record<string, string | null> = {};
        for (const [rel, was] of Object.entries(serialJournal?.intents ?? {})) {
          if ((await hashFile(join(paths.memoryDir, rel))) !== was) carried[rel] = was;
        }
        const staged = await runStagedForkPipeline<ExtractResult>(pipelineDeps, {
          ctx,
          carried,
          log,
          writer,
          memoryDir: paths.memoryDir,
          journalKey: stagedJournalKey(ctx.job.id),
          countsAsMemory: (rel) => !isIndexFile(rel),
          ...(deps.onCommitStep ? { onCommitStep: deps.onCommitStep } : {}),
          admit: async () => {
            // Under the lease: another job of this session may have covered the range meanwhile.
            const [nowState, nowDisk] = await Promise.all([
              state.extractCursor(),
              readExtractedMark(sessionDir),
            ]);
            const seq = Math.max(nowState?.leafSeq ?? 0, nowDisk?.leafSeq ?? 0);
            if (seq >= target.leafSeq) {
              return { skip: { outcome: 'skipped-stale' as const, ...base, ...nothing } };
            }
            if (seq > (cursor?.leafSeq ?? 0)) return { rerun: true };
            return undefined;
          },
          plan: ({ stagingDir, recovered }) => planFor(stagingDir, recovered),
          prepare: async ({ stagingDir, change }) => {
            const rels = [...change.created, ...change.updated].filter((rel) => !isIndexFile(rel));
            await ensureIndexPointers(stagingDir, rels, { stamp: stamp() });
          },
          finish: ({ receipt, fork }) => finish(receipt, fork),
        });
        if (staged.kind === 'done') {
          if (serialJournal) await engine.state.delete(extractJournalKey(ctx.job.id));
          return staged.result;
        }
        log.warn(
          { conflicts: staged.conflicts },
          'staged commits kept conflicting; extracting on the serial path',
        );
        // What an interrupted staged commit landed is credited by the serial path's journal (written before the
        // staged journal is dropped, so a kill in between loses neither).
        if (Object.keys(staged.carried).length > 0) {
          const key = extractJournalKey(ctx.job.id);
          const existing = await engine.state.getJson<ExtractJournal>(key);
          await engine.state.setJson(
            key,
            { intents: { ...staged.carried, ...(existing?.intents ?? {}) } },
            JOURNAL_TTL_MS,
          );
        }
        await engine.state.delete(stagedJournalKey(ctx.job.id));
      }
      // Copies an earlier staged attempt of this job left (killed before its journal entry) are not needed here;
      // the one a stored staged journal names is (a later staged attempt rolls it forward).
      const stagedLeft = await engine.state.getJson<StagedJournal>(stagedJournalKey(ctx.job.id));
      await removeJobStagingDirs(paths.memoryDir, ctx.job.id, stagedLeft?.stagingDir).catch(() => []);

      const journal = journalTransaction({
        state: engine.state,
        key: extractJournalKey(ctx.job.id),
        root: paths.memoryDir,
      });
      return runForkPipeline(pipelineDeps, {
        queue: 'extract',
        ctx,
        log,
        // Serial: one memory writer per project at a time for the whole fork, in arrival order.
        writer,
        root: paths.memoryDir,
        tempMaxAgeMs: ttlMs,
        countsAsMemory: (rel) => !isIndexFile(rel),
        transaction: journal,
        plan: ({ recovered }) => planFor(paths.memoryDir, recovered),
        commit: async ({ change }) => {
          // Pointer maintenance is mechanical: guarantee it rather than trust the model did step two — for
          // every memory file this job wrote (its Write/Edit targets), including what an earlier attempt wrote
          // before being killed. A file another writer changed meanwhile is not this job's to stamp or credit.
          const changed = new Set([...change.created, ...change.updated]);
          const touched = journal.intended;
          // A file only intended (a refused write, an earlier attempt's) keeps its bytes, so the receipt stays true.
          const now = stamp();
          // Nothing written or meant to be (the usual "nothing to save"): nothing to maintain either.
          if (touched.length === 0) return false;
          const present: string[] = [];
          for (const rel of touched) {
            if (isIndexFile(rel)) continue;
            if (await journalFileExists(paths.memoryDir, rel)) present.push(rel);
          }
          // One index write for all of them (the lease is held): the changed files are stamped, the others not.
          // The index is credited to this job only where its pointer or title actually changed.
          for (const [rels, options] of [
            [present.filter((rel) => changed.has(rel)), { stamp: now }],
            [present.filter((rel) => !changed.has(rel)), {}],
          ] as const) {
            const results = await ensureIndexPointers(paths.memoryDir, rels, options);
            for (const [i, pointer] of results.entries()) {
              if (pointer.added || pointer.titleUpdated) journal.credit(indexOf(rels[i] as string));
            }
          }
        },
        finish: ({ receipt, fork }) => finish(receipt, fork),
      });
    };
    const staged = await runsStaged();
    try {
      return await extractOn(staged);
    } finally {
      if (config.extractStaged === 'auto')
        await engine.state.leavePresence(activeKey, myId).catch(() => undefined);
    }
  };
}

/** How long an extraction counts as in flight for auto mode's signal (a job that died stops counting then). */
const ACTIVE_TTL_MS = 120_000;

/** The index a memory file's pointer lives in. */
const indexOf = (rel: string) =>
  rel.startsWith(`${TEAM_DIRNAME}/`) ? `${TEAM_DIRNAME}/${ENTRYPOINT_NAME}` : ENTRYPOINT_NAME;

async function journalFileExists(memoryDir: string, rel: string): Promise<boolean> {
  return fs.stat(join(memoryDir, rel)).then(
    (s) => s.isFile(),
    () => false,
  );
}
