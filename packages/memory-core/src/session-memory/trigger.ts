// When the session's rolling summary is due for an update (docs/design.md §5 `session-memory`; docs/claude-code-memory.md §7.5–7.7).
// Evaluated by the foreground after every model reply in the main thread, and again by the worker before it
// spends a fork, on the same plain inputs.

/** Context size (tokens) at which a session starts keeping a summary at all. */
export const SESSION_MEMORY_INIT_TOKENS = 10_000;
/** Context growth (tokens) since the last update that an update always requires. */
export const SESSION_MEMORY_MIN_GROWTH_TOKENS = 5_000;
/** Tool calls since the last update that make a mid-turn update worthwhile. */
export const SESSION_MEMORY_TOOL_CALLS = 3;

export interface SessionMemoryThresholds {
  initTokens: number;
  minGrowthTokens: number;
  toolCalls: number;
}

export const DEFAULT_SESSION_MEMORY_THRESHOLDS: Readonly<SessionMemoryThresholds> = Object.freeze({
  initTokens: SESSION_MEMORY_INIT_TOKENS,
  minGrowthTokens: SESSION_MEMORY_MIN_GROWTH_TOKENS,
  toolCalls: SESSION_MEMORY_TOOL_CALLS,
});

/** Defaults with overrides applied; as in the reference, only positive finite overrides count. */
export function resolveSessionMemoryThresholds(
  overrides: Partial<SessionMemoryThresholds> = {},
): SessionMemoryThresholds {
  const pick = (value: number | undefined, fallback: number) =>
    typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : fallback;
  return {
    initTokens: pick(overrides.initTokens, SESSION_MEMORY_INIT_TOKENS),
    minGrowthTokens: pick(overrides.minGrowthTokens, SESSION_MEMORY_MIN_GROWTH_TOKENS),
    toolCalls: pick(overrides.toolCalls, SESSION_MEMORY_TOOL_CALLS),
  };
}

export interface SessionMemoryTriggerInput {
  /** The session already crossed the initialisation threshold (one-way). */
  initialized: boolean;
  /** Current context size (`tokenCountWithEstimation` over the live chain). */
  contextTokens: number;
  /** Context size at the last update; 0 or undefined before the first. */
  tokensAtLastUpdate?: number | undefined;
  /** tool_use blocks in assistant messages since the last update (`countToolCallsSince`). */
  toolCallsSinceLastUpdate: number;
  /** The newest assistant reply asked for tools (false means a natural break in the conversation). */
  lastReplyHadToolCalls: boolean;
  thresholds?: Partial<SessionMemoryThresholds> | undefined;
}

export interface SessionMemoryTriggerDecision {
  /** Run (foreground: enqueue; worker: fork) an update now. */
  update: boolean;
  /** The session crossed the initialisation threshold with this call: record `initialized`. */
  initialize: boolean;
}

/**
 * The reference rule: nothing below the initialisation threshold; after it, update iff the context grew by
 * at least `minGrowthTokens` since the last update AND (at least `toolCalls` tool calls since then OR the
 * last reply made none). Token growth is always required; a natural break stands in for the tool calls.
 */
export function shouldUpdateSessionMemory(input: SessionMemoryTriggerInput): SessionMemoryTriggerDecision {
  const t = resolveSessionMemoryThresholds(input.thresholds);
  let initialize = false;
  if (!input.initialized) {
    if (input.contextTokens < t.initTokens) return { update: false, initialize: false };
    initialize = true;
  }
  const growthOk = input.contextTokens - (input.tokensAtLastUpdate ?? 0) >= t.minGrowthTokens;
  const toolsOk = input.toolCallsSinceLastUpdate >= t.toolCalls;
  return { update: growthOk && (toolsOk || !input.lastReplyHadToolCalls), initialize };
}

/** What this module needs from a transcript entry (structural, so memory-core stays free of the runtime). */
export interface TriggerEntry {
  type: string;
  uuid?: string | undefined;
  message?: { content?: unknown } | undefined;
}

function toolUseCount(entry: TriggerEntry): number {
  const content = entry.message?.content;
  if (entry.type !== 'assistant' || !Array.isArray(content)) return 0;
  let n = 0;
  for (const block of content) if ((block as { type?: unknown })?.type === 'tool_use') n++;
  return n;
}

/**
 * tool_use blocks in assistant entries after `sinceUuid` (all of them when it is undefined). As in the
 * reference, a cursor that is not among `entries` counts nothing: the next natural break repairs it.
 */
export function countToolCallsSince(entries: readonly TriggerEntry[], sinceUuid: string | undefined): number {
  let counting = sinceUuid === undefined;
  let n = 0;
  for (const entry of entries) {
    if (!counting) {
      if (entry.uuid === sinceUuid) counting = true;
      continue;
    }
    n += toolUseCount(entry);
  }
  return n;
}

/** Whether the newest assistant entry in `entries` asked for tools (false when there is none). */
export function lastAssistantHasToolCalls(entries: readonly TriggerEntry[]): boolean {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i]!;
    if (entry.type === 'assistant') return toolUseCount(entry) > 0;
  }
  return false;
}
