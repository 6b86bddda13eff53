import { join, relative, resolve, sep } from 'node:path';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import {
  createSnapshot,
  listSnapshots,
  pruneSnapshots,
  restoreSnapshot,
  snapshotDir,
} from '@engram/memory-core/dream/snapshot';
import type { StateStore } from '@engram/queue/state/state-store';
import { hashFile, hashTree, isVisibleMarkdown, type TreeChange, type TreeState } from './tree-hash.js';

// How a fork's changes are made safe, one of three ways:
//   journal  (extract)        — changes are kept even when the attempt fails; the job's journal (in the state
//                               store, across attempts) records each file's hash before the job first wrote it,
//                               so a retry knows what an earlier attempt wrote and credits it exactly once;
//   file     (session memory) — the one notes file's previous content, written back when the guard refuses;
//   snapshot (dream)          — a copy of every memory file under `.history/` (the baseline of the job's first
//                               attempt when a killed attempt left one), restored on refusal or failure.

export interface ForkTransaction {
  /** Put the previous state back whenever the job fails (not only when the guard refuses). */
  readonly restoreOnFailure: boolean;
  /** Starts (or resumes) the transaction; `recovered` are files an earlier attempt of this job wrote. */
  begin(before: TreeState): Promise<{ recovered: string[] }>;
  /** Sees every message of the fork before its tool calls run. */
  noteMessage?(entry: ChainEntry, cwd: string): Promise<void>;
  /** Each file's state before this job first touched it (null: it did not exist). */
  baseline(before: TreeState): Promise<ReadonlyMap<string, string | null>>;
  /** Which changed files are this job's doing ('all': everything under the root). */
  credited(change: TreeChange): Set<string> | 'all';
  /** Puts the previous state back; `note` completes the refusal's message. */
  restore(opts: { keepRefused: boolean; why: string }): Promise<{ note?: string }>;
  /** The job succeeded: drop the journal, prune old snapshots. */
  commit(): Promise<void>;
}

/** Absolute targets of the Write/Edit calls an assistant entry makes (before they run). */
export function writeTargets(entry: ChainEntry, cwd: string): string[] {
  const content = entry.type === 'assistant' ? entry.message?.content : undefined;
  if (!Array.isArray(content)) return [];
  const out: string[] = [];
  for (const block of content as Array<{ type: string; name?: string; input?: { file_path?: unknown } }>) {
    if (block.type !== 'tool_use' || (block.name !== 'Write' && block.name !== 'Edit')) continue;
    if (typeof block.input?.file_path === 'string') out.push(resolve(cwd, block.input.file_path));
  }
  return out;
}

export interface ExtractJournal {
  /** Relative path → the file's hash before this job's first write to it (null: it did not exist). */
  intents: Record<string, string | null>;
}

export interface JournalTransaction extends ForkTransaction {
  /** Files this job (any attempt) set out to write, relative to the root. */
  readonly intended: string[];
  /** Credits a file the job's commit step changed itself (an index it added a pointer to). */
  credit(rel: string): void;
}

/** A job's journal outlives its retries comfortably (attempts with backoff span about a minute). */
export const JOURNAL_TTL_MS = 24 * 3600 * 1000;

export function journalTransaction(opts: {
  state: StateStore;
  key: string;
  root: string;
  /** Which relative paths are journaled (default: visible Markdown). */
  include?: (rel: string) => boolean;
}): JournalTransaction {
  const include = opts.include ?? isVisibleMarkdown;
  let journal: ExtractJournal = { intents: {} };
  const committed = new Set<string>();
  const toRel = (abs: string) => relative(opts.root, abs).split(sep).join('/');
  const save = () => opts.state.setJson(opts.key, journal, JOURNAL_TTL_MS);
  return {
    restoreOnFailure: false,
    get intended() {
      return Object.keys(journal.intents);
    },
    async begin(before) {
      const stored = await opts.state.getJson<ExtractJournal>(opts.key);
      journal = stored?.intents ? stored : { intents: {} };
      // An earlier attempt's journal is saved again (its time to live restarts); with none, there is nothing
      // to save: a missing journal and an empty one read the same, and the first intent saves it.
      if (stored?.intents) await save();
      // An intent whose file no longer has its pre-write hash: that earlier attempt's write landed.
      return {
        recovered: Object.entries(journal.intents)
          .filter(([rel, was]) => (before.get(rel) ?? null) !== was)
          .map(([rel]) => rel),
      };
    },
    async noteMessage(entry, cwd) {
      const fresh = writeTargets(entry, cwd)
        .map(toRel)
        .filter((rel) => !rel.startsWith('..') && include(rel) && !(rel in journal.intents));
      if (fresh.length === 0) return;
      for (const rel of fresh) journal.intents[rel] = await hashFile(join(opts.root, rel));
      await save();
    },
    async baseline(before) {
      const out = new Map<string, string | null>(before);
      for (const [rel, was] of Object.entries(journal.intents)) out.set(rel, was);
      return out;
    },
    credit(rel) {
      committed.add(rel);
    },
    // Only what this job wrote: the targets of its Write/Edit calls (every attempt's, recorded before each ran)
    // and what its commit step wrote. Another writer's file that changed meanwhile (the session's own agent, the
    // MCP server, a worker of another namespace: none of them takes this job's writer lease) is not credited.
    credited() {
      return new Set([...Object.keys(journal.intents), ...committed]);
    },
    async restore() {
      // Nothing to put back: an extraction's writes are kept and credited once through the journal.
      return {};
    },
    async commit() {
      await opts.state.delete(opts.key);
    },
  };
}

export function fileTransaction(opts: {
  path: string;
  /** Creates the file when missing (the notes template). */
  prepare(): Promise<void>;
  read(): Promise<string | undefined>;
  write(content: string): Promise<void>;
  /** Content when the file cannot be read. */
  fallback: string;
}): ForkTransaction & { readonly beforeContent: string } {
  let beforeContent = opts.fallback;
  return {
    restoreOnFailure: false,
    get beforeContent() {
      return beforeContent;
    },
    async begin() {
      await opts.prepare();
      beforeContent = (await opts.read()) ?? opts.fallback;
      return { recovered: [] };
    },
    async baseline(before) {
      return before;
    },
    credited: () => 'all',
    async restore() {
      await opts.write(beforeContent);
      return {};
    },
    async commit() {},
  };
}

export interface SnapshotTransaction extends ForkTransaction {
  /** The state the result is judged against: the first attempt's snapshot when a killed attempt left one. */
  readonly baselineDir: string;
  readonly snapshotId: string;
  /** Set when resuming after an interrupted attempt of the same job. */
  readonly resumedFrom: string | undefined;
}

export function snapshotTransaction(opts: {
  memoryDir: string;
  /** Identifies the job's snapshot across its attempts. */
  label: string;
  /** Label of the copy of a refused result kept for inspection. */
  refusedLabel: (why: string) => string;
  keep: number;
}): SnapshotTransaction {
  let baselineId: string | undefined;
  let snapshotId: string | undefined;
  return {
    restoreOnFailure: true,
    get baselineDir() {
      return baselineId ? snapshotDir(opts.memoryDir, baselineId) : opts.memoryDir;
    },
    get snapshotId() {
      return baselineId ?? snapshotId ?? '';
    },
    get resumedFrom() {
      return baselineId;
    },
    async begin() {
      // A killed earlier attempt of this job left its pre-run snapshot: judge this run against that baseline,
      // so its partial writes count too (and a refusal restores it), instead of against a half-done state.
      baselineId = (await listSnapshots(opts.memoryDir)).filter((s) => s.label === opts.label).at(-1)?.id;
      snapshotId = (await createSnapshot(opts.memoryDir, { label: opts.label })).id;
      return { recovered: [] };
    },
    async baseline(before) {
      return baselineId ? hashTree(snapshotDir(opts.memoryDir, baselineId)) : before;
    },
    credited: () => 'all',
    async restore({ keepRefused, why }) {
      const target = baselineId ?? snapshotId;
      if (!target) return {};
      const restored = await restoreSnapshot(opts.memoryDir, target, {
        backupCurrent: keepRefused,
        backupLabel: opts.refusedLabel(why).slice(0, 200),
      });
      return {
        note:
          ` The memory directory was restored from snapshot ${target}` +
          (restored.backupId ? ` (the refused result is kept as snapshot ${restored.backupId})` : '') +
          '.',
      };
    },
    async commit() {
      await pruneSnapshots(opts.memoryDir, { keep: opts.keep });
    },
  };
}
