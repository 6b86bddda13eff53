import { posix } from 'node:path';
import { ENTRYPOINT_NAME } from '../paths/memory-paths.js';

// Pure rules over transcript entries, shared by the foreground (should this turn enqueue an extraction?) and
// the extract worker (what did the fork save?). The main agent and the extractor are mutually exclusive for a
// range of messages: if the main agent already wrote memory since the cursor, no extraction runs for it.

export { isMemoryPathSync } from '../paths/memory-paths.js';

export interface TranscriptLikeEntry {
  uuid: string;
  type: string;
  message?: { role?: string; content?: unknown };
}

/** Tools whose `file_path` input writes a file. */
export const MEMORY_WRITE_TOOL_NAMES: readonly string[] = ['Edit', 'Write'];

const MODEL_VISIBLE_TYPES = new Set(['user', 'assistant']);

/**
 * Index of the first entry after the cursor. An undefined cursor means "from the start"; a cursor that is no
 * longer present (compaction rewrote history) also means "from the start": counting nothing would disable
 * extraction for the rest of the session, while re-covering messages only costs one fuller run.
 */
export function indexAfterCursor(
  entries: readonly TranscriptLikeEntry[],
  cursorUuid: string | undefined,
): number {
  if (cursorUuid === undefined) return 0;
  for (let i = entries.length - 1; i >= 0; i--) {
    if (entries[i]?.uuid === cursorUuid) return i + 1;
  }
  return 0;
}

/** `file_path`s of Edit/Write tool_use blocks in one entry's assistant message. */
function writtenFilePaths(entry: TranscriptLikeEntry): string[] {
  if (entry.type !== 'assistant') return [];
  const content = entry.message?.content;
  if (!Array.isArray(content)) return [];
  const paths: string[] = [];
  for (const block of content) {
    if (typeof block !== 'object' || block === null) continue;
    const { type, name, input } = block as { type?: unknown; name?: unknown; input?: unknown };
    if (type !== 'tool_use' || typeof name !== 'string' || !MEMORY_WRITE_TOOL_NAMES.includes(name)) continue;
    if (typeof input !== 'object' || input === null) continue;
    const filePath = (input as { file_path?: unknown }).file_path;
    if (typeof filePath === 'string' && filePath !== '') paths.push(filePath);
  }
  return paths;
}

/** True if an assistant entry after the cursor used Edit/Write on a path `isMemoryPath` accepts. */
export function hasMemoryWritesSince(
  entries: readonly TranscriptLikeEntry[],
  cursorUuid: string | undefined,
  isMemoryPath: (path: string) => boolean,
): boolean {
  for (let i = indexAfterCursor(entries, cursorUuid); i < entries.length; i++) {
    const entry = entries[i] as TranscriptLikeEntry;
    for (const path of writtenFilePaths(entry)) {
      if (isMemoryPath(path)) return true;
    }
  }
  return false;
}

/** Number of user/assistant entries after the cursor (all of them when the cursor is unset or gone). */
export function countModelVisibleMessagesSince(
  entries: readonly TranscriptLikeEntry[],
  cursorUuid: string | undefined,
): number {
  let count = 0;
  for (let i = indexAfterCursor(entries, cursorUuid); i < entries.length; i++) {
    if (MODEL_VISIBLE_TYPES.has((entries[i] as TranscriptLikeEntry).type)) count++;
  }
  return count;
}

/**
 * Unique `file_path`s written by Edit/Write tool calls, in first-write order, without index files
 * (`MEMORY.md` edits are bookkeeping, not memories). With `isMemoryPath`, only paths it accepts.
 */
export function memoryPathsWritten(
  entries: readonly TranscriptLikeEntry[],
  isMemoryPath?: (path: string) => boolean,
): string[] {
  const seen = new Set<string>();
  for (const entry of entries) {
    for (const path of writtenFilePaths(entry)) {
      if (posix.basename(path.replace(/\\/g, '/')) === ENTRYPOINT_NAME) continue;
      if (isMemoryPath && !isMemoryPath(path)) continue;
      seen.add(path);
    }
  }
  return [...seen];
}

/** uuid of the newest entry, where the cursor moves after a successful extraction or a direct-write skip. */
export function lastEntryUuid(entries: readonly TranscriptLikeEntry[]): string | undefined {
  return entries.length === 0 ? undefined : entries[entries.length - 1]?.uuid;
}

/** A user entry that asks the model something (not a tool result, a compaction summary or a meta note). */
function isPrompt(entry: TranscriptLikeEntry & { isMeta?: unknown; isCompactSummary?: unknown }): boolean {
  if (entry.type !== 'user' || entry.isMeta === true || entry.isCompactSummary === true) return false;
  const content = entry.message?.content;
  if (typeof content === 'string') return true;
  if (!Array.isArray(content)) return false;
  return content.some(
    (b) => typeof b === 'object' && b !== null && (b as { type?: unknown }).type !== 'tool_result',
  );
}

/** An assistant entry that ends a turn: a reply that asks for no tool. */
function isFinalReply(entry: TranscriptLikeEntry): boolean {
  if (entry.type !== 'assistant') return false;
  const content = entry.message?.content;
  if (typeof content === 'string') return true;
  if (!Array.isArray(content)) return false;
  return !content.some(
    (b) => typeof b === 'object' && b !== null && (b as { type?: unknown }).type === 'tool_use',
  );
}

/**
 * Length of the longest prefix of `chain` that ends on a complete exchange. A trailing prompt with no final
 * reply after it (the turn failed after its prompt was recorded) is cut off with what follows it: shown to a
 * fork it would be the turn to answer, and a cursor moved past it would skip the facts of the turn that
 * eventually answers it. Everything else (system entries after a reply, a chain with no prompt) is kept.
 */
export function completeExchangeEnd(chain: readonly TranscriptLikeEntry[]): number {
  for (let i = chain.length - 1; i >= 0; i--) {
    const entry = chain[i] as TranscriptLikeEntry;
    if (isFinalReply(entry)) return chain.length;
    if (isPrompt(entry)) return i;
  }
  return chain.length;
}
