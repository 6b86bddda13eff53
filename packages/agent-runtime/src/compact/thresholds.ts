// When the context is full enough to compact (docs/design.md §7; docs/claude-code-memory.md §10.9–10.12). All figures are tokens of
// context as `tokenCountWithEstimation` measures it.

/** Output reserved for a compaction summary (the reference's p99.99 summary was 17,387 tokens). */
export const MAX_OUTPUT_TOKENS_FOR_SUMMARY = 20_000;
/** Head-room below the effective window at which auto-compaction starts. */
export const AUTOCOMPACT_BUFFER_TOKENS = 13_000;
/** The user is warned this far below the auto-compact threshold. */
export const WARNING_THRESHOLD_BUFFER_TOKENS = 20_000;
export const ERROR_THRESHOLD_BUFFER_TOKENS = 20_000;
/** Beyond the effective window minus this, a request cannot be sent at all; only /compact helps. */
export const MANUAL_COMPACT_BUFFER_TOKENS = 3_000;
/** After this many auto-compactions fail in a row, the session stops trying (a spiral guard). */
export const MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES = 3;

export interface ContextLimits {
  /** The model's context window. */
  contextWindow: number;
  /** The max_tokens the session sends. */
  maxOutputTokens: number;
}

/** The window minus the output a summary may need: what the prompt can use. */
export function effectiveContextWindow(limits: ContextLimits): number {
  return limits.contextWindow - Math.min(limits.maxOutputTokens, MAX_OUTPUT_TOKENS_FOR_SUMMARY);
}

/** (window − min(max output, 20,000)) − 13,000. */
export function autoCompactThreshold(limits: ContextLimits): number {
  return effectiveContextWindow(limits) - AUTOCOMPACT_BUFFER_TOKENS;
}

/** The size past which a request is refused before sending: effective window − 3,000. */
export function blockingLimit(limits: ContextLimits): number {
  return effectiveContextWindow(limits) - MANUAL_COMPACT_BUFFER_TOKENS;
}

export interface ContextWarningState {
  /** Percent of the compaction budget left (0–100). */
  percentLeft: number;
  aboveWarning: boolean;
  aboveError: boolean;
  aboveAutoCompact: boolean;
  atBlockingLimit: boolean;
}

/** How full the context is, for the status line and the decision to compact. */
export function contextWarningState(
  contextTokens: number,
  limits: ContextLimits,
  options: { autoCompactEnabled?: boolean } = {},
): ContextWarningState {
  const autoEnabled = options.autoCompactEnabled ?? true;
  const auto = autoCompactThreshold(limits);
  const threshold = autoEnabled ? auto : effectiveContextWindow(limits);
  const percentLeft = Math.max(0, Math.round(((threshold - contextTokens) / threshold) * 100));
  return {
    percentLeft,
    aboveWarning: contextTokens >= threshold - WARNING_THRESHOLD_BUFFER_TOKENS,
    aboveError: contextTokens >= threshold - ERROR_THRESHOLD_BUFFER_TOKENS,
    aboveAutoCompact: autoEnabled && contextTokens >= auto,
    atBlockingLimit: contextTokens >= blockingLimit(limits),
  };
}
