import fs from 'node:fs';
import { resolve, sep } from 'node:path';
import { type WalkedFile, walkSync } from '@engram/fs-walk/walk';
import { ENTRYPOINT_NAME } from '../paths/memory-paths.js';
import {
  type BlockScan,
  extractMemoryFields,
  MemoryFormatError,
  type MemoryFormatErrorCode,
  parseFrontmatterBlock,
  parseSimpleFrontmatter,
  splitFrontmatter,
} from './frontmatter.js';
import { parseMemoryLinks } from './links.js';
import type { MemoryType } from './memory-types.js';

// The scan lists the memories a model may be shown (recall manifest, extraction prompt, CLI). It runs on every
// recall, so it reads only the head of each file: the frontmatter, within the first 30 lines.
//
// I/O strategy, measured on these machines (bench/scan.ts): Node's async fs costs a thread-pool round trip per
// call (open, fstat, read, close), and a sequential async scan of 200 files is ~100× a synchronous one; even a
// 64-wide concurrent pool stays ~4×. So heads are read with synchronous calls in time-boxed slices that yield
// to the event loop every few milliseconds; if the filesystem turns out to be slow (a network volume: ≥1 ms
// per file), the rest of the scan switches to a bounded concurrent async pool, which hides latency instead.
// Parsed heads are cached per file path, keyed on (dev, inode, size, mtime, ctime): a repeat scan of unchanged
// files costs one stat each. Engram's own writes are atomic renames (new inode), so edits always miss.

export const MAX_MEMORY_FILES = 200;
export const FRONTMATTER_MAX_LINES = 30;
/** Bytes read per file first; enough for any ordinary frontmatter. */
export const HEAD_BYTES = 4096;
/** A frontmatter still open after this many bytes (and under 30 lines) is reported, not read further. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** Longest the scan blocks the event loop in one slice of synchronous reads. */
const SYNC_SLICE_MS = 4;
/** Average per-file read time above which the filesystem is treated as remote and read concurrently. */
const SLOW_FILE_MS = 1;
/** Files read between two looks at the clock; two windows averaging over SLOW_FILE_MS switch to async. */
const CLOCK_WINDOW = 4;
const ASYNC_CONCURRENCY = 16;
/** Directory entries visited before the walk gives up (a memory directory is not a source tree). */
const MAX_WALK_ENTRIES = 50_000;

export interface MemoryHeader {
  /** Relative to the memory directory, forward slashes. */
  filename: string;
  filePath: string;
  mtimeMs: number;
  name?: string;
  /** Frontmatter description, or null when there is none. */
  description: string | null;
  type?: MemoryType;
  /** `[[links]]` found in the first bytes read (frontmatter and the start of the body), when there are any. */
  links?: string[];
  /** Frontmatter `supersedes:` (a slug/filename or a list of them), when present. */
  supersedes?: string[];
  /** Frontmatter `modified:`/`updated:` as epoch ms, when present and a valid date. */
  modifiedMs?: number;
}

export type MemoryFileProblemCode =
  | MemoryFormatErrorCode
  | 'READ_FAILED'
  | 'NOT_A_FILE'
  | 'OUTSIDE_MEMORY_DIR'
  | 'DIRECTORY_UNREADABLE'
  | 'TOO_MANY_ENTRIES';

export interface MemoryFileProblem {
  filename: string;
  filePath: string;
  code: MemoryFileProblemCode;
  message: string;
}

export interface ScanOptions {
  signal?: AbortSignal;
  /** Accepted for callers that pin a clock; the scan itself does not depend on the time. */
  now?: number;
  /** Default MAX_MEMORY_FILES; the CLI lists everything with Infinity. */
  maxFiles?: number;
  /** 'auto' (default): time-boxed synchronous slices, async when the filesystem is slow. 'async': always async. */
  io?: 'auto' | 'async';
  /** Reuse heads parsed by earlier scans when the file's stat is unchanged (default true). */
  cache?: boolean;
}

export interface ScanResult {
  /** Newest first, at most maxFiles. */
  headers: MemoryHeader[];
  /** Files that could not be read or parsed; they are not in `headers`. */
  problems: MemoryFileProblem[];
  /** Memory files found before the maxFiles cut. */
  totalFiles: number;
}

interface Candidate extends WalkedFile {
  /** Present when the candidate was stat'ed to pick the newest maxFiles. */
  stat?: fs.Stats;
}

type HeadOutcome = { header: MemoryHeader } | { problem: MemoryFileProblem };

/**
 * Lists memory files under `memoryDir`: recursive, `*.md` except any `MEMORY.md`, skipping hidden files and
 * directories (`.history`, editor temp files) and symlinked directories; symlinked files count only when they
 * resolve inside the directory. Never throws for a bad file or a missing directory: problems are reported.
 * Throws only when `signal` aborts.
 */
export async function scanMemoryDir(memoryDir: string, opts: ScanOptions = {}): Promise<ScanResult> {
  const maxFiles = opts.maxFiles ?? MAX_MEMORY_FILES;
  throwIfAborted(opts.signal);
  const problems: MemoryFileProblem[] = [];
  let candidates = walk(resolve(memoryDir), problems);
  const totalFiles = candidates.length;
  if (candidates.length === 0) return { headers: [], problems, totalFiles };

  const ctx: ReadContext = {
    memoryDir,
    realRoot: undefined,
    buffer: Buffer.allocUnsafe(HEAD_BYTES),
    cache: opts.cache !== false,
  };
  if (candidates.length > maxFiles) {
    // Only the newest maxFiles heads are read: stat everything, keep the newest.
    for (const candidate of candidates) {
      try {
        candidate.stat = fs.statSync(candidate.path);
      } catch {
        // unreadable: sorted last, reported when read
      }
    }
    candidates.sort(compareCandidates);
    candidates = candidates.slice(0, maxFiles);
    await yieldToEventLoop();
    throwIfAborted(opts.signal);
  }

  const outcomes: HeadOutcome[] = [];
  let index = 0;
  if (opts.io !== 'async') {
    let sliceStart = performance.now();
    let previous = sliceStart;
    let slowWindows = 0;
    while (index < candidates.length) {
      outcomes.push(readHeadSync(candidates[index] as Candidate, ctx));
      index++;
      // The clock is read once per CLOCK_WINDOW files (a read costs about as much as a small file's head).
      if (index % CLOCK_WINDOW !== 0 && index < candidates.length) continue;
      const now = performance.now();
      if (now - previous > CLOCK_WINDOW * SLOW_FILE_MS && ++slowWindows >= 2) break;
      previous = now;
      if (now - sliceStart > SYNC_SLICE_MS && index < candidates.length) {
        await yieldToEventLoop();
        throwIfAborted(opts.signal);
        sliceStart = performance.now();
        previous = sliceStart;
      }
    }
  }
  if (index < candidates.length) {
    outcomes.push(...(await readHeadsAsync(candidates.slice(index), ctx, opts.signal)));
  }
  throwIfAborted(opts.signal);

  const headers: MemoryHeader[] = [];
  for (const outcome of outcomes) {
    if ('header' in outcome) headers.push(outcome.header);
    else problems.push(outcome.problem);
  }
  headers.sort(
    (a, b) => b.mtimeMs - a.mtimeMs || (a.filename < b.filename ? -1 : a.filename > b.filename ? 1 : 0),
  );
  return { headers: headers.slice(0, maxFiles), problems, totalFiles };
}

function compareCandidates(a: Candidate, b: Candidate): number {
  const diff = (b.stat?.mtimeMs ?? Number.NEGATIVE_INFINITY) - (a.stat?.mtimeMs ?? Number.NEGATIVE_INFINITY);
  if (diff !== 0 && !Number.isNaN(diff)) return diff;
  return a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0;
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    throw signal.reason ?? new DOMException('The memory scan was aborted.', 'AbortError');
  }
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

// ---------------------------------------------------------------------------------------------------------
// Walk

function isMemoryFileName(name: string): boolean {
  return name.endsWith('.md') && name !== ENTRYPOINT_NAME;
}

function walk(root: string, problems: MemoryFileProblem[]): Candidate[] {
  const listing = walkSync(root, {
    symlinks: 'list',
    include: isMemoryFileName,
    maxEntries: MAX_WALK_ENTRIES,
  });
  for (const error of listing.errors) {
    problems.push({
      filename: error.rel,
      filePath: error.path,
      code: 'DIRECTORY_UNREADABLE',
      message: `cannot list ${error.rel === '' ? 'the memory directory' : 'this directory'} (${error.code}).`,
    });
  }
  if (listing.truncated === 'entries') {
    problems.push({
      filename: '',
      filePath: root,
      code: 'TOO_MANY_ENTRIES',
      message: `stopped after ${MAX_WALK_ENTRIES} entries; the memory directory should hold notes, not a file tree.`,
    });
  }
  return listing.files;
}

interface ReadContext {
  memoryDir: string;
  realRoot: string | undefined;
  buffer: Buffer;
  cache: boolean;
}

// ---------------------------------------------------------------------------------------------------------
// Head cache

interface CachedHead {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
  outcome: HeadOutcome;
}

/** Enough for several projects' memory directories in one worker; oldest entries are evicted first. */
export const SCAN_CACHE_MAX_ENTRIES = 4096;
const headCache = new Map<string, CachedHead>();

/** Forgets every cached head (tests; or after restoring files with preserved timestamps). */
export function clearScanCache(): void {
  headCache.clear();
}

interface StatLike {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}

function cachedOutcome(candidate: Candidate, stat: StatLike | undefined): HeadOutcome | undefined {
  const cached = headCache.get(candidate.path);
  if (
    cached === undefined ||
    stat === undefined ||
    cached.ino !== stat.ino ||
    cached.dev !== stat.dev ||
    cached.size !== stat.size ||
    cached.mtimeMs !== stat.mtimeMs ||
    cached.ctimeMs !== stat.ctimeMs
  ) {
    return undefined;
  }
  // The same file may be scanned from a different root (memory dir vs team dir): rebase the names.
  const outcome = cached.outcome;
  if ('header' in outcome) {
    return { header: { ...outcome.header, filename: candidate.rel, filePath: candidate.path } };
  }
  return { problem: { ...outcome.problem, filename: candidate.rel, filePath: candidate.path } };
}

function remember(candidate: Candidate, stat: StatLike, outcome: HeadOutcome): HeadOutcome {
  if ('problem' in outcome && outcome.problem.code === 'READ_FAILED') return outcome;
  if (headCache.size >= SCAN_CACHE_MAX_ENTRIES && !headCache.has(candidate.path)) {
    const oldest = headCache.keys().next();
    if (!oldest.done) headCache.delete(oldest.value);
  }
  headCache.set(candidate.path, {
    dev: stat.dev,
    ino: stat.ino,
    size: stat.size,
    mtimeMs: stat.mtimeMs,
    ctimeMs: stat.ctimeMs,
    outcome,
  });
  return outcome;
}

// ---------------------------------------------------------------------------------------------------------
// Heads

function problem(candidate: Candidate, code: MemoryFileProblemCode, message: string): HeadOutcome {
  return { problem: { filename: candidate.rel, filePath: candidate.path, code, message } };
}

function symlinkOutside(candidate: Candidate, ctx: ReadContext): HeadOutcome | undefined {
  try {
    ctx.realRoot ??= fs.realpathSync(ctx.memoryDir);
    const real = fs.realpathSync(candidate.path);
    const prefix = ctx.realRoot.endsWith(sep) ? ctx.realRoot : ctx.realRoot + sep;
    if (real.startsWith(prefix)) return undefined;
    return problem(candidate, 'OUTSIDE_MEMORY_DIR', 'symlink points outside the memory directory; not read.');
  } catch (error) {
    return problem(
      candidate,
      'READ_FAILED',
      `cannot resolve symlink (${(error as NodeJS.ErrnoException).code}).`,
    );
  }
}

const OPEN_FLAGS = fs.constants.O_RDONLY;
const OPEN_NOFOLLOW = fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0);

function readHeadSync(candidate: Candidate, ctx: ReadContext): HeadOutcome {
  if (candidate.symlink) {
    const refused = symlinkOutside(candidate, ctx);
    if (refused) return refused;
  }
  if (ctx.cache && headCache.has(candidate.path)) {
    let stat: StatLike | undefined = candidate.stat;
    try {
      stat ??= fs.statSync(candidate.path, { throwIfNoEntry: false });
    } catch {
      stat = undefined;
    }
    const hit = cachedOutcome(candidate, stat);
    if (hit) return hit;
  }
  let fd: number;
  try {
    fd = fs.openSync(candidate.path, candidate.symlink ? OPEN_FLAGS : OPEN_NOFOLLOW);
  } catch (error) {
    return readFailed(candidate, error);
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile()) return problem(candidate, 'NOT_A_FILE', 'not a regular file.');
    let buffer = ctx.buffer;
    let length = fs.readSync(fd, buffer, 0, HEAD_BYTES, 0);
    for (;;) {
      const eof = length < buffer.length;
      const outcome = parseHead(candidate, stat.mtimeMs, buffer, length, eof);
      if (outcome !== 'need-more') return ctx.cache ? remember(candidate, stat, outcome) : outcome;
      const bigger = Buffer.allocUnsafe(Math.min(buffer.length * 4, MAX_HEAD_BYTES));
      buffer.copy(bigger, 0, 0, length);
      buffer = bigger;
      length += fs.readSync(fd, buffer, length, buffer.length - length, length);
    }
  } catch (error) {
    return readFailed(candidate, error);
  } finally {
    fs.closeSync(fd);
  }
}

function readFailed(candidate: Candidate, error: unknown): HeadOutcome {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ELOOP') return problem(candidate, 'NOT_A_FILE', 'is a symlink that cannot be followed.');
  return problem(candidate, 'READ_FAILED', `cannot read (${code ?? String(error)}).`);
}

async function readHeadsAsync(
  candidates: Candidate[],
  ctx: ReadContext,
  signal: AbortSignal | undefined,
): Promise<HeadOutcome[]> {
  const out: HeadOutcome[] = new Array(candidates.length);
  let next = 0;
  const worker = async () => {
    while (next < candidates.length && !signal?.aborted) {
      const i = next++;
      out[i] = await readHeadAsync(candidates[i] as Candidate, ctx);
    }
  };
  await Promise.all(Array.from({ length: Math.min(ASYNC_CONCURRENCY, candidates.length) }, worker));
  throwIfAborted(signal);
  return out;
}

async function readHeadAsync(candidate: Candidate, ctx: ReadContext): Promise<HeadOutcome> {
  if (candidate.symlink) {
    const refused = symlinkOutside(candidate, ctx);
    if (refused) return refused;
  }
  if (ctx.cache && headCache.has(candidate.path)) {
    const stat = await new Promise<StatLike | undefined>((resolve) =>
      fs.stat(candidate.path, (error, st) => resolve(error ? undefined : st)),
    );
    const hit = cachedOutcome(candidate, stat);
    if (hit) return hit;
  }
  // Callback API: several times cheaper per call than fs.promises' FileHandle.
  return new Promise((resolve) => {
    fs.open(candidate.path, candidate.symlink ? OPEN_FLAGS : OPEN_NOFOLLOW, (openError, fd) => {
      if (openError) return resolve(readFailed(candidate, openError));
      const finish = (outcome: HeadOutcome) => fs.close(fd, () => resolve(outcome));
      fs.fstat(fd, (statError, stat) => {
        if (statError) return finish(readFailed(candidate, statError));
        if (!stat.isFile()) return finish(problem(candidate, 'NOT_A_FILE', 'not a regular file.'));
        const readMore = (buffer: Buffer, length: number) => {
          fs.read(fd, buffer, length, buffer.length - length, length, (readError, bytesRead) => {
            if (readError) return finish(readFailed(candidate, readError));
            const total = length + bytesRead;
            const outcome = parseHead(candidate, stat.mtimeMs, buffer, total, total < buffer.length);
            if (outcome !== 'need-more')
              return finish(ctx.cache ? remember(candidate, stat, outcome) : outcome);
            const bigger = Buffer.allocUnsafe(Math.min(buffer.length * 4, MAX_HEAD_BYTES));
            buffer.copy(bigger, 0, 0, total);
            readMore(bigger, total);
          });
        };
        readMore(Buffer.allocUnsafe(HEAD_BYTES), 0);
      });
    });
  });
}

const NEWLINE = 0x0a;
const NOT_PRINTABLE_ASCII = /[^\n\x20-\x7e]/;
const NO_SPECIALS: BlockScan = { hash: false, backslash: false };

function isBlank(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0d;
}

/**
 * Turns the first bytes of a file into a header, a problem, or 'need-more' (the buffer filled up before the
 * frontmatter closed and before 30 lines).
 */
export function parseHead(
  candidate: { rel: string; path: string },
  mtimeMs: number,
  buffer: Buffer,
  length: number,
  eof: boolean,
): HeadOutcome | 'need-more' {
  const c = candidate as Candidate;
  // One latin1 decode of the bytes read (a byte per character, no validation): every search below is then a
  // V8 string search, far cheaper per call than Buffer#indexOf. Searching it for ASCII text is exact, since no
  // byte of a multi-byte UTF-8 sequence is ASCII; text that is shown is decoded as UTF-8 from the buffer.
  const head = buffer.toString('latin1', 0, length);
  if (head.indexOf('\0') !== -1) {
    return problem(c, 'BINARY', 'file contains NUL bytes; it is binary, not a Markdown memory.');
  }
  const start = length >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0;
  const base: MemoryHeader = { filename: c.rel, filePath: c.path, mtimeMs, description: null };
  // Links cost a decode only in the files that have some.
  if (head.indexOf('[[', start) !== -1) {
    const links = parseMemoryLinks(buffer.toString('utf8', start, length));
    if (links.length > 0) base.links = links;
  }
  if (!head.startsWith('---', start)) return { header: base };
  // Quick path: a bare `---` first line and a closing `---` line within the line limit — nearly every memory
  // file. The closing line is found with one search for "\n---" (plus one per `----`/`--- x` line inside the
  // block); a block of printable ASCII is used as decoded, and what the reader needs to know about its
  // characters is asked of it once. Anything else — a language tag, no close within the bytes we have —
  // takes the general path, which agrees with parseMemoryFile (property-tested).
  let i = start + 3;
  while (i < length && isBlank(head.charCodeAt(i))) i++;
  if (i < length && head.charCodeAt(i) === NEWLINE) {
    const blockStart = i + 1;
    let search = i; // the opening line's newline: an empty block closes right after it
    for (;;) {
      const q = head.indexOf('\n---', search);
      if (q === -1) break;
      let e = q + 4;
      while (e < length && isBlank(head.charCodeAt(e))) e++;
      if (e < length && head.charCodeAt(e) !== NEWLINE) {
        search = q + 1; // `----` or `--- text`: not a delimiter
        continue;
      }
      if (e >= length && !eof) break; // the line may go on past the bytes read
      let blockEnd = Math.max(q, blockStart);
      if (blockEnd > blockStart && head.charCodeAt(blockEnd - 1) === 0x0d) blockEnd--;
      // The opening line is line 1 and the block starts on line 2: the closing line must be within the limit.
      let closingLine = 2;
      for (let nl = head.indexOf('\n', blockStart); nl !== -1 && nl <= q; nl = head.indexOf('\n', nl + 1)) {
        if (++closingLine > FRONTMATTER_MAX_LINES) break;
      }
      if (closingLine > FRONTMATTER_MAX_LINES) break;
      if (blockEnd === blockStart) return headerFromBlock(c, base, '', NO_SPECIALS);
      const latin1 = head.slice(blockStart, blockEnd);
      if (NOT_PRINTABLE_ASCII.test(latin1)) {
        return headerFromBlock(c, base, buffer.toString('utf8', blockStart, blockEnd));
      }
      return headerFromBlock(c, base, latin1, {
        hash: latin1.includes('#'),
        backslash: latin1.includes('\\'),
      });
    }
  }
  // General path: whole lines only, at most FRONTMATTER_MAX_LINES of them.
  let end = start;
  let lines = 0;
  while (lines < FRONTMATTER_MAX_LINES) {
    const nl = head.indexOf('\n', end);
    if (nl === -1) break;
    end = nl + 1;
    lines++;
  }
  const complete = eof || lines >= FRONTMATTER_MAX_LINES;
  if (!complete && lines === 0) return length < MAX_HEAD_BYTES ? 'need-more' : tooLongProblem(c);
  if (eof && lines < FRONTMATTER_MAX_LINES) end = length;
  const split = trySplit(c, buffer.toString('utf8', start, end));
  if (split === undefined) return { header: base };
  if ('problem' in split) return split;
  if (split.kind === 'block') return headerFromBlock(c, base, split.block);
  if (split.hitLineLimit) return tooLongProblem(c);
  if (!complete) return length < MAX_HEAD_BYTES ? 'need-more' : tooLongProblem(c);
  return problem(
    c,
    'UNTERMINATED',
    'frontmatter opened with "---" is never closed; add a closing "---" line.',
  );
}

function tooLongProblem(c: Candidate): HeadOutcome {
  return problem(
    c,
    'FRONTMATTER_TOO_LONG',
    `frontmatter does not close within the first ${FRONTMATTER_MAX_LINES} lines; keep it to name, description and type.`,
  );
}

function trySplit(
  c: Candidate,
  text: string,
):
  | Exclude<ReturnType<typeof splitFrontmatter>, { kind: 'none' }>
  | { problem: MemoryFileProblem }
  | undefined {
  try {
    const split = splitFrontmatter(text, c.rel, FRONTMATTER_MAX_LINES);
    return split.kind === 'none' ? undefined : split;
  } catch (error) {
    return formatProblem(c, error);
  }
}

/** `asciiScan`: the block is known to hold only printable ASCII and newlines (see parseSimpleFrontmatter). */
function headerFromBlock(
  c: Candidate,
  base: MemoryHeader,
  block: string,
  asciiScan?: BlockScan,
): HeadOutcome {
  try {
    const data =
      (asciiScan ? parseSimpleFrontmatter(block, asciiScan) : undefined) ??
      parseFrontmatterBlock(block, c.rel).data;
    const fields = extractMemoryFields(data);
    const header: MemoryHeader = {
      filename: base.filename,
      filePath: base.filePath,
      mtimeMs: base.mtimeMs,
      description: fields.description ?? null,
    };
    if (fields.name !== undefined) header.name = fields.name;
    if (fields.type !== undefined) header.type = fields.type;
    if (base.links) header.links = base.links;
    if (data.supersedes !== undefined) {
      const supersedes = stringList(data.supersedes);
      if (supersedes.length > 0) header.supersedes = supersedes;
    }
    const modified = dateMs(data.modified ?? data.updated);
    if (modified !== undefined) header.modifiedMs = modified;
    return { header };
  } catch (error) {
    return formatProblem(c, error);
  }
}

function stringList(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  const items = Array.isArray(value) ? value : value === undefined || value === null ? [] : [value];
  return items
    .filter((v): v is string => typeof v === 'string')
    .map((v) => v.replace(/^\[\[|\]\]$/g, '').trim())
    .filter((v) => v !== '');
}

function dateMs(value: unknown): number | undefined {
  const ms =
    value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : Number.NaN;
  return Number.isFinite(ms) ? ms : undefined;
}

function formatProblem(c: Candidate, error: unknown): { problem: MemoryFileProblem } {
  if (error instanceof MemoryFormatError) {
    const message = error.message.startsWith(`${c.rel}: `)
      ? error.message.slice(c.rel.length + 2)
      : error.message;
    return { problem: { filename: c.rel, filePath: c.path, code: error.code, message } };
  }
  return {
    problem: { filename: c.rel, filePath: c.path, code: 'READ_FAILED', message: String(error) },
  };
}

// ---------------------------------------------------------------------------------------------------------
// Manifest

/** One line per memory: `- [type] path (ISO mtime): description`; type and description only when known. */
export function formatMemoryManifest(headers: readonly MemoryHeader[]): string {
  return headers
    .map((h) => {
      const type = h.type ? `[${h.type}] ` : '';
      const when = Number.isFinite(h.mtimeMs) ? new Date(h.mtimeMs).toISOString() : 'unknown time';
      const description = h.description ? `: ${h.description.replace(/\s+/g, ' ').trim()}` : '';
      const links = h.links?.length ? ` (links: ${h.links.map((l) => `[[${l}]]`).join(', ')})` : '';
      return `- ${type}${h.filename} (${when})${description}${links}`;
    })
    .join('\n');
}
