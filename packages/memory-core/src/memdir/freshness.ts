// How old a memory is, in the words shown to the model. Memories are point-in-time observations: anything
// older than a day is shown with a caveat to verify before relying on it (a file may be gone, a flag renamed).

const DAY_MS = 86_400_000;

/** Whole days since `mtimeMs` (floor), never negative (a future mtime counts as today). */
export function memoryAgeDays(mtimeMs: number, now: number = Date.now()): number {
  if (!Number.isFinite(mtimeMs) || !Number.isFinite(now)) return 0;
  return Math.max(0, Math.floor((now - mtimeMs) / DAY_MS));
}

export function memoryFreshnessLabel(mtimeMs: number, now: number = Date.now()): string {
  const days = memoryAgeDays(mtimeMs, now);
  if (days === 0) return 'today';
  if (days === 1) return 'yesterday';
  return `${days} days ago`;
}

/** The verify-before-trusting note for memories older than one day; undefined for fresher ones. */
export function memoryFreshnessCaveat(mtimeMs: number, now: number = Date.now()): string | undefined {
  const days = memoryAgeDays(mtimeMs, now);
  if (days <= 1) return undefined;
  return (
    `This memory was last updated ${days} days ago. It records what was true then, not now: code behaviour, ` +
    'file paths and file:line references in it may have changed. Check them against the current code ' +
    'before stating them as fact.'
  );
}

/**
 * The line that introduces a recalled memory's content. Computed once when the memory is surfaced and kept
 * verbatim afterwards, so re-rendering a conversation does not change its bytes (and the prompt cache).
 */
export function recalledMemoryHeader(path: string, mtimeMs: number, now: number = Date.now()): string {
  const caveat = memoryFreshnessCaveat(mtimeMs, now);
  if (caveat !== undefined) return `${caveat}\n\nMemory: ${path}:`;
  return `Memory (saved ${memoryFreshnessLabel(mtimeMs, now)}): ${path}:`;
}
