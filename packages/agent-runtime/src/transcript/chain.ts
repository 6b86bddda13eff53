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
// (what the model sees) starts after the last boundary.

export class ChainError extends Error {
  override name = 'ChainError';
  constructor(
    readonly code: 'leaf_not_found',
    message: string,
  ) {
    super(message);
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
}

export interface BuildChainOptions {
  /** Follow logicalParentUuid across compact boundaries (default true; `live` is the same either way). */
  crossBoundaries?: boolean;
}

/** The newest leaf: the last non-sidechain chain entry in file order that no entry names as its parent. */
export function findLeaf(entries: readonly TranscriptEntry[]): ChainEntry | undefined {
  const parents = new Set<string>();
  for (const e of entries) if (typeof e.parentUuid === 'string') parents.add(e.parentUuid);
  return leafOf(entries, parents);
}

function leafOf(entries: readonly TranscriptEntry[], parents: ReadonlySet<string>): ChainEntry | undefined {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    if (isChainEntry(e) && e.isSidechain !== true && !parents.has(e.uuid)) return e;
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
        'leaf_not_found',
        `Transcript has no entry with uuid ${leafUuid}; the job's leaf must come from this session's transcript.`,
      );
    }
  } else {
    leaf = leafOf(entries, parents!);
  }
  if (!leaf) return { entries: [], live: [], cycle: false };

  const cross = options.crossBoundaries ?? true;
  const reversed: ChainEntry[] = [];
  const seen = new Set<string>();
  let cycle = false;
  let missingParent: string | undefined;
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
    if ((next === null || next === undefined) && isCompactBoundary(current)) {
      if (!cross) break;
      next = current.logicalParentUuid;
    }
    if (next === null || next === undefined) break;
    current = byUuid.get(next);
    if (!current) missingParent = next;
  }
  const chainEntries = reversed.reverse();
  const live = liveLength < 0 ? chainEntries : chainEntries.slice(chainEntries.length - liveLength);
  return {
    entries: chainEntries,
    live,
    ...(boundary ? { boundary } : {}),
    leaf,
    cycle,
    ...(missingParent !== undefined ? { missingParent } : {}),
  };
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
