import { EngramError } from '@engram/errors/engram-error';
import {
  type ChainEntry,
  createSystemEntry,
  type EntryStamp,
  isChainEntry,
  isCompactBoundary,
  SYSTEM_SUBTYPES,
  type TranscriptEntry,
} from './entry.js';
import type { TranscriptStore } from './store.js';

// The live conversation is not the file: it is the path from a leaf back to the root through parentUuid.
// A compact boundary starts a new root (parentUuid null) and remembers where it came from in
// logicalParentUuid; the walk follows that link too, so the whole history stays reachable, while `live`
// (what the model sees) starts after the last boundary. Claude Code prunes what precedes a boundary, so a
// logicalParentUuid naming no entry in the file is normal, not a broken chain.
//
// Claude Code stores one assistant reply as chained entries, one per content block, all sharing `message.id`,
// and hangs each tool_result off its own tool_use entry (docs/claude-code-format.md, "Split replies"): the
// leaf→root walk then misses every result but the last. After the walk, each reply's fragments and the
// tool_result entries hanging off any of them are spliced back together, in file order.

export class ChainError extends EngramError {
  declare readonly code: 'TRANSCRIPT_LEAF_NOT_FOUND';
  constructor(code: 'TRANSCRIPT_LEAF_NOT_FOUND', message: string) {
    super(code, message, { retryable: false });
  }
}

export interface Chain {
  /** Every entry from the root to the leaf, across compact boundaries. */
  entries: ChainEntry[];
  /** Entries after the last compact boundary (all of them when there is none): the model's context. */
  live: ChainEntry[];
  /** The last compact boundary on the path, if any. */
  boundary?: ChainEntry;
  leaf?: ChainEntry;
  /** The walk met an entry twice; it stopped there instead of looping. */
  cycle: boolean;
  /** A parentUuid that names no entry in the file (the walk ended early there). */
  missingParent?: string;
  /** The last boundary's logicalParentUuid when it names no entry in the file (pruned history; harmless). */
  missingLogicalParent?: string;
  /** Entries spliced in that the walk alone did not reach (split replies' fragments and parallel results). */
  recovered: number;
}

export interface BuildChainOptions {
  /** Follow logicalParentUuid across compact boundaries (default true; `live` is the same either way). */
  crossBoundaries?: boolean;
  /** Read a sidechain (a `subagents/` transcript, where every entry is a sidechain). Default false. */
  sidechain?: boolean;
}

/** Entry types that make up the conversation; `progress` and metadata lines never end it. */
const LEAF_TYPES = new Set(['user', 'assistant', 'attachment', 'system']);

/**
 * The newest leaf: the last main-chain (non-sidechain, or only sidechain with `sidechain`) user, assistant,
 * attachment or system entry in file order that no entry names as its parent.
 */
export function findLeaf(
  entries: readonly TranscriptEntry[],
  options: { sidechain?: boolean } = {},
): ChainEntry | undefined {
  const parents = new Set<string>();
  for (const e of entries) if (typeof e.parentUuid === 'string') parents.add(e.parentUuid);
  return leafOf(entries, parents, options.sidechain === true);
}

function leafOf(
  entries: readonly TranscriptEntry[],
  parents: ReadonlySet<string>,
  sidechain: boolean,
): ChainEntry | undefined {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    if (!isChainEntry(e) || !LEAF_TYPES.has(e.type) || parents.has(e.uuid)) continue;
    if ((e.isSidechain === true) === sidechain) return e;
  }
  return undefined;
}

export function buildChain(
  entries: readonly TranscriptEntry[],
  leafUuid?: string,
  options: BuildChainOptions = {},
): Chain {
  // One pass indexes the entries and notes every uuid that is someone's parent (for the leaf search).
  const byUuid = new Map<string, ChainEntry>();
  const parents = leafUuid === undefined ? new Set<string>() : undefined;
  for (const e of entries) {
    if (parents && typeof e.parentUuid === 'string') parents.add(e.parentUuid);
    if (isChainEntry(e) && !byUuid.has(e.uuid)) byUuid.set(e.uuid, e);
  }
  let leaf: ChainEntry | undefined;
  if (leafUuid !== undefined) {
    leaf = byUuid.get(leafUuid);
    if (!leaf) {
      throw new ChainError(
        'TRANSCRIPT_LEAF_NOT_FOUND',
        `Transcript has no entry with uuid ${leafUuid}; the job's leaf must come from this session's transcript.`,
      );
    }
  } else {
    leaf = leafOf(entries, parents!, options.sidechain === true);
  }
  if (!leaf) return { entries: [], live: [], cycle: false, recovered: 0 };

  const cross = options.crossBoundaries ?? true;
  const reversed: ChainEntry[] = [];
  const seen = new Set<string>();
  let cycle = false;
  let missingParent: string | undefined;
  let missingLogicalParent: string | undefined;
  let liveLength = -1;
  let boundary: ChainEntry | undefined;
  let current: ChainEntry | undefined = leaf;
  while (current) {
    if (seen.has(current.uuid)) {
      cycle = true;
      break;
    }
    seen.add(current.uuid);
    if (liveLength < 0 && isCompactBoundary(current)) {
      liveLength = reversed.length;
      boundary = current;
    }
    reversed.push(current);
    let next: string | null | undefined = current.parentUuid;
    let logical = false;
    if ((next === null || next === undefined) && isCompactBoundary(current)) {
      if (!cross) break;
      next = current.logicalParentUuid;
      logical = true;
    }
    if (next === null || next === undefined) break;
    current = byUuid.get(next);
    if (!current) {
      if (logical) missingLogicalParent ??= next;
      else missingParent = next;
    }
  }
  const walked = reversed.reverse();
  const chainEntries = spliceSplitReplies(walked, entries, options.sidechain === true);
  const boundaryIndex = boundary ? chainEntries.lastIndexOf(boundary) : -1;
  const live = liveLength < 0 || boundaryIndex < 0 ? chainEntries : chainEntries.slice(boundaryIndex + 1);
  return {
    entries: chainEntries,
    live,
    ...(boundary ? { boundary } : {}),
    leaf,
    cycle,
    ...(missingParent !== undefined ? { missingParent } : {}),
    ...(missingLogicalParent !== undefined ? { missingLogicalParent } : {}),
    recovered: chainEntries.length - walked.length,
  };
}

function messageIdOf(entry: TranscriptEntry): string | undefined {
  if (entry.type !== 'assistant') return undefined;
  const id = entry.message?.id;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

function hasToolResult(entry: TranscriptEntry): boolean {
  const content = entry.message?.content;
  return (
    entry.type === 'user' && Array.isArray(content) && content.some((block) => block.type === 'tool_result')
  );
}

/**
 * Re-splices split replies: at the first fragment of a reply on the path, every fragment with the same
 * `message.id` (file order) is placed, followed by every tool_result entry whose parent is one of them (file
 * order); later copies of those entries on the path are skipped. Entries already on the path keep their place
 * otherwise. Returns `path` itself when no reply is split.
 */
function spliceSplitReplies(
  path: ChainEntry[],
  entries: readonly TranscriptEntry[],
  sidechain: boolean,
): ChainEntry[] {
  // A split reply always has at least two of its fragments on the path (they are chained one to the next), so
  // a path on which no message.id repeats has nothing to re-splice — the common case, checked without
  // touching the rest of the file.
  const replyIds = new Set<string>();
  const seenIds = new Set<string>();
  for (const e of path) {
    const id = messageIdOf(e);
    if (id === undefined) continue;
    if (seenIds.has(id)) replyIds.add(id);
    else seenIds.add(id);
  }
  if (replyIds.size === 0) return path;
  const onPath = new Set(path.map((e) => e.uuid));
  const fragments = new Map<string, ChainEntry[]>();
  const fragmentReply = new Map<string, string>();
  for (const e of entries) {
    if (!isChainEntry(e) || (e.isSidechain === true) !== sidechain) continue;
    const id = messageIdOf(e);
    if (id === undefined || !replyIds.has(id)) continue;
    if (fragmentReply.has(e.uuid)) continue;
    fragmentReply.set(e.uuid, id);
    const list = fragments.get(id);
    if (list) list.push(e);
    else fragments.set(id, [e]);
  }
  const results = new Map<string, ChainEntry[]>();
  let offPath = false;
  for (const list of fragments.values()) if (list.some((f) => !onPath.has(f.uuid))) offPath = true;
  for (const e of entries) {
    if (!isChainEntry(e) || (e.isSidechain === true) !== sidechain || !hasToolResult(e)) continue;
    const reply = typeof e.parentUuid === 'string' ? fragmentReply.get(e.parentUuid) : undefined;
    if (reply === undefined) continue;
    const list = results.get(reply);
    if (!list) results.set(reply, [e]);
    else if (!list.includes(e)) list.push(e);
    if (!onPath.has(e.uuid)) offPath = true;
  }
  if (!offPath) return path;
  const placed = new Set<string>();
  const out: ChainEntry[] = [];
  for (const e of path) {
    if (placed.has(e.uuid)) continue;
    const reply = fragmentReply.get(e.uuid);
    if (reply === undefined) {
      out.push(e);
      placed.add(e.uuid);
      continue;
    }
    for (const group of [fragments.get(reply) ?? [], results.get(reply) ?? []]) {
      for (const g of group) {
        if (placed.has(g.uuid)) continue;
        out.push(g);
        placed.add(g.uuid);
      }
    }
  }
  return out;
}

export interface CompactBoundaryInput {
  sessionId: string;
  cwd: string;
  /** The leaf the compaction summarised up to; kept as logicalParentUuid. */
  logicalParentUuid: string;
  trigger: 'manual' | 'auto';
  preTokens: number;
  now?: () => Date;
  uuid?: () => string;
}

/** A compact boundary entry: a new root (parentUuid null) that points back to the prior leaf. */
export function createCompactBoundary(input: CompactBoundaryInput): ChainEntry {
  const s: EntryStamp = {
    sessionId: input.sessionId,
    cwd: input.cwd,
    parentUuid: null,
    ...(input.now ? { now: input.now } : {}),
    ...(input.uuid ? { uuid: input.uuid } : {}),
  };
  return createSystemEntry(s, SYSTEM_SUBTYPES.compactBoundary, 'Conversation compacted', {
    logicalParentUuid: input.logicalParentUuid,
    compactMetadata: { trigger: input.trigger, preTokens: input.preTokens },
  });
}

/** Appends a compact boundary and returns it; the summary message that follows uses it as parent. */
export async function appendCompactBoundary(
  store: TranscriptStore,
  input: CompactBoundaryInput,
): Promise<ChainEntry> {
  const boundary = createCompactBoundary(input);
  await store.append([boundary]);
  return boundary;
}
