import { randomBytes } from 'node:crypto';
import { promises as fs, mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { walk } from '@engram/fs-walk/walk';
import { type BoundedRead, readRegularFileBounded } from '@engram/memory-core/memdir/bounded-read';
import { ensureIndexPointer, ensureIndexPointers } from '@engram/memory-core/memdir/memory-files';
import { resolveInside } from '@engram/memory-core/paths/containment';
import { ENTRYPOINT_NAME, TEAM_DIRNAME } from '@engram/memory-core/paths/memory-paths';
import { scanForSecrets } from '@engram/memory-core/security/secret-scanner';
import type { StateStore } from '@engram/queue/state/state-store';
import type { HandlerContext } from '@engram/queue/worker';
import { inSpan } from '@engram/telemetry/spans';
import {
  ForkAbortedError,
  type ForkOutcome,
  type ForkPlan,
  type PipelineDeps,
  type PipelineLogger,
  type Receipt,
  receiptFor,
  recordForkMetrics,
  runFork,
} from './pipeline.js';
import { JOURNAL_TTL_MS } from './transactions.js';
import {
  diffTrees,
  eachFileSliced,
  HASH_TREE_MAX_ENTRIES,
  hashContent,
  hashFile,
  hashTree,
  isVisibleMarkdown,
  MEMORY_FILE_HASH_MAX_BYTES,
  readRegularFileSync,
  type TreeChange,
  type TreeState,
} from './tree-hash.js';
import { type WriterTurn, waitWriterTurn } from './writer-turn.js';

// Staged extraction (docs/concurrency.md, "Per-project throughput"): the forks of one project run in parallel,
// each against a private copy of the memory directory (`<memoryDir>/.staging/<job>-<nonce>`: inside the
// memory directory, so inside the tenant's area, on the same filesystem, hidden from every scan, hash and
// snapshot), and commit under a short serialized step — the project-writer lease held for milliseconds:
//
//   change set from the disk (the copy's tree hash vs. its baseline) → per-file compare-and-set on content
//   hash (the live file must still have the baseline's hash) → journal entry (from/to hashes) → files written
//   atomically from the copy → MEMORY.md merged mechanically (one pointer per changed file) → receipt from the
//   live bytes, cursor → journal dropped.
//
// A conflict writes nothing: the fork re-runs on a fresh view (bounded), then the caller falls back to the
// serial pipeline. A commit interrupted after its journal entry (SIGKILL between files) is rolled forward by the
// job's retry from the journal and the kept copy; a file someone else changed meanwhile is not overwritten, the
// retry re-forks with the landed files credited to it (`carried`).

export const STAGING_DIRNAME = '.staging';
/** Staging copies older than this are leftovers of killed attempts (a fork lasts seconds). */
export const STAGING_MAX_AGE_MS = 3_600_000;
/** Forks run per job before falling back to the serial pipeline. */
export const MAX_STAGED_ATTEMPTS = 3;

export interface FileIntent {
  /** The file's hash in the fork's baseline (null: it did not exist). */
  from: string | null;
  /** The hash committed (null: removed). */
  to: string | null;
}

export interface StagedJournal {
  v: 1;
  stagingDir: string;
  /** Memory files committed from the staging copy. */
  files: Record<string, FileIntent>;
  /** Index files copied whole (their live copy still had the baseline's bytes). */
  indexes: Record<string, FileIntent>;
  /** The live index files' hashes before this commit (for the receipt). */
  indexBefore: Record<string, string | null>;
  /** Files an earlier, interrupted commit of this job landed: their hash before it (credited to this job). */
  carried: Record<string, string | null>;
}

/**
 * The commit's steps, in order (docs/concurrency.md gives the recovery rule after each): `turn` — about to wait
 * for the writer lease; `lease` — it is held; `admitted` — the cursor re-checked; `compared` — every file's
 * compare-and-set passed; `journaled` — the journal entry is stored; `file` / `index` — one memory file / one
 * index written (with its path); `pointer` — one pointer ensured (with its file); `merged` — every file and
 * pointer on disk; `receipt` — the receipt computed from the live bytes; `finished` — the job's finish ran
 * (cursor moved, receipt recorded); `dropped` — the journal deleted; `cleaned` — the copy removed (the lease is
 * released next).
 */
export const COMMIT_STEPS = [
  'turn',
  'lease',
  'admitted',
  'compared',
  'journaled',
  'file',
  'index',
  'pointer',
  'merged',
  'receipt',
  'finished',
  'dropped',
  'cleaned',
] as const;
export type CommitStep = (typeof COMMIT_STEPS)[number];

/**
 * Called as each step of the commit completes (production leaves it unset): the seam through which the crash
 * tests stop a process at every step.
 */
export type CommitStepHook = (step: CommitStep, rel?: string) => void | Promise<void>;

export const isIndexRel = (rel: string): boolean =>
  rel === ENTRYPOINT_NAME || rel === `${TEAM_DIRNAME}/${ENTRYPOINT_NAME}`;

export function stagingRoot(memoryDir: string): string {
  return join(memoryDir, STAGING_DIRNAME);
}

/**
 * One bounded read of a memory or staged file: opened non-blocking without following a final symlink, judged
 * on the opened descriptor (a regular file only), at most the cap read. Anything else — gone, a link, a FIFO,
 * over the cap — is undefined: not staged, not committed.
 */
async function readStagedFile(path: string): Promise<BoundedRead | undefined> {
  const read = await readRegularFileBounded(path, MEMORY_FILE_HASH_MAX_BYTES, {
    followSymlinks: false,
  }).catch(() => undefined);
  return read && !read.truncated ? read : undefined;
}

const stagingName = (jobId: string | undefined) =>
  (jobId ?? 'unknown').replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 80);

export function stagingDirFor(memoryDir: string, jobId: string | undefined): string {
  return join(stagingRoot(memoryDir), `${stagingName(jobId)}-${randomBytes(4).toString('hex')}`);
}

/**
 * Copies the memory directory's visible Markdown into `stagingDir` (fresh; real copies, not hard links: the
 * memory policy refuses to write a file with another link) and returns the copy's baseline hashes.
 */
export async function stageMemoryDir(memoryDir: string, stagingDir: string): Promise<TreeState> {
  await fs.rm(stagingDir, { recursive: true, force: true });
  await fs.mkdir(stagingDir, { recursive: true, mode: 0o700 });
  const listing = await walk(memoryDir, {
    include: (_name, rel) => isVisibleMarkdown(rel),
    maxEntries: HASH_TREE_MAX_ENTRIES,
  });
  const out: TreeState = new Map();
  const made = new Set<string>();
  // Synchronous file calls in slices (eachFileSliced): a copy is a few hundred small files, and a loaded
  // worker waited for each of their nine thread-pool round trips in turn.
  await eachFileSliced(
    listing.files,
    (file) => {
      const read = readRegularFileSync(file.path, MEMORY_FILE_HASH_MAX_BYTES);
      if (!read || read.truncated) return;
      const target = join(stagingDir, file.rel);
      if (!made.has(dirname(target))) mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
      made.add(dirname(target));
      writeFileSync(target, read.bytes, { mode: 0o600 });
      // The copy keeps the memories' ages: the fork's manifest orders and labels them by modification time.
      utimesSync(target, read.stat.atime, read.stat.mtime);
      out.set(file.rel, hashContent(read.bytes));
    },
    async (file) => {
      const read = await readStagedFile(file.path);
      if (!read) return;
      const target = join(stagingDir, file.rel);
      await fs.mkdir(dirname(target), { recursive: true, mode: 0o700 });
      await fs.writeFile(target, read.bytes, { mode: 0o600 });
      await fs.utimes(target, read.stat.atime, read.stat.mtime);
      out.set(file.rel, hashContent(read.bytes));
    },
  );
  return out;
}

/**
 * Removes the copies earlier attempts of `jobId` left (a killed attempt runs no cleanup), except `keep` (the copy
 * its stored journal names, still needed to roll that journal forward). Only the job's own attempt calls this:
 * BullMQ runs one attempt of a job at a time.
 */
export async function removeJobStagingDirs(
  memoryDir: string,
  jobId: string | undefined,
  keep?: string,
): Promise<string[]> {
  const root = stagingRoot(memoryDir);
  const mine = new RegExp(`^${stagingName(jobId)}-[0-9a-f]{8}$`);
  const names = await fs.readdir(root).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const name of names) {
    const path = join(root, name);
    if (!mine.test(name) || path === keep) continue;
    await fs.rm(path, { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

/** Removes staging copies left by killed attempts. */
export async function removeStaleStagingDirs(
  memoryDir: string,
  maxAgeMs = STAGING_MAX_AGE_MS,
): Promise<string[]> {
  const root = stagingRoot(memoryDir);
  const names = await fs.readdir(root).catch(() => [] as string[]);
  const removed: string[] = [];
  const now = Date.now();
  for (const name of names) {
    const path = join(root, name);
    const stat = await fs.lstat(path).catch(() => undefined);
    if (!stat || now - stat.mtimeMs < maxAgeMs) continue;
    await fs.rm(path, { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

/** Writes (or removes) one file of the live memory directory, after the containment check. */
async function writeLive(memoryDir: string, rel: string, data: Buffer | null): Promise<void> {
  const target = await resolveInside(join(memoryDir, rel), memoryDir);
  if (!target.ok) throw new Error(`staged commit: ${rel} resolves outside the memory directory`);
  if (data === null) {
    await fs.rm(target.path, { force: true });
    return;
  }
  await fs.mkdir(dirname(target.path), { recursive: true, mode: 0o700 });
  const again = await resolveInside(target.path, memoryDir);
  if (!again.ok) throw new Error(`staged commit: ${rel} resolves outside the memory directory`);
  await writeFileAtomic(again.path, data, { mode: 0o600 });
}

/** The copy's bytes for `intent.to`, or undefined when the copy is gone or no longer has them. */
async function stagedBytes(stagingDir: string, rel: string, to: string): Promise<Buffer | undefined> {
  const data = (await readStagedFile(join(stagingDir, rel)))?.bytes;
  return data && hashContent(data) === to ? data : undefined;
}

export interface ApplyResult {
  /** Memory files whose committed state is now on disk. */
  landed: string[];
  /** Memory files that could not be rolled forward (changed by someone else, or the copy is gone). */
  unlanded: string[];
}

/**
 * Rolls the journal forward on the live directory (idempotent: a file already at `to` is skipped), then makes
 * sure every committed memory has its one pointer. Must run under the writer lease.
 */
export async function applyJournal(
  memoryDir: string,
  journal: StagedJournal,
  opts: { onCommitStep?: CommitStepHook; owner: () => boolean },
): Promise<ApplyResult> {
  const landed: string[] = [];
  const unlanded: string[] = [];
  const lost = () => new ForkAbortedError('extract', 'writer lease lost while committing');
  for (const [rel, intent] of Object.entries(journal.files).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const live = await hashFile(join(memoryDir, rel));
    if (live === intent.to) {
      landed.push(rel);
      continue;
    }
    const data = intent.to === null ? null : await stagedBytes(journal.stagingDir, rel, intent.to);
    if (live !== intent.from || data === undefined) {
      unlanded.push(rel);
      continue;
    }
    if (!opts.owner()) throw lost();
    await writeLive(memoryDir, rel, data);
    landed.push(rel);
    await opts.onCommitStep?.('file', rel);
  }
  for (const [rel, intent] of Object.entries(journal.indexes)) {
    const live = await hashFile(join(memoryDir, rel));
    if (live === intent.to || live !== intent.from || intent.to === null) continue;
    const data = await stagedBytes(journal.stagingDir, rel, intent.to);
    if (!data) continue;
    if (!opts.owner()) throw lost();
    await writeLive(memoryDir, rel, data);
    await opts.onCommitStep?.('index', rel);
  }
  const pointed = new Set([
    ...landed.filter((rel) => journal.files[rel]?.to !== null),
    ...Object.keys(journal.carried),
  ]);
  const present: string[] = [];
  for (const rel of [...pointed].sort()) {
    if (isIndexRel(rel) || !(await isRegularFile(join(memoryDir, rel)))) continue;
    present.push(rel);
  }
  if (!opts.owner()) throw lost();
  // One read and one write of each index for all of them: the commit holds the project's writer lease.
  await ensureIndexPointers(memoryDir, present);
  for (const rel of present) await opts.onCommitStep?.('pointer', rel);
  await opts.onCommitStep?.('merged');
  return { landed, unlanded };
}

/** What this job's commit changed, from the live bytes: every file it committed or carried, and the indexes. */
export async function stagedReceipt(memoryDir: string, journal: StagedJournal): Promise<Receipt> {
  const baseline = new Map<string, string | null>();
  for (const [rel, was] of Object.entries(journal.indexBefore)) baseline.set(rel, was);
  for (const [rel, intent] of Object.entries(journal.indexes)) baseline.set(rel, intent.from);
  for (const [rel, intent] of Object.entries(journal.files)) baseline.set(rel, intent.from);
  for (const [rel, was] of Object.entries(journal.carried)) baseline.set(rel, was);
  const after: TreeState = new Map();
  for (const rel of baseline.keys()) {
    const hash = await hashFile(join(memoryDir, rel));
    if (hash !== null) after.set(rel, hash);
  }
  return receiptFor(baseline, after, 'all');
}

/**
 * The job's range is covered already (its cursor moved: an interrupted commit of this job got past `finished`,
 * or another job of the session covered the range). What this job's commits left is settled without
 * publishing anything new: under the writer lease, files its journal landed (at their committed hash) and
 * files it carried get their pointer, and the journal is dropped; then the job's copies are removed.
 */
export async function settleCoveredStaged(
  deps: Pick<PipelineDeps, 'state' | 'waker'>,
  spec: {
    ctx: HandlerContext;
    memoryDir: string;
    journalKey: string;
    writer: { key: string; ttlMs: number };
    onCommitStep?: CommitStepHook;
  },
): Promise<void> {
  const { memoryDir } = spec;
  const stored = await deps.state.getJson<StagedJournal>(spec.journalKey);
  if (stored?.v === 1) {
    await spec.onCommitStep?.('turn');
    const turn = await waitWriterTurn(deps.state, 'extract', spec.ctx.job.id, deps.waker, {
      key: spec.writer.key,
      ttlMs: spec.writer.ttlMs,
      signal: spec.ctx.signal,
    });
    try {
      await spec.onCommitStep?.('lease');
      const landed: string[] = [];
      for (const [rel, intent] of Object.entries(stored.files)) {
        if (intent.to !== null && (await hashFile(join(memoryDir, rel))) === intent.to) landed.push(rel);
      }
      for (const rel of [...new Set([...landed, ...Object.keys(stored.carried)])].sort()) {
        if (isIndexRel(rel) || !(await isRegularFile(join(memoryDir, rel)))) continue;
        if (turn.signal.aborted) throw new ForkAbortedError('extract', 'writer lease lost while settling');
        await ensureIndexPointer(memoryDir, rel);
        await spec.onCommitStep?.('pointer', rel);
      }
      await deps.state.delete(spec.journalKey);
      await spec.onCommitStep?.('dropped');
    } finally {
      await turn.release();
    }
  }
  await removeJobStagingDirs(memoryDir, spec.ctx.job.id);
}

const isRegularFile = (path: string): Promise<boolean> =>
  fs.lstat(path).then(
    (s) => s.isFile(),
    () => false,
  );

export type CommitOutcome =
  | { ok: true; journal: StagedJournal; apply: ApplyResult }
  | { ok: false; conflicts: string[] };

/**
 * The serialized step (the caller holds the writer lease): compare-and-set of every changed memory file against
 * the fork's baseline; on a match the journal entry is recorded, then the files, then the pointers.
 */
export async function commitStaged(opts: {
  state: StateStore;
  journalKey: string;
  memoryDir: string;
  stagingDir: string;
  before: TreeState;
  after: TreeState;
  carried: Record<string, string | null>;
  owner: () => boolean;
  log: PipelineLogger;
  /** Called once the journal entry is stored (the copy must then outlive a kill). */
  onJournaled?: () => void;
  onCommitStep?: CommitStepHook;
}): Promise<CommitOutcome> {
  const { memoryDir, stagingDir, before, after } = opts;
  const change = diffTrees(before, after);
  const files: Record<string, FileIntent> = {};
  const indexes: Record<string, FileIntent> = {};
  const conflicts: string[] = [];
  for (const rel of [...change.created, ...change.updated, ...change.deleted]) {
    const from = before.get(rel) ?? null;
    const to = after.get(rel) ?? null;
    const live = await hashFile(join(memoryDir, rel));
    if (isIndexRel(rel)) {
      // The index is merged, never a conflict: the fork's copy wins only over an index nobody changed since.
      if (live === from) indexes[rel] = { from, to };
      continue;
    }
    if (rel.startsWith(`${TEAM_DIRNAME}/`) && to !== null) {
      // The policy refused secrets in the fork's writes; the commit checks the bytes it publishes again.
      const text = (await readStagedFile(join(stagingDir, rel)))?.bytes.toString('utf8') ?? '';
      if (scanForSecrets(text).length > 0) {
        opts.log.warn({ file: rel }, 'staged commit: team memory with a secret-looking value not published');
        continue;
      }
    }
    if (live !== from) conflicts.push(rel);
    else files[rel] = { from, to };
  }
  if (conflicts.length > 0) return { ok: false, conflicts };
  const indexBefore: Record<string, string | null> = {};
  for (const rel of [ENTRYPOINT_NAME, `${TEAM_DIRNAME}/${ENTRYPOINT_NAME}`]) {
    indexBefore[rel] = await hashFile(join(memoryDir, rel));
  }
  const journal: StagedJournal = { v: 1, stagingDir, files, indexes, indexBefore, carried: opts.carried };
  await opts.onCommitStep?.('compared');
  if (!opts.owner()) throw new ForkAbortedError('extract', 'writer lease lost before committing');
  // The journal entry goes first: a kill between the files below leaves it naming every intended hash.
  opts.onJournaled?.();
  await opts.state.setJson(opts.journalKey, journal, JOURNAL_TTL_MS);
  await opts.onCommitStep?.('journaled');
  const apply = await applyJournal(memoryDir, journal, {
    ...(opts.onCommitStep ? { onCommitStep: opts.onCommitStep } : {}),
    owner: opts.owner,
  });
  return { ok: true, journal, apply };
}

export interface StagedPipelineSpec<R> {
  ctx: HandlerContext;
  log: PipelineLogger;
  writer: { key: string; ttlMs: number };
  /** The live memory directory (the staging copies live in its hidden `.staging`). */
  memoryDir: string;
  /** The job's commit journal in the state store (across attempts). */
  journalKey: string;
  countsAsMemory?: (rel: string) => boolean;
  /** Files an earlier attempt of this job wrote (e.g. on the serial path), with their hash before it. */
  carried?: Record<string, string | null>;
  maxAttempts?: number;
  onCommitStep?: CommitStepHook;
  /**
   * Runs under the lease before a commit: whether the work is still due. `skip` ends the job with that result
   * (nothing published); `rerun` parks the job so it starts over (another job of the session moved the cursor).
   */
  admit?(): Promise<{ skip: R } | { rerun: true } | undefined>;
  /**
   * The fork's plan, naming the live memory directory throughout (instruction, cwd): the pipeline sets its
   * jail root to the copy and aliases the live path onto it. `stagingDir` is where the fork's files are (for
   * the job's own reads: its manifest, a policy judging the copy).
   */
  plan(view: { stagingDir: string; before: TreeState; recovered: string[] }): Promise<ForkPlan>;
  /** Side effects inside the copy before its change set is taken (metadata stamps). `false`: changed nothing. */
  prepare?(view: { stagingDir: string; change: TreeChange }): Promise<unknown>;
  /** The job's result from the receipt; records cursors and receipts (runs under the lease after a commit). */
  finish(run: { receipt: Receipt; fork: ForkOutcome | undefined }): Promise<R>;
}

export type StagedResult<R> =
  | { kind: 'done'; result: R }
  | {
      kind: 'conflicted';
      /** Files an interrupted earlier commit landed, with their hash before it (for the serial path's journal). */
      carried: Record<string, string | null>;
      conflicts: string[];
    };

export function runStagedForkPipeline<R>(
  deps: PipelineDeps,
  spec: StagedPipelineSpec<R>,
): Promise<StagedResult<R>> {
  return inSpan(
    'engram.fork extract',
    { attributes: { 'engram.queue': 'extract', 'engram.staged': true } },
    () => runStaged(deps, spec),
  );
}

async function runStaged<R>(deps: PipelineDeps, spec: StagedPipelineSpec<R>): Promise<StagedResult<R>> {
  const { ctx, log, memoryDir } = spec;
  const step = spec.onCommitStep;
  const turnOf = async (): Promise<WriterTurn> => {
    await step?.('turn');
    const turn = await waitWriterTurn(deps.state, 'extract', ctx.job.id, deps.waker, {
      key: spec.writer.key,
      ttlMs: spec.writer.ttlMs,
      signal: ctx.signal,
    });
    try {
      await step?.('lease');
    } catch (error) {
      await turn.release();
      throw error;
    }
    return turn;
  };
  const finishUnderLease = async (journal: StagedJournal, fork: ForkOutcome | undefined): Promise<R> => {
    const receipt = await stagedReceipt(memoryDir, journal);
    await step?.('receipt');
    for (const rel of receipt.created)
      if (spec.countsAsMemory?.(rel))
        deps.metrics.memoriesWritten.inc({ queue: 'extract', action: 'created' });
    for (const rel of receipt.updated)
      if (spec.countsAsMemory?.(rel))
        deps.metrics.memoriesWritten.inc({ queue: 'extract', action: 'updated' });
    const result = await inSpan(
      'engram.receipt',
      {
        attributes: {
          'engram.receipt.created': receipt.created.length,
          'engram.receipt.updated': receipt.updated.length,
        },
      },
      () => spec.finish({ receipt, fork }),
    );
    await step?.('finished');
    await deps.state.delete(spec.journalKey);
    await step?.('dropped');
    await fs.rm(journal.stagingDir, { recursive: true, force: true });
    await step?.('cleaned');
    return result;
  };

  await removeStaleStagingDirs(memoryDir).catch(() => []);
  let carried: Record<string, string | null> = { ...spec.carried };
  const stored = await deps.state.getJson<StagedJournal>(spec.journalKey);
  // A killed attempt runs no cleanup: its copy goes now, unless its journal still needs it.
  await removeJobStagingDirs(memoryDir, ctx.job.id, stored?.v === 1 ? stored.stagingDir : undefined).catch(
    () => [],
  );
  // The journal of an interrupted commit that could not be completed (its landed files are `carried`): dropped
  // with its copy once this job ends without another commit (a new commit's journal replaces it).
  let previous: string | undefined;
  const dropPrevious = async () => {
    if (!previous) return;
    await deps.state.delete(spec.journalKey);
    await fs.rm(previous, { recursive: true, force: true }).catch(() => undefined);
    previous = undefined;
  };
  if (stored?.v === 1) {
    // An earlier attempt of this job was stopped mid-commit: roll its journal forward under the lease.
    const turn = await turnOf();
    try {
      const owner = () => !turn.signal.aborted;
      const applied = await inSpan('engram.commit', {}, () =>
        applyJournal(memoryDir, stored, { ...(step ? { onCommitStep: step } : {}), owner }),
      );
      carried = { ...carried, ...stored.carried };
      for (const rel of applied.landed) carried[rel] ??= stored.files[rel]?.from ?? null;
      if (applied.unlanded.length === 0) {
        log.info({ files: applied.landed }, 'staged commit of an earlier attempt completed from its journal');
        return { kind: 'done', result: await finishUnderLease({ ...stored, carried }, undefined) };
      }
      previous = stored.stagingDir;
      log.warn({ unlanded: applied.unlanded }, 'earlier staged commit could not be completed; re-forking');
    } finally {
      await turn.release();
    }
  }

  const attempts = spec.maxAttempts ?? MAX_STAGED_ATTEMPTS;
  let conflicts: string[] = [];
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const stagingDir = stagingDirFor(memoryDir, ctx.job.id);
    let journaled = false;
    try {
      const before = await stageMemoryDir(memoryDir, stagingDir);
      const planned = await spec.plan({ stagingDir, before, recovered: Object.keys(carried) });
      // The fork changes only its copy, which it knows by the live directory's path (the one its session's
      // cached system prompt names): the tools map that path onto the copy (agent-runtime's path alias).
      const plan: ForkPlan = {
        ...planned,
        boundary: {
          ...planned.boundary,
          jail: { ...planned.boundary.jail, root: stagingDir },
          alias: { visible: memoryDir, actual: stagingDir },
        },
      };
      let toolCalls = 0;
      const counted: ForkPlan = {
        ...plan,
        onMessage: async (entry) => {
          const content = entry.type === 'assistant' ? entry.message?.content : undefined;
          if (Array.isArray(content))
            for (const b of content as Array<{ type: string }>) if (b.type === 'tool_use') toolCalls++;
          await plan.onMessage?.(entry);
        },
      };
      const fork = await runFork(deps, counted, ctx.signal, {}, log);
      recordForkMetrics(deps.metrics, 'extract', fork);
      if (fork.endReason === 'aborted' || ctx.signal.aborted) {
        throw new ForkAbortedError(
          'extract',
          String((ctx.signal.reason as Error | undefined)?.message ?? 'aborted'),
        );
      }
      let after = toolCalls === 0 ? before : await hashTree(stagingDir);
      let change = diffTrees(before, after);
      const changed = change.created.length + change.updated.length + change.deleted.length > 0;
      if (changed && spec.prepare && (await spec.prepare({ stagingDir, change })) !== false) {
        after = await hashTree(stagingDir);
        change = diffTrees(before, after);
      }
      if (change.deleted.length > 0) {
        // A fork's tools cannot delete a file: one missing from the copy means the copy itself was damaged (gone
        // from under a stalled attempt), and publishing that would delete live memories. Nothing is published.
        throw new ForkAbortedError('extract', `its staging copy lost ${change.deleted.length} file(s)`);
      }
      if (!changed && Object.keys(carried).length === 0) {
        // Nothing to publish (the usual "nothing to save"): no lease, no journal; the cursor only moves forward.
        const receipt: Receipt = { created: [], updated: [], deleted: [], files: [] };
        const result = await spec.finish({ receipt, fork });
        await dropPrevious();
        return { kind: 'done', result };
      }
      const turn = await turnOf();
      try {
        const owner = () => !turn.signal.aborted;
        const admitted = await spec.admit?.();
        if (admitted && 'skip' in admitted) {
          await dropPrevious();
          return { kind: 'done', result: admitted.skip };
        }
        if (admitted && 'rerun' in admitted) throw await ctx.defer(50);
        await step?.('admitted');
        const out = await inSpan('engram.commit', {}, () =>
          commitStaged({
            state: deps.state,
            journalKey: spec.journalKey,
            memoryDir,
            stagingDir,
            before,
            after,
            carried,
            owner,
            log,
            onJournaled: () => {
              journaled = true;
            },
            ...(step ? { onCommitStep: step } : {}),
          }),
        );
        if (!out.ok) {
          conflicts = out.conflicts;
          log.info({ conflicts, attempt }, 'staged commit conflicted; re-forking on a fresh view');
          continue;
        }
        if (out.apply.unlanded.length > 0) {
          // Cannot happen under the lease (every file was compared just before); treated as a conflict.
          conflicts = out.apply.unlanded;
          for (const rel of out.apply.landed) carried[rel] ??= out.journal.files[rel]?.from ?? null;
          continue;
        }
        if (!owner()) throw new ForkAbortedError('extract', 'writer lease lost while committing');
        // This commit's journal replaced the interrupted one's; only that one's copy is left to remove.
        if (previous) await fs.rm(previous, { recursive: true, force: true }).catch(() => undefined);
        previous = undefined;
        const result = await finishUnderLease(out.journal, fork);
        return { kind: 'done', result };
      } finally {
        await turn.release();
      }
    } finally {
      // A copy its journal names is kept for the retry's roll-forward (removed once that completes).
      if (!journaled) await fs.rm(stagingDir, { recursive: true, force: true }).catch(() => undefined);
      else if (!(await deps.state.getJson(spec.journalKey).catch(() => ({})))) {
        await fs.rm(stagingDir, { recursive: true, force: true }).catch(() => undefined);
      }
    }
  }
  // Keep what landed credited: the caller's serial path seeds its journal with `carried`. A staged journal
  // still stored (its roll-forward left files) is dropped only after that.
  return { kind: 'conflicted', carried, conflicts };
}
