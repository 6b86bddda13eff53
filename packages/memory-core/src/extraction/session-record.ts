import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { z } from 'zod';

// Two small files beside a session's transcript, in its session directory, that make memory work recoverable
// without the queue engine:
//   memory-session.json  which project the session's memories belong to (written at the first turn end that
//                        asks for memory work): the reconciliation job finds sessions by it and rebuilds their
//                        extraction payload from it and the transcript alone;
//   memory-outbox.json   memory work the foreground could not enqueue (the engine was away), newest request per
//                        kind; handed to the queue when the engine is back — by the foreground, or by the
//                        reconciliation job if that process is gone.

export const SESSION_RECORD_FILENAME = 'memory-session.json';
export const OUTBOX_FILENAME = 'memory-outbox.json';

export const sessionRecord = z.object({
  version: z.literal(1),
  sessionId: z.string().min(1),
  /** sanitize(project root): where the session's memories live. */
  projectDir: z.string().min(1),
  /** sanitize(launch cwd): where its transcript lives. */
  transcriptDir: z.string().min(1),
});
export type SessionRecord = z.infer<typeof sessionRecord>;

export const outboxItem = z.object({
  kind: z.enum(['extract', 'session-memory', 'dream']),
  payload: z.record(z.string(), z.unknown()),
  atMs: z.number(),
});
export type OutboxItem = z.infer<typeof outboxItem>;
const outboxFile = z.object({ version: z.literal(1), items: z.array(outboxItem) });

export function sessionRecordPath(sessionDir: string): string {
  return join(sessionDir, SESSION_RECORD_FILENAME);
}

export function outboxPath(sessionDir: string): string {
  return join(sessionDir, OUTBOX_FILENAME);
}

async function readJson(path: string): Promise<unknown> {
  const text = await fs.readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export async function writeSessionRecord(sessionDir: string, record: SessionRecord): Promise<void> {
  await writeFileAtomic(sessionRecordPath(sessionDir), `${JSON.stringify(record)}\n`);
}

/** The record, or undefined when there is none or it is not one of ours (a damaged file is ignored). */
export async function readSessionRecord(sessionDir: string): Promise<SessionRecord | undefined> {
  const parsed = sessionRecord.safeParse(await readJson(sessionRecordPath(sessionDir)));
  return parsed.success ? parsed.data : undefined;
}

export async function readOutbox(sessionDir: string): Promise<OutboxItem[]> {
  const parsed = outboxFile.safeParse(await readJson(outboxPath(sessionDir)));
  return parsed.success ? parsed.data.items : [];
}

/** The newest request per kind wins (a later turn's extraction covers the earlier one's range). */
function coalesce(items: readonly OutboxItem[]): OutboxItem[] {
  const byKind = new Map<string, OutboxItem>();
  for (const item of items) {
    const seq = (i: OutboxItem) => (typeof i.payload.leafSeq === 'number' ? i.payload.leafSeq : 0);
    const cur = byKind.get(item.kind);
    if (!cur || seq(item) >= seq(cur)) byKind.set(item.kind, item);
  }
  return [...byKind.values()].sort((a, b) => a.atMs - b.atMs);
}

export async function addToOutbox(sessionDir: string, item: OutboxItem): Promise<void> {
  const items = coalesce([...(await readOutbox(sessionDir)), item]);
  await writeFileAtomic(outboxPath(sessionDir), `${JSON.stringify({ version: 1, items })}\n`);
}

/**
 * Hands every item to `enqueue`; items it accepts leave the outbox, the rest stay (the file is rewritten
 * atomically, or removed when empty). Returns how many were handed over.
 */
export async function drainOutbox(
  sessionDir: string,
  enqueue: (item: OutboxItem) => Promise<boolean>,
): Promise<{ handed: number; left: number }> {
  const items = await readOutbox(sessionDir);
  if (items.length === 0) return { handed: 0, left: 0 };
  const key = (i: OutboxItem) => `${i.kind}:${i.atMs}`;
  const handedKeys = new Set<string>();
  for (const item of items) {
    if (await enqueue(item).catch(() => false)) handedKeys.add(key(item));
  }
  const handed = handedKeys.size;
  // An item added while we were draining is kept: re-read and drop only what was handed over.
  const now = await readOutbox(sessionDir);
  const remaining = now.filter((i) => !handedKeys.has(key(i)));
  if (remaining.length === 0) await fs.rm(outboxPath(sessionDir), { force: true });
  else await writeFileAtomic(outboxPath(sessionDir), `${JSON.stringify({ version: 1, items: remaining })}\n`);
  return { handed, left: remaining.length };
}

// The extraction cursor, kept on disk beside the transcript as well as in the queue engine's state: a worker
// service in another namespace or on another engine (`engram demo`'s own stack, a restarted dev Redis) sees
// what a finished extraction covered, so its sweep never extracts that range again.
export const EXTRACTED_FILENAME = 'memory-extracted.json';

export const extractedMark = z.object({
  version: z.literal(1),
  leafUuid: z.string().min(1),
  leafSeq: z.number().int().nonnegative(),
});
export type ExtractedMark = z.infer<typeof extractedMark>;

export async function readExtractedMark(sessionDir: string): Promise<ExtractedMark | undefined> {
  const parsed = extractedMark.safeParse(await readJson(join(sessionDir, EXTRACTED_FILENAME)));
  return parsed.success ? parsed.data : undefined;
}

/** Moves the on-disk cursor forward to `leaf` (never back); false when it already covers it. */
export async function advanceExtractedMark(
  sessionDir: string,
  leaf: { leafUuid: string; leafSeq: number },
): Promise<boolean> {
  const current = await readExtractedMark(sessionDir);
  if (current && current.leafSeq >= leaf.leafSeq) return false;
  await fs.mkdir(sessionDir, { recursive: true });
  await writeFileAtomic(
    join(sessionDir, EXTRACTED_FILENAME),
    `${JSON.stringify({ version: 1, leafUuid: leaf.leafUuid, leafSeq: leaf.leafSeq })}\n`,
  );
  return true;
}
