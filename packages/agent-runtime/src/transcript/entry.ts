import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ApiUsage, ContentBlock, Role, StopReason } from '../model/types.js';

// One line of a session transcript (JSONL), compatible with Claude Code's: chain participants carry
// uuid/parentUuid; metadata lines (summary, custom-title, …) may have no uuid. Every field this runtime
// does not know is kept as-is (loose objects), so reading and re-writing a Claude Code transcript loses
// nothing.

export const CHAIN_ENTRY_TYPES = ['user', 'assistant', 'system', 'attachment'] as const;
export type ChainEntryType = (typeof CHAIN_ENTRY_TYPES)[number];

export const SYSTEM_SUBTYPES = {
  compactBoundary: 'compact_boundary',
  memorySaved: 'memory_saved',
} as const;

export const contentBlockSchema = z.looseObject({ type: z.string() });

export const entryMessageSchema = z.looseObject({
  role: z.enum(['user', 'assistant']),
  content: z.union([z.string(), z.array(contentBlockSchema)]),
});

export const transcriptEntrySchema = z.looseObject({
  type: z.string().min(1),
  uuid: z.string().min(1).optional(),
  parentUuid: z.string().nullable().optional(),
  logicalParentUuid: z.string().nullable().optional(),
  sessionId: z.string().optional(),
  cwd: z.string().optional(),
  timestamp: z.string().optional(),
  message: entryMessageSchema.optional(),
  isMeta: z.boolean().optional(),
  isCompactSummary: z.boolean().optional(),
  isSidechain: z.boolean().optional(),
  isVisibleInTranscriptOnly: z.boolean().optional(),
  subtype: z.string().optional(),
});

const OPTIONAL_STRING_FIELDS = ['sessionId', 'cwd', 'timestamp', 'subtype'] as const;
const OPTIONAL_NULLABLE_STRING_FIELDS = ['parentUuid', 'logicalParentUuid'] as const;
const OPTIONAL_BOOLEAN_FIELDS = [
  'isMeta',
  'isCompactSummary',
  'isSidechain',
  'isVisibleInTranscriptOnly',
] as const;

/**
 * The same acceptance rule as `transcriptEntrySchema`, hand-written for the read path: a long transcript
 * is validated line by line on every rebuild, and this check costs a fraction of a zod parse. It accepts
 * nothing the schema rejects (a property test holds the two together); readers fall back to the schema
 * for the error message when it says no.
 */
export function isValidEntryShape(value: unknown): value is TranscriptEntry {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const v = value as Record<string, unknown>;
  if (typeof v.type !== 'string' || v.type.length === 0) return false;
  if (v.uuid !== undefined && (typeof v.uuid !== 'string' || v.uuid.length === 0)) return false;
  for (const k of OPTIONAL_STRING_FIELDS) if (v[k] !== undefined && typeof v[k] !== 'string') return false;
  for (const k of OPTIONAL_NULLABLE_STRING_FIELDS) {
    const f = v[k];
    if (f !== undefined && f !== null && typeof f !== 'string') return false;
  }
  for (const k of OPTIONAL_BOOLEAN_FIELDS) if (v[k] !== undefined && typeof v[k] !== 'boolean') return false;
  const m = v.message;
  if (m === undefined) return true;
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return false;
  const message = m as Record<string, unknown>;
  if (message.role !== 'user' && message.role !== 'assistant') return false;
  const content = message.content;
  if (typeof content === 'string') return true;
  if (!Array.isArray(content)) return false;
  for (const block of content) {
    if (typeof block !== 'object' || block === null || Array.isArray(block)) return false;
    if (typeof (block as { type?: unknown }).type !== 'string') return false;
  }
  return true;
}

/** The fields every entry this runtime writes carries, checked before an append. */
export const chainEntrySchema = transcriptEntrySchema.extend({
  type: z.enum(CHAIN_ENTRY_TYPES),
  uuid: z.string().min(1),
  parentUuid: z.string().nullable(),
  sessionId: z.string().min(1),
  cwd: z.string(),
  timestamp: z.string().min(1),
});

export interface EntryMessage {
  role: Role;
  content: string | ContentBlock[];
  /** Assistant replies keep the API's id, model, stop reason and usage, as Claude Code stores them. */
  id?: string;
  model?: string;
  stop_reason?: StopReason | null;
  usage?: ApiUsage;
  [key: string]: unknown;
}

export interface TranscriptEntry {
  type: string;
  uuid?: string;
  parentUuid?: string | null;
  logicalParentUuid?: string | null;
  sessionId?: string;
  cwd?: string;
  timestamp?: string;
  message?: EntryMessage;
  isMeta?: boolean;
  isCompactSummary?: boolean;
  isSidechain?: boolean;
  isVisibleInTranscriptOnly?: boolean;
  subtype?: string;
  /**
   * Facts the tool reported beside its model-visible result (file path, mtime…), on an entry holding one
   * tool_result — Claude Code's field (docs/claude-code-format.md, "Transcripts").
   */
  toolUseResult?: unknown;
  /** Older Engram form: facts per tool_use_id on an entry holding several results. Read, never written. */
  toolUseResults?: Record<string, ToolUseRecord>;
  [key: string]: unknown;
}

export type ToolUseRecord = Record<string, unknown>;

/**
 * The facts recorded for one tool_use_id on an entry: Claude Code's and Engram's per-entry `toolUseResult`
 * (when the entry's only tool_result is that id) or the older `toolUseResults[id]`. Claude Code's Read keeps
 * the path in `file.filePath`; it is lifted to `filePath` here.
 */
export function toolUseRecordFor(entry: TranscriptEntry, toolUseId: string): ToolUseRecord | undefined {
  const legacy = entry.toolUseResults?.[toolUseId];
  if (legacy !== undefined) return legacy;
  const record = entry.toolUseResult;
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return undefined;
  const content = entry.message?.content;
  if (!Array.isArray(content)) return undefined;
  const ids = content.flatMap((b) =>
    b.type === 'tool_result' ? [(b as { tool_use_id?: unknown }).tool_use_id] : [],
  );
  if (ids.length !== 1 || ids[0] !== toolUseId) return undefined;
  const out = record as ToolUseRecord;
  const file = out.file;
  if (typeof out.filePath !== 'string' && typeof file === 'object' && file !== null) {
    const nested = (file as Record<string, unknown>).filePath;
    if (typeof nested === 'string') return { ...out, filePath: nested };
  }
  return out;
}

export interface ChainEntry extends TranscriptEntry {
  type: ChainEntryType;
  uuid: string;
  parentUuid: string | null;
  sessionId: string;
  cwd: string;
  timestamp: string;
}

/** What Engram writes as `version` (Claude Code writes its release there) and `entrypoint`. */
export const ENGRAM_TRANSCRIPT_VERSION = '0.1.0';
export const ENGRAM_ENTRYPOINT = 'engram';

export interface EntryStamp {
  sessionId: string;
  cwd: string;
  parentUuid: string | null;
  /** The launch directory's git branch, as Claude Code stamps it (omitted when unknown). */
  gitBranch?: string;
  /** True for a subagent's transcript (every entry there is a sidechain). */
  isSidechain?: boolean;
  /** Injected clock, for deterministic tests. */
  now?: () => Date;
  uuid?: () => string;
}

/** The session fields Claude Code stamps on every message entry (docs/claude-code-format.md, "Transcripts"). */
function stamp(s: EntryStamp) {
  return {
    uuid: (s.uuid ?? randomUUID)(),
    parentUuid: s.parentUuid,
    sessionId: s.sessionId,
    cwd: s.cwd,
    timestamp: (s.now?.() ?? new Date()).toISOString(),
    isSidechain: s.isSidechain ?? false,
    userType: 'external',
    entrypoint: ENGRAM_ENTRYPOINT,
    version: ENGRAM_TRANSCRIPT_VERSION,
    ...(s.gitBranch !== undefined ? { gitBranch: s.gitBranch } : {}),
  };
}

export function createUserEntry(
  s: EntryStamp,
  content: string | ContentBlock[],
  extra: Partial<TranscriptEntry> = {},
): ChainEntry {
  // Field order is stable so identical input yields identical JSONL bytes.
  return { ...stamp(s), type: 'user', message: { role: 'user', content }, ...extra } as ChainEntry;
}

export function createAssistantEntry(
  s: EntryStamp,
  message: Omit<EntryMessage, 'role'> & { content: ContentBlock[] },
  extra: Partial<TranscriptEntry> = {},
): ChainEntry {
  return {
    ...stamp(s),
    type: 'assistant',
    message: { role: 'assistant', ...message },
    ...extra,
  } as ChainEntry;
}

/** `attachment.type` of Engram's injected context; Claude Code keeps entries it does not render. */
export const ENGRAM_ATTACHMENT_TYPE = 'engram_context';

/**
 * Attachment types of Claude Code's own that Engram writes, so a Claude Code resume replays them into the
 * model's context (it skips a type it does not know): recalled memories and the background memory notice
 * (docs/claude-code-format.md, "Attachments").
 */
export const CLAUDE_CODE_ATTACHMENT_TYPES = ['relevant_memories', 'memory_update'] as const;
export type ClaudeCodeAttachmentType = (typeof CLAUDE_CODE_ATTACHMENT_TYPES)[number];

/** Claude Code's `relevant_memories` attachment: each memory with its absolute path and precomputed header. */
export interface RelevantMemoriesAttachmentObject {
  type: 'relevant_memories';
  memories: { path: string; content: string; mtimeMs: number; header: string }[];
}

/** Claude Code's `memory_update` attachment: what background memory work changed. */
export interface MemoryUpdateAttachmentObject {
  type: 'memory_update';
  source: 'extract' | 'dream' | 'session_memory';
  summary: string;
  paths: string[];
  inContextPaths: string[];
}

export type ClaudeCodeAttachmentObject = RelevantMemoriesAttachmentObject | MemoryUpdateAttachmentObject;

function isClaudeCodeAttachment(value: unknown): value is ClaudeCodeAttachmentObject {
  const type = (value as { type?: unknown } | null)?.type;
  return typeof type === 'string' && (CLAUDE_CODE_ATTACHMENT_TYPES as readonly string[]).includes(type);
}

function plainText(content: string | ContentBlock[]): string {
  if (typeof content === 'string') return content;
  return content.map((b) => (b.type === 'text' && typeof b.text === 'string' ? b.text : '')).join('\n');
}

/**
 * Model-visible context injected before a model call (e.g. recalled memories): rendered as user content.
 * Claude Code drops an attachment entry without an `attachment` object on resume (breaking the chain there),
 * so one is always written. With `extra.attachment` of one of Claude Code's own types, the entry has Claude
 * Code's shape — that object, plus the text as Claude Code renders it (`rendered: [{content}]`,
 * `renderedRole: 'system'`) — so Claude Code replays it on resume; otherwise
 * `{type: 'engram_context', kind, content}`. Both keep the `message` Engram renders.
 */
export function createAttachmentEntry(
  s: EntryStamp,
  content: string | ContentBlock[],
  extra: Partial<TranscriptEntry> = {},
): ChainEntry {
  const { attachment, ...rest } = extra;
  const kind = typeof rest.attachmentKind === 'string' ? rest.attachmentKind : undefined;
  const claudeCode = isClaudeCodeAttachment(attachment) ? attachment : undefined;
  return {
    ...stamp(s),
    type: 'attachment',
    isMeta: true,
    attachment: claudeCode ?? { type: ENGRAM_ATTACHMENT_TYPE, ...(kind ? { kind } : {}), content },
    ...(claudeCode ? { rendered: [{ content: plainText(content) }], renderedRole: 'system' } : {}),
    message: { role: 'user', content },
    ...rest,
  } as ChainEntry;
}

/**
 * The text an attachment entry puts before the model: its `message` (Engram's), else the `rendered` text
 * Claude Code stored beside one of its own attachments. Undefined when it has neither.
 */
export function attachmentRenderedText(entry: TranscriptEntry): string | undefined {
  if (entry.type !== 'attachment' || !Array.isArray(entry.rendered)) return undefined;
  if (!isClaudeCodeAttachment(entry.attachment)) return undefined;
  const parts = (entry.rendered as unknown[])
    .map((r) => (r as { content?: unknown } | null)?.content)
    .filter((c): c is string => typeof c === 'string' && c.trim() !== '');
  return parts.length > 0 ? parts.join('\n') : undefined;
}

/** A non-model-visible event in the chain (memory_saved, compact_boundary, …). */
export function createSystemEntry(
  s: EntryStamp,
  subtype: string,
  content: string,
  extra: Partial<TranscriptEntry> = {},
): ChainEntry {
  return {
    ...stamp(s),
    type: 'system',
    subtype,
    content,
    level: 'info',
    isMeta: false,
    ...extra,
  } as ChainEntry;
}

export function isChainEntry(entry: TranscriptEntry): entry is ChainEntry {
  return typeof entry.uuid === 'string' && entry.uuid.length > 0;
}

export function isCompactBoundary(entry: TranscriptEntry): boolean {
  return entry.type === 'system' && entry.subtype === SYSTEM_SUBTYPES.compactBoundary;
}

/**
 * Entries the model sees: user/assistant messages and attachments carrying a message. Entries marked
 * `isVisibleInTranscriptOnly` are for display — except a compaction summary, which Claude Code marks with both
 * flags and which is the first thing the model sees after a boundary (docs/claude-code-format.md,
 * "Compaction").
 */
export function isModelVisible(entry: TranscriptEntry): boolean {
  if (entry.isVisibleInTranscriptOnly === true && entry.isCompactSummary !== true) return false;
  if (entry.type !== 'user' && entry.type !== 'assistant' && entry.type !== 'attachment') return false;
  if (entry.message === undefined && attachmentRenderedText(entry) !== undefined) return true;
  const m = entry.message;
  return !!m && (typeof m.content === 'string' || Array.isArray(m.content));
}
