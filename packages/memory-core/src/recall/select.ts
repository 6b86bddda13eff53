import { posix } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { formatMemoryManifest, type MemoryHeader } from '../memdir/scan.js';
import { LEXICAL_FALLBACK_MATCHES, lexicalRank, sharesTopicalTermWith } from './lexical.js';
import {
  buildSelectionUserMessage,
  MAX_SELECTED_MEMORIES,
  MEMORY_SELECTION_SYSTEM_PROMPT,
  SELECTION_OUTPUT_JSON_SCHEMA,
  SELECTOR_MAX_TOKENS,
  selectionOutputSchema,
} from './selection-prompt.js';
import { findSupersessions, resolveMemoryLink, type Supersession } from './supersession.js';

// Which memories to surface for a query: drop what the context already holds and what a newer memory
// supersedes (recall/supersession.ts), ask the selector model, keep only names it was shown, then let the
// picks' `[[links]]` fill the remaining slots, at most five in all. When the lexical fallback decides it
// injects only its best match, and a memory that match links to joins only if it shares a topical word with
// the query: with no model judging, the link is one piece of evidence, not enough alone. The model is reached through an
// injected function; when it is slow, fails or answers nonsense, the lexical ranking decides instead, so a
// recall degrades rather than fails (docs/design.md §5).

/** The selector must answer within this, or the lexical fallback decides (the turn is moving on). */
export const DEFAULT_SELECTOR_TIMEOUT_MS = 2_000;

export interface SelectorRequest {
  system: string;
  user: string;
  /** SELECTION_OUTPUT_JSON_SCHEMA, for `output_format: { type: 'json_schema', schema }`. */
  schema: Record<string, unknown>;
  maxTokens: typeof SELECTOR_MAX_TOKENS;
  /** Aborted on timeout or when the caller's signal aborts; pass it to the HTTP call. */
  signal: AbortSignal;
}

/** Sends one selector request and resolves with the reply parsed as JSON (not yet validated). */
export type MemorySelector = (request: SelectorRequest) => Promise<unknown>;

/** What a selector throws when the reply is not JSON at all (counts as invalid output, not as an error). */
export class SelectorOutputError extends EngramError {
  constructor(message: string) {
    super('SELECTOR_INVALID_OUTPUT', message, { retryable: false });
  }
}

/** `model`: the selector decided; `fallback`: the lexical ranking did; `empty`: there was nothing to choose from. */
export type RecallOutcome = 'model' | 'fallback' | 'empty';
export type FallbackReason = 'timeout' | 'selector-error' | 'invalid-output';

export interface SelectRelevantMemoriesInput {
  query: string;
  /** The scan's headers (≤200, newest first). */
  headers: readonly MemoryHeader[];
  /** Paths relative to the memory directory already injected in this context. */
  alreadySurfaced?: Iterable<string>;
  /** Paths relative to the memory directory the agent already read or wrote in this context. */
  alreadyRead?: Iterable<string>;
  recentTools?: readonly string[];
  selector: MemorySelector;
  /** Default DEFAULT_SELECTOR_TIMEOUT_MS. */
  timeoutMs?: number;
  /** Aborting it rejects with its reason (no fallback: whoever aborted no longer wants an answer). */
  signal?: AbortSignal;
}

export interface SelectionResult {
  outcome: RecallOutcome;
  /** The chosen headers, in the selector's (or the ranking's) order, at most MAX_SELECTED_MEMORIES. */
  selected: MemoryHeader[];
  fallbackReason?: FallbackReason;
  /** A human-readable detail for logs (error message, schema problem). */
  fallbackDetail?: string;
  /** Headers offered to the selector after removing surfaced and read files. */
  candidates: MemoryHeader[];
  /** Names the selector returned that were not in the manifest (ignored). */
  unknownPicks: string[];
  /** Memories added because a pick links to them (`to`), in the order they were added. */
  linked: Array<{ from: string; to: string }>;
  /** Supersessions whose newer memory is in `selected` (its older version was kept out of the manifest). */
  superseded: Supersession[];
}

/** Normal form of a relative memory path for comparisons: NFC, forward slashes, no `./`. */
export function normalizeMemoryRelPath(path: string): string {
  const normal = posix.normalize(path.normalize('NFC'));
  return normal.startsWith('./') ? normal.slice(2) : normal;
}

class SelectorTimeout extends EngramError {
  constructor() {
    super('SELECTOR_TIMEOUT', 'the recall selector did not answer in time', { retryable: true });
  }
}

export async function selectRelevantMemories(input: SelectRelevantMemoriesInput): Promise<SelectionResult> {
  input.signal?.throwIfAborted();
  const excluded = new Set<string>();
  for (const p of input.alreadySurfaced ?? []) excluded.add(normalizeMemoryRelPath(p));
  for (const p of input.alreadyRead ?? []) excluded.add(normalizeMemoryRelPath(p));
  // Removed before asking, so the five slots go to memories the context does not hold yet, and the model is
  // never shown two versions of one fact.
  const supersessions = findSupersessions(input.headers);
  const candidates = input.headers.filter(
    (h) => !excluded.has(normalizeMemoryRelPath(h.filename)) && !supersessions.has(h.filename),
  );
  if (candidates.length === 0)
    return { outcome: 'empty', selected: [], candidates, unknownPicks: [], linked: [], superseded: [] };
  const finish = (
    outcome: RecallOutcome,
    picks: MemoryHeader[],
    extra: Pick<SelectionResult, 'fallbackReason' | 'fallbackDetail'> & { unknownPicks?: string[] } = {},
  ): SelectionResult => {
    const { selected, linked } = addLinkedMemories(
      picks,
      candidates,
      input.headers,
      supersessions,
      outcome === 'fallback' ? sharesTopicalTermWith(input.query) : undefined,
    );
    const chosen = new Set(selected.map((h) => h.filename));
    const superseded = [...supersessions.values()].filter((s) => chosen.has(s.newer));
    return {
      outcome,
      selected,
      ...(extra.fallbackReason ? { fallbackReason: extra.fallbackReason } : {}),
      ...(extra.fallbackDetail !== undefined ? { fallbackDetail: extra.fallbackDetail } : {}),
      candidates,
      unknownPicks: extra.unknownPicks ?? [],
      linked,
      superseded,
    };
  };

  const byName = new Map(candidates.map((h) => [normalizeMemoryRelPath(h.filename), h]));
  const timeoutMs = input.timeoutMs ?? DEFAULT_SELECTOR_TIMEOUT_MS;
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let rejectOnAbort: ((reason: unknown) => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    rejectOnAbort = reject;
  });
  const onAbort = () => {
    controller.abort(input.signal?.reason);
    rejectOnAbort?.(input.signal?.reason);
  };
  input.signal?.addEventListener('abort', onAbort, { once: true });
  const fallback = (reason: FallbackReason, detail: string): SelectionResult =>
    finish(
      'fallback',
      lexicalRank(input.query, candidates, { limit: LEXICAL_FALLBACK_MATCHES }).map((m) => m.header),
      { fallbackReason: reason, fallbackDetail: detail },
    );

  let reply: unknown;
  try {
    const request: SelectorRequest = {
      system: MEMORY_SELECTION_SYSTEM_PROMPT,
      user: buildSelectionUserMessage({
        query: input.query,
        manifest: formatMemoryManifest(candidates),
        recentTools: input.recentTools ?? [],
      }),
      schema: SELECTION_OUTPUT_JSON_SCHEMA,
      maxTokens: SELECTOR_MAX_TOKENS,
      signal: controller.signal,
    };
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new SelectorTimeout()), timeoutMs);
    });
    // The race also covers a selector that ignores its signal.
    reply = await Promise.race([Promise.resolve().then(() => input.selector(request)), timeout, aborted]);
  } catch (error) {
    if (input.signal?.aborted) throw input.signal.reason;
    if (error instanceof SelectorTimeout) {
      controller.abort(new Error(`recall selector timed out after ${timeoutMs} ms`));
      return fallback('timeout', `no answer within ${timeoutMs} ms`);
    }
    if (error instanceof SelectorOutputError) return fallback('invalid-output', error.message);
    return fallback('selector-error', (error as Error)?.message ?? String(error));
  } finally {
    clearTimeout(timer);
    input.signal?.removeEventListener('abort', onAbort);
  }

  const parsed = selectionOutputSchema.safeParse(reply);
  if (!parsed.success) {
    return fallback(
      'invalid-output',
      parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'} ${i.message}`).join('; '),
    );
  }
  const selected: MemoryHeader[] = [];
  const unknownPicks: string[] = [];
  const seen = new Set<string>();
  for (const name of parsed.data.selected_memories) {
    const key = normalizeMemoryRelPath(name.trim());
    const header = byName.get(key);
    if (!header) {
      unknownPicks.push(name);
      continue;
    }
    if (seen.has(key)) continue;
    seen.add(key);
    if (selected.length < MAX_SELECTED_MEMORIES) selected.push(header);
  }
  return finish('model', selected, { unknownPicks });
}

/**
 * Fills the slots the picks leave free with the memories they link to (one hop, in pick order then link
 * order), within MAX_SELECTED_MEMORIES. A link is resolved against every scanned memory (resolveMemoryLink),
 * a superseded target is replaced by its newer version, and only manifest candidates qualify (not already
 * surfaced or read).
 */
export function addLinkedMemories(
  picks: readonly MemoryHeader[],
  candidates: readonly MemoryHeader[],
  allHeaders: readonly MemoryHeader[],
  supersessions: ReadonlyMap<string, Supersession> = new Map(),
  /** When given, a linked memory must also pass it (the lexical fallback's shared-word test). */
  accept?: (header: MemoryHeader) => boolean,
): { selected: MemoryHeader[]; linked: Array<{ from: string; to: string }> } {
  const selected = picks.slice(0, MAX_SELECTED_MEMORIES);
  const linked: Array<{ from: string; to: string }> = [];
  const eligible = new Map(candidates.map((h) => [h.filename, h]));
  const taken = new Set(selected.map((h) => h.filename));
  const byName = new Map(allHeaders.map((h) => [h.filename, h]));
  for (const pick of picks.slice(0, MAX_SELECTED_MEMORIES)) {
    for (const slug of pick.links ?? []) {
      if (selected.length >= MAX_SELECTED_MEMORIES) return { selected, linked };
      let target = resolveMemoryLink(slug, allHeaders);
      const newer = target && supersessions.get(target.filename);
      if (newer) target = byName.get(newer.newer);
      if (!target || taken.has(target.filename)) continue;
      const candidate = eligible.get(target.filename);
      if (!candidate || (accept && !accept(candidate))) continue;
      taken.add(candidate.filename);
      selected.push(candidate);
      linked.push({ from: pick.filename, to: candidate.filename });
    }
  }
  return { selected, linked };
}
