import { join } from 'node:path';

// The short notice the next model call of a session carries after background memory work changed files
// (docs/claude-code-format.md, "Background work notices"), so the main agent neither saves the same memory
// again nor contradicts it. Engram's wording; pure functions over transcript-shaped entries.

/** `attachmentKind` of the notice's attachment entry; marks the changes before it as announced. */
export const MEMORY_NOTICE_ATTACHMENT_KIND = 'memory_notice';
/** `subtype` of the system entry the foreground writes for a worker's receipt (not model-visible). */
export const MEMORY_SAVED_SUBTYPE = 'memory_saved';
/** Claude Code's attachment type for the same notice; Engram writes it so a Claude Code resume keeps it. */
export const MEMORY_UPDATE_ATTACHMENT_TYPE = 'memory_update';
/** Files named in one notice; the rest are counted. */
export const MAX_NOTICE_FILES = 12;

export interface MemoryChange {
  /** Relative to the memory directory. */
  path: string;
  action: 'created' | 'updated' | 'deleted';
}

interface NoticeEntry {
  type: string;
  subtype?: string;
  attachmentKind?: unknown;
  memories?: unknown;
  [key: string]: unknown;
}

function changesOf(entry: NoticeEntry): MemoryChange[] {
  if (!Array.isArray(entry.memories)) return [];
  const out: MemoryChange[] = [];
  for (const m of entry.memories) {
    if (typeof m !== 'object' || m === null) continue;
    const { path, action } = m as { path?: unknown; action?: unknown };
    if (typeof path !== 'string' || path === '') continue;
    out.push({ path, action: action === 'created' || action === 'deleted' ? action : 'updated' });
  }
  return out;
}

/** Engram's notice, or a `memory_update` attachment Claude Code wrote: either marks the changes before it told. */
function isMemoryNoticeEntry(entry: NoticeEntry): boolean {
  if (entry.type !== 'attachment') return false;
  if (entry.attachmentKind === MEMORY_NOTICE_ATTACHMENT_KIND) return true;
  return (entry.attachment as { type?: unknown } | undefined)?.type === MEMORY_UPDATE_ATTACHMENT_TYPE;
}

/**
 * Memory changes recorded (`memory_saved` entries) since the model last replied or was last told: walks back
 * from the end of the live chain and stops at an assistant entry or an earlier notice. A file changed twice is
 * named once, with its first action ("created" wins over a later "updated").
 */
export function unannouncedMemoryChanges(entries: readonly NoticeEntry[]): MemoryChange[] {
  const found: MemoryChange[][] = [];
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i] as NoticeEntry;
    if (entry.type === 'assistant') break;
    if (isMemoryNoticeEntry(entry)) break;
    if (entry.type === 'system' && entry.subtype === MEMORY_SAVED_SUBTYPE) found.unshift(changesOf(entry));
  }
  const byPath = new Map<string, MemoryChange>();
  for (const change of found.flat()) {
    const seen = byPath.get(change.path);
    if (!seen) byPath.set(change.path, change);
    else if (change.action === 'deleted') seen.action = 'deleted';
  }
  return [...byPath.values()];
}

/** The notice text (a system-reminder), or undefined when nothing changed. */
export function formatMemoryNotice(changes: readonly MemoryChange[]): string | undefined {
  if (changes.length === 0) return undefined;
  const shown = changes.slice(0, MAX_NOTICE_FILES).map((c) => `${c.path} (${c.action})`);
  const more = changes.length > MAX_NOTICE_FILES ? `, and ${changes.length - MAX_NOTICE_FILES} more` : '';
  return (
    '<system-reminder>\n' +
    `Engram's background memory work changed these memory files since your last reply: ${shown.join(', ')}${more}. ` +
    'They are already saved — do not write them again; read one before you change or contradict it.\n' +
    '</system-reminder>'
  );
}

/** Claude Code's own `memory_update` attachment object (docs/claude-code-format.md, "Attachments"). */
export interface MemoryUpdateAttachment {
  type: typeof MEMORY_UPDATE_ATTACHMENT_TYPE;
  source: 'extract';
  summary: string;
  paths: string[];
  inContextPaths: string[];
}

/**
 * The notice as Claude Code records it: a summary in its words ("saved 1 memory"), the changed files as
 * absolute paths under `memoryDir`, and none of them counted as already in context.
 */
export function memoryUpdateAttachment(
  changes: readonly MemoryChange[],
  memoryDir: string,
): MemoryUpdateAttachment {
  const n = changes.length;
  const noun = n === 1 ? 'memory' : 'memories';
  const verb = changes.every((c) => c.action === 'created')
    ? 'saved'
    : changes.every((c) => c.action === 'updated')
      ? 'updated'
      : changes.every((c) => c.action === 'deleted')
        ? 'deleted'
        : 'changed';
  return {
    type: MEMORY_UPDATE_ATTACHMENT_TYPE,
    source: 'extract',
    summary: `${verb} ${n} ${noun}`,
    paths: changes.map((c) => join(memoryDir, c.path)),
    inContextPaths: [],
  };
}
