import { isAbsolute, join, normalize, relative, sep } from 'node:path';
import { isMemoryPathSync } from '../paths/memory-paths.js';
import type { RecalledMemory } from './read-for-surfacing.js';
import { normalizeMemoryRelPath } from './select.js';
import { MAX_SELECTED_MEMORIES } from './selection-prompt.js';

// The foreground's side of recall, as pure functions over transcript-shaped entries (docs/claude-code-memory.md §5 "When the
// prefetch runs" and "Reading and injecting"). Everything is derived from the messages of the live context,
// so compaction (which starts a new context at its boundary) resets the budget and the surfaced set.
//
// How a recall injection is marked in the transcript: one `attachment` entry per injection, written with
// `relevantMemoriesAttachment(memories, memoryDir)`, in Claude Code's own shape so a Claude Code resume keeps
// it (docs/claude-code-format.md, "Attachments"), plus Engram's records:
//   { type: 'attachment', isMeta: true,
//     attachment: { type: 'relevant_memories', memories: [{ path: <absolute>, content, mtimeMs, header }] },
//     rendered: [{ content: renderRecalledMemories(memories) }], renderedRole: 'system',
//     message: { role: 'user', content: renderRecalledMemories(memories) },
//     attachmentKind: 'relevant_memories',
//     memories: [{ path, mtimeMs, bytes, truncated, limit? }, …] }
// Engram's `path` is relative to the memory directory (forward slashes) and `bytes` is the UTF-8 size of that
// memory's injected content, which is what the session budget sums. An entry Claude Code wrote has only the
// `attachment` object: its memories' contents are summed, and its paths made relative where they are inside
// the memory directory.

/** Injected recall bytes per context; past it, no more prefetches (about three full injections). */
export const RELEVANT_MEMORIES_MAX_SESSION_BYTES = 60 * 1024;
export const RELEVANT_MEMORIES_ATTACHMENT_KIND = 'relevant_memories';

/** The per-memory record kept on a relevant_memories attachment entry. */
export interface SurfacedMemoryRecord {
  path: string;
  mtimeMs: number;
  bytes: number;
  truncated: boolean;
  limit?: number;
}

/** The fields of transcript entries these functions read; any TranscriptEntry fits. */
export interface PrefetchEntry {
  type: string;
  subtype?: string;
  isMeta?: boolean;
  isCompactSummary?: boolean;
  isVisibleInTranscriptOnly?: boolean;
  // Blocks are read defensively; `object` lets interface-typed blocks (no index signature) fit.
  message?: { role: string; content: string | ReadonlyArray<object> };
  attachmentKind?: unknown;
  memories?: unknown;
  [key: string]: unknown;
}

/** Claude Code's own attachment object for recalled memories (its `relevant_memories` type). */
export interface ClaudeCodeRelevantMemories {
  type: typeof RELEVANT_MEMORIES_ATTACHMENT_KIND;
  memories: { path: string; content: string; mtimeMs: number; header: string }[];
}

/** What to hand the query loop's `beforeModelCall`: the attachment text and the marking fields. */
export interface RelevantMemoriesAttachment {
  content: string;
  extra: {
    attachmentKind: typeof RELEVANT_MEMORIES_ATTACHMENT_KIND;
    memories: SurfacedMemoryRecord[];
    attachment: ClaudeCodeRelevantMemories;
  };
}

/** `memoryDir` names the directory in Claude Code's attachment (absolute paths, as Claude Code writes them). */
export function relevantMemoriesAttachment(
  memories: readonly RecalledMemory[],
  memoryDir: string,
): RelevantMemoriesAttachment {
  return {
    content: renderRecalledMemories(memories),
    extra: {
      attachmentKind: RELEVANT_MEMORIES_ATTACHMENT_KIND,
      memories: memories.map((m) => ({
        path: m.path,
        mtimeMs: m.mtimeMs,
        bytes: Buffer.byteLength(m.content, 'utf8'),
        truncated: m.truncated,
        ...(m.limit !== undefined ? { limit: m.limit } : {}),
      })),
      attachment: {
        type: RELEVANT_MEMORIES_ATTACHMENT_KIND,
        memories: memories.map((m) => ({
          path: join(memoryDir, m.path),
          content: m.content,
          mtimeMs: m.mtimeMs,
          header: m.header,
        })),
      },
    },
  };
}

/**
 * One system-reminder message's text: each memory as "<header>\n\n<content>" wrapped in its own
 * `<system-reminder>` block, the blocks joined by a newline. Deterministic: equal input, equal bytes.
 */
export function renderRecalledMemories(memories: readonly RecalledMemory[]): string {
  return memories.map((m) => `<system-reminder>\n${m.header}\n\n${m.content}\n</system-reminder>`).join('\n');
}

function isCompactBoundary(entry: PrefetchEntry): boolean {
  return entry.type === 'system' && entry.subtype === 'compact_boundary';
}

/** Entries of the current context: those after the last compact boundary. */
function currentContext<T extends PrefetchEntry>(entries: readonly T[]): readonly T[] {
  for (let i = entries.length - 1; i >= 0; i--) {
    if (isCompactBoundary(entries[i] as T)) return entries.slice(i + 1);
  }
  return entries;
}

function messageText(entry: PrefetchEntry): string {
  const content = entry.message?.content;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((b) => (b.type === 'text' && typeof b.text === 'string' ? b.text : '')).join('');
}

/** Engram's recall marking, or Claude Code's own `relevant_memories` attachment. */
export function isRelevantMemoriesEntry(entry: PrefetchEntry): boolean {
  if (entry.type !== 'attachment') return false;
  if (entry.attachmentKind === RELEVANT_MEMORIES_ATTACHMENT_KIND) return true;
  return (entry.attachment as { type?: unknown } | undefined)?.type === RELEVANT_MEMORIES_ATTACHMENT_KIND;
}

/**
 * The memories already injected in the current context and their injected bytes. An entry whose records lack
 * a valid `bytes` counts its whole message text instead (never under-counts the budget). An entry Claude Code
 * wrote counts its memories' contents; its absolute paths are made relative when `memoryDir` holds them.
 */
export function collectSurfacedMemories(
  entries: readonly PrefetchEntry[],
  memoryDir?: string,
): {
  paths: Set<string>;
  bytes: number;
} {
  const paths = new Set<string>();
  let bytes = 0;
  for (const entry of currentContext(entries)) {
    if (!isRelevantMemoriesEntry(entry)) continue;
    if (entry.attachmentKind !== RELEVANT_MEMORIES_ATTACHMENT_KIND) {
      bytes += claudeCodeSurfaced(entry, memoryDir, paths);
      continue;
    }
    const records = Array.isArray(entry.memories) ? (entry.memories as unknown[]) : [];
    let entryBytes = 0;
    let valid = records.length > 0;
    for (const record of records) {
      const r = record as Partial<SurfacedMemoryRecord> | null;
      if (r && typeof r.path === 'string' && r.path !== '') paths.add(normalizeMemoryRelPath(r.path));
      if (r && typeof r.bytes === 'number' && Number.isFinite(r.bytes) && r.bytes >= 0) entryBytes += r.bytes;
      else valid = false;
    }
    bytes += valid ? entryBytes : Buffer.byteLength(messageText(entry), 'utf8');
  }
  return { paths, bytes };
}

function claudeCodeSurfaced(entry: PrefetchEntry, memoryDir: string | undefined, paths: Set<string>): number {
  const memories = (entry.attachment as { memories?: unknown } | undefined)?.memories;
  let bytes = 0;
  for (const m of Array.isArray(memories) ? memories : []) {
    const { path, content } = (m ?? {}) as { path?: unknown; content?: unknown };
    if (typeof content === 'string') bytes += Buffer.byteLength(content, 'utf8');
    if (typeof path !== 'string' || memoryDir === undefined || !isAbsolute(path)) continue;
    const rel = relative(memoryDir, path);
    if (rel !== '' && !rel.startsWith('..') && !isAbsolute(rel))
      paths.add(normalizeMemoryRelPath(rel.split(sep).join('/')));
  }
  return bytes;
}

/** A message the user typed (not a tool result, not injected context, not a compaction summary). */
export function isHumanTurn(entry: PrefetchEntry): boolean {
  if (entry.type !== 'user' || entry.isMeta === true || entry.isCompactSummary === true) return false;
  if (entry.isVisibleInTranscriptOnly === true) return false;
  const content = entry.message?.content;
  if (typeof content === 'string') return content.trim().length > 0;
  if (!Array.isArray(content)) return false;
  return !content.some((b) => b.type === 'tool_result') && content.some((b) => b.type === 'text');
}

interface ToolUseSeen {
  name: string;
  input: Record<string, unknown>;
  result: 'ok' | 'error' | undefined;
}

/** tool_use blocks of assistant entries by id, with whether a result arrived and whether it was an error. */
function toolUses(entries: readonly PrefetchEntry[]): Map<string, ToolUseSeen> {
  const uses = new Map<string, ToolUseSeen>();
  for (const entry of entries) {
    const content = entry.message?.content;
    if (!Array.isArray(content)) continue;
    for (const block of content) {
      if (entry.type === 'assistant' && block.type === 'tool_use' && typeof block.id === 'string') {
        const input = block.input && typeof block.input === 'object' ? block.input : {};
        uses.set(block.id, {
          name: typeof block.name === 'string' ? block.name : '',
          input: input as Record<string, unknown>,
          result: undefined,
        });
      } else if (block.type === 'tool_result' && typeof block.tool_use_id === 'string') {
        const use = uses.get(block.tool_use_id);
        if (use) use.result = block.is_error === true ? 'error' : 'ok';
      }
    }
  }
  return uses;
}

/**
 * Tools used successfully since the previous human turn, for the selector's recent-tools rule. At the start
 * of a turn (the newest human message has no assistant reply after it yet, whether or not it is in `entries`)
 * the window is the previous turn: from the human message before it up to it; in the middle of a turn it is
 * everything since the newest human message. A tool counts once it has a result; any errored call of a name
 * excludes that name (the agent is struggling with it, so its usage notes stay eligible); a call with no
 * result yet is not a success. Names in order of first use.
 */
export function collectRecentSuccessfulTools(entries: readonly PrefetchEntry[]): string[] {
  const context = currentContext(entries);
  const humanBefore = (end: number) => {
    for (let i = end - 1; i >= 0; i--) if (isHumanTurn(context[i] as PrefetchEntry)) return i;
    return -1;
  };
  const last = humanBefore(context.length);
  let window: readonly PrefetchEntry[];
  if (last === -1) window = context;
  else if (context.slice(last + 1).some((e) => e.type === 'assistant')) window = context.slice(last + 1);
  else window = context.slice(humanBefore(last) + 1, last);
  const succeeded: string[] = [];
  const errored = new Set<string>();
  for (const use of toolUses(window).values()) {
    if (use.name === '') continue;
    if (use.result === 'error') errored.add(use.name);
    else if (use.result === 'ok' && !succeeded.includes(use.name)) succeeded.push(use.name);
  }
  return succeeded.filter((name) => !errored.has(name));
}

/** Tools whose `file_path` puts a memory file into the context (its content, or the agent's own words). */
const FILE_TOOLS = new Set(['Read', 'Write', 'Edit', 'MultiEdit']);

/**
 * Memory files the agent read, wrote or edited in the current context (relative to `memoryDir`, forward
 * slashes). Calls that errored did not put the file in context and are skipped.
 */
export function collectReadMemoryPaths(entries: readonly PrefetchEntry[], memoryDir: string): Set<string> {
  const paths = new Set<string>();
  if (!isAbsolute(memoryDir)) return paths;
  const root = normalize(memoryDir).normalize('NFC');
  for (const use of toolUses(currentContext(entries)).values()) {
    const target = use.input.file_path;
    if (!FILE_TOOLS.has(use.name) || typeof target !== 'string' || use.result === 'error') continue;
    if (!isMemoryPathSync(target, root)) continue;
    const rel = relative(root, normalize(target).normalize('NFC')).split(sep).join('/');
    if (rel !== '' && !rel.startsWith('../')) paths.add(normalizeMemoryRelPath(rel));
  }
  return paths;
}

export type PrefetchSkipReason = 'empty' | 'single-word' | 'over-budget';

/** Why no recall is started for this prompt, or undefined when one is. */
export function prefetchSkipReason(prompt: string, surfacedBytes: number): PrefetchSkipReason | undefined {
  const text = prompt.trim();
  if (text === '') return 'empty';
  if (!/\s/.test(text)) return 'single-word';
  if (surfacedBytes >= RELEVANT_MEMORIES_MAX_SESSION_BYTES) return 'over-budget';
  return undefined;
}

/** A recall starts for a non-empty, multi-word prompt while the context's injected memory is under budget. */
export function shouldPrefetch(prompt: string, surfacedBytes: number): boolean {
  return prefetchSkipReason(prompt, surfacedBytes) === undefined;
}

/**
 * The re-filter at injection time: drop memories whose path is in `readPaths` (pass the read paths together
 * with the surfaced ones, both relative to the memory directory), duplicates, and any beyond five.
 */
export function filterAgainstRead(
  memories: readonly RecalledMemory[],
  readPaths: Iterable<string>,
): RecalledMemory[] {
  const excluded = new Set<string>();
  for (const p of readPaths) excluded.add(normalizeMemoryRelPath(p));
  const out: RecalledMemory[] = [];
  for (const memory of memories) {
    const key = normalizeMemoryRelPath(memory.path);
    if (excluded.has(key)) continue;
    excluded.add(key);
    out.push(memory);
    if (out.length === MAX_SELECTED_MEMORIES) break;
  }
  return out;
}
