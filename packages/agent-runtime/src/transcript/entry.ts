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
  /** Per tool_use_id facts a tool reported beside its model-visible result (e.g. file path and mtime). */
  toolUseResults?: Record<string, ToolUseRecord>;
  [key: string]: unknown;
}

export type ToolUseRecord = Record<string, unknown>;

export interface ChainEntry extends TranscriptEntry {
  type: ChainEntryType;
  uuid: string;
  parentUuid: string | null;
  sessionId: string;
  cwd: string;
  timestamp: string;
}

export interface EntryStamp {
  sessionId: string;
  cwd: string;
  parentUuid: string | null;
  /** Injected clock, for deterministic tests. */
  now?: () => Date;
  uuid?: () => string;
}

function stamp(s: EntryStamp) {
  return {
    uuid: (s.uuid ?? randomUUID)(),
    parentUuid: s.parentUuid,
    sessionId: s.sessionId,
    cwd: s.cwd,
    timestamp: (s.now?.() ?? new Date()).toISOString(),
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

/** Model-visible context injected before a model call (e.g. recalled memories): rendered as user content. */
export function createAttachmentEntry(
  s: EntryStamp,
  content: string | ContentBlock[],
  extra: Partial<TranscriptEntry> = {},
): ChainEntry {
  return {
    ...stamp(s),
    type: 'attachment',
    isMeta: true,
    message: { role: 'user', content },
    ...extra,
  } as ChainEntry;
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

/** Entries the model sees: user/assistant messages and attachments carrying a message. */
export function isModelVisible(entry: TranscriptEntry): boolean {
  if (entry.isVisibleInTranscriptOnly === true) return false;
  if (entry.type !== 'user' && entry.type !== 'assistant' && entry.type !== 'attachment') return false;
  const m = entry.message;
  return !!m && (typeof m.content === 'string' || Array.isArray(m.content));
}
