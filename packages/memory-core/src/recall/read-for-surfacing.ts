import fsSync, { constants, promises as fs } from 'node:fs';
import { join } from 'node:path';
import { recalledMemoryHeader } from '../memdir/freshness.js';
import { type ContainmentFs, resolveInside } from '../paths/containment.js';
import { normalizeMemoryRelPath } from './select.js';

// Reading the chosen memories for injection (docs/claude-code-memory.md §5 "Reading and injecting"): the head of each file,
// capped by lines and bytes, with a note pointing at the full file when cut, and a header computed once so the
// injected bytes never change between turns (the prompt cache depends on it). The only I/O in recall/.

/** Lines of a memory file injected at most. */
export const MAX_MEMORY_LINES = 200;
/** Bytes of a memory file injected at most (5 files × 4 KiB ≈ 20 KiB per turn). */
export const MAX_MEMORY_BYTES = 4096;

/** One memory ready to inject; the shape of the recall job's result attachments. */
export interface RecalledMemory {
  /** Relative to the memory directory, forward slashes (the key of the surfaced and read sets). */
  path: string;
  /** Precomputed once (freshness caveat or "saved today/yesterday"); never recomputed. */
  header: string;
  /** The injected text, including the truncation note when cut. */
  content: string;
  truncated: boolean;
  mtimeMs: number;
  /** Lines injected, when truncated (a partial view, so it must not count as a full read of the file). */
  limit?: number;
}

export type TruncationReason = 'lines' | 'bytes';

export interface TruncatedText {
  text: string;
  truncated: TruncationReason | undefined;
  /** Lines kept. */
  lines: number;
}

function countLines(text: string): number {
  if (text === '') return 0;
  let n = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < text.length - 1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/**
 * The first MAX_MEMORY_LINES lines and at most MAX_MEMORY_BYTES bytes of `head`; `complete` says whether
 * `head` is the whole file (it must hold at least MAX_MEMORY_BYTES + 1 bytes otherwise). A byte cut lands on
 * a UTF-8 character boundary. Pure.
 */
export function truncateMemoryHead(head: Buffer, complete: boolean): TruncatedText {
  const limit = Math.min(head.length, MAX_MEMORY_BYTES);
  // The end of line MAX_MEMORY_LINES, if it comes within the byte budget and more follows.
  let newlines = 0;
  for (let i = 0; i < limit; i++) {
    if (head[i] !== 0x0a) continue;
    newlines++;
    if (newlines === MAX_MEMORY_LINES && (i + 1 < head.length || !complete)) {
      const text = head.subarray(0, i).toString('utf8');
      return { text, truncated: 'lines', lines: MAX_MEMORY_LINES };
    }
  }
  if (head.length <= MAX_MEMORY_BYTES && complete) {
    const text = head.toString('utf8');
    return { text, truncated: undefined, lines: countLines(text) };
  }
  let cut = MAX_MEMORY_BYTES;
  // Back off to the first byte of the character the limit falls in (continuation bytes are 10xxxxxx).
  while (cut > 0 && ((head[cut] ?? 0) & 0xc0) === 0x80) cut--;
  const text = head.subarray(0, cut).toString('utf8');
  return { text, truncated: 'bytes', lines: countLines(text) };
}

export function truncationNote(reason: TruncationReason, absolutePath: string): string {
  const why = reason === 'lines' ? `to its first ${MAX_MEMORY_LINES} lines` : `at ${MAX_MEMORY_BYTES} bytes`;
  return `\n\n> This memory was cut ${why}. The whole file is at ${absolutePath}; use the Read tool to see the rest.`;
}

export interface ReadForSurfacingOptions {
  memoryDir: string;
  /** Paths relative to the memory directory, in the order to surface them. */
  filenames: readonly string[];
  /**
   * How the memory directory is named in the text the model sees (header, truncation note), when the
   * reader mounts it elsewhere than the agent does. Never used to read. Default `memoryDir`.
   */
  displayDir?: string;
  /** Clock for the freshness header. */
  now?: number;
  signal?: AbortSignal;
  /** 'auto' (default): synchronous calls, async once a file is slow. 'async': always async. */
  io?: 'auto' | 'async';
  /** A line to put before a memory's header, by relative path (e.g. supersessionNotes). */
  notes?: ReadonlyMap<string, string>;
}

export interface DroppedMemory {
  path: string;
  reason: 'outside-memory-dir' | 'not-a-file' | 'unreadable';
  detail: string;
}

export interface ReadForSurfacingResult {
  memories: RecalledMemory[];
  dropped: DroppedMemory[];
}

// O_NOFOLLOW: the final component was just resolved inside; a symlink swapped in since then is refused.
// O_NONBLOCK: a FIFO planted in the memory directory must not hang the read (it is then refused as not a file).
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);
/** A file slower than this to check and read means a remote filesystem: read the rest concurrently. */
const SLOW_FILE_MS = 1;

// I/O strategy (as in memdir/scan.ts, measured in bench/recall.ts): a recall reads at most five 4 KiB heads,
// and each async fs call is a thread-pool round trip, so synchronous calls are several times faster on a
// local disk and block the loop for well under a millisecond. When a file turns out to be slow (a network
// volume), the remaining files are read with async calls, concurrently, so the loop is not held.
const syncIo: ContainmentFs & { readHead(path: string): Head } = {
  realpath: async (p) => fsSync.realpathSync.native(p),
  lstat: async (p) => fsSync.lstatSync(p),
  readHead(path) {
    const fd = fsSync.openSync(path, OPEN_FLAGS);
    try {
      const stat = fsSync.fstatSync(fd);
      if (!stat.isFile()) return { stat, head: undefined };
      const buffer = Buffer.allocUnsafe(MAX_MEMORY_BYTES + 1);
      let filled = 0;
      while (filled < buffer.length) {
        const n = fsSync.readSync(fd, buffer, filled, buffer.length - filled, filled);
        if (n === 0) break;
        filled += n;
      }
      return { stat, head: buffer.subarray(0, filled) };
    } finally {
      fsSync.closeSync(fd);
    }
  },
};

async function readHeadAsync(path: string): Promise<Head> {
  const handle = await fs.open(path, OPEN_FLAGS);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return { stat, head: undefined };
    const buffer = Buffer.allocUnsafe(MAX_MEMORY_BYTES + 1);
    let filled = 0;
    while (filled < buffer.length) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return { stat, head: buffer.subarray(0, filled) };
  } finally {
    await handle.close();
  }
}

interface Head {
  stat: { mtimeMs: number };
  /** Undefined when the path is not a regular file. */
  head: Buffer | undefined;
}

type ReadOutcome = { memory: RecalledMemory } | { dropped: DroppedMemory };

/**
 * Reads each file for injection. Every path must resolve (symlinks included) strictly inside `memoryDir`;
 * files outside, non-regular files and unreadable ones are dropped and reported, never thrown.
 */
export async function readMemoriesForSurfacing(
  options: ReadForSurfacingOptions,
): Promise<ReadForSurfacingResult> {
  const ctx: ReadContext = {
    memoryDir: options.memoryDir,
    displayDir: options.displayDir ?? options.memoryDir,
    now: options.now ?? Date.now(),
    notes: options.notes,
  };
  const outcomes: ReadOutcome[] = [];
  let index = 0;
  for (; options.io !== 'async' && index < options.filenames.length; index++) {
    const started = performance.now();
    outcomes.push(await readOne(ctx, options.filenames[index] as string, 'sync'));
    if (performance.now() - started > SLOW_FILE_MS) {
      index++;
      break;
    }
  }
  outcomes.push(
    ...(await Promise.all(options.filenames.slice(index).map((filename) => readOne(ctx, filename, 'async')))),
  );
  options.signal?.throwIfAborted();
  const memories: RecalledMemory[] = [];
  const dropped: DroppedMemory[] = [];
  for (const outcome of outcomes) {
    if ('memory' in outcome) memories.push(outcome.memory);
    else dropped.push(outcome.dropped);
  }
  return { memories, dropped };
}

interface ReadContext {
  memoryDir: string;
  displayDir: string;
  now: number;
  notes: ReadonlyMap<string, string> | undefined;
}

async function readOne(ctx: ReadContext, filename: string, io: 'sync' | 'async'): Promise<ReadOutcome> {
  const path = normalizeMemoryRelPath(filename);
  const contained = await resolveInside(
    join(ctx.memoryDir, path),
    ctx.memoryDir,
    io === 'sync' ? { fs: syncIo } : {},
  );
  if (!contained.ok) return { dropped: { path, reason: 'outside-memory-dir', detail: contained.reason } };
  try {
    const { stat, head } =
      io === 'sync' ? syncIo.readHead(contained.path) : await readHeadAsync(contained.path);
    if (!head) return { dropped: { path, reason: 'not-a-file', detail: 'not a regular file' } };
    const cut = truncateMemoryHead(head, head.length <= MAX_MEMORY_BYTES);
    const absolutePath = join(ctx.displayDir, path);
    const content = cut.truncated ? cut.text + truncationNote(cut.truncated, absolutePath) : cut.text;
    const header = recalledMemoryHeader(absolutePath, stat.mtimeMs, ctx.now);
    const note = ctx.notes?.get(path);
    return {
      memory: {
        path,
        header: note ? `${note}\n${header}` : header,
        content,
        truncated: cut.truncated !== undefined,
        mtimeMs: stat.mtimeMs,
        ...(cut.truncated ? { limit: cut.lines } : {}),
      },
    };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ELOOP under O_NOFOLLOW: the file became a symlink after the containment check.
    if (code === 'ELOOP') {
      return { dropped: { path, reason: 'outside-memory-dir', detail: 'the file is a symlink' } };
    }
    return { dropped: { path, reason: 'unreadable', detail: code ?? (error as Error).message } };
  }
}
