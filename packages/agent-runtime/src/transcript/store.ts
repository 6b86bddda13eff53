import { constants, promises as fs } from 'node:fs';
import { dirname, join } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { findLeaf } from './chain.js';
import {
  chainEntrySchema,
  isChainEntry,
  isValidEntryShape,
  type TranscriptEntry,
  transcriptEntrySchema,
} from './entry.js';

// One session transcript: an append-only JSONL file. Each batch is one write(2) on an O_APPEND descriptor,
// so concurrent writers (foreground, a worker adding `memory_saved`) interleave whole batches, never bytes
// of one line. Reading tolerates what a crash leaves behind: a torn last line and stray invalid lines are
// reported and skipped instead of making the whole session unreadable.

function copyResult(r: ReadResult): ReadResult {
  return { entries: [...r.entries], invalid: [...r.invalid], tornTail: r.tornTail };
}

export type TranscriptErrorCode = 'TRANSCRIPT_INVALID_ENTRY' | 'TRANSCRIPT_IO';

/** An entry that is not a transcript entry (never retryable), or the file could not be read or written (may be). */
export class TranscriptError extends EngramError {
  declare readonly code: TranscriptErrorCode;
  constructor(code: TranscriptErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, { retryable: code === 'TRANSCRIPT_IO', ...options });
  }
}

export interface InvalidLine {
  /** 1-based line number in the file. */
  line: number;
  reason: string;
}

export interface ReadResult {
  entries: TranscriptEntry[];
  invalid: InvalidLine[];
  /** The file did not end with a newline and its last line did not parse (a write cut short). */
  tornTail: boolean;
}

export interface TranscriptStoreOptions {
  /** Mode of a newly created transcript. Default 0o600: transcripts hold conversation contents. */
  fileMode?: number;
  dirMode?: number;
}

const NEWLINE = 0x0a;

/** Parses one JSONL line into an entry, or returns the reason it is not one. */
export function parseEntryLine(line: string): TranscriptEntry | string {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (e) {
    return `not JSON (${(e as Error).message})`;
  }
  if (isValidEntryShape(value)) return value;
  const parsed = transcriptEntrySchema.safeParse(value);
  if (!parsed.success) {
    return parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
  }
  return parsed.data as TranscriptEntry;
}

/** Splits file contents into entries; pure, so tests and the benchmark can feed it strings. */
export function parseTranscript(text: string): ReadResult {
  const entries: TranscriptEntry[] = [];
  const invalid: InvalidLine[] = [];
  let tornTail = false;
  let start = 0;
  let lineNo = 0;
  const length = text.length;
  while (start < length) {
    let end = text.indexOf('\n', start);
    const terminated = end !== -1;
    if (!terminated) end = length;
    lineNo++;
    const line = text.slice(start, end);
    start = end + 1;
    if (line.length === 0 || (line.charCodeAt(0) <= 32 && line.trim().length === 0)) continue;
    const result = parseEntryLine(line);
    if (typeof result === 'string') {
      if (!terminated) tornTail = true;
      invalid.push({ line: lineNo, reason: terminated ? result : `torn last line: ${result}` });
    } else {
      entries.push(result);
    }
  }
  return { entries, invalid, tornTail };
}

/** What identifies one version of the file's bytes: an append changes the size; a replacement the inode. */
interface FileVersion {
  dev: bigint;
  ino: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

function sameVersion(a: FileVersion, b: FileVersion): boolean {
  return (
    a.dev === b.dev &&
    a.ino === b.ino &&
    a.size === b.size &&
    a.mtimeNs === b.mtimeNs &&
    a.ctimeNs === b.ctimeNs
  );
}

export class TranscriptStore {
  private known: Set<string> | undefined;
  private tail: Promise<unknown> = Promise.resolve();
  /** The last read, reused while the file is the same version (a served turn reads it at open and again to start). */
  private lastRead: { version: FileVersion; result: ReadResult } | undefined;

  constructor(
    readonly path: string,
    private readonly options: TranscriptStoreOptions = {},
  ) {}

  async readAll(): Promise<ReadResult> {
    let handle: import('node:fs/promises').FileHandle;
    try {
      handle = await fs.open(this.path, 'r');
    } catch (e) {
      this.lastRead = undefined;
      if ((e as NodeJS.ErrnoException).code === 'ENOENT')
        return { entries: [], invalid: [], tornTail: false };
      throw this.ioError(e);
    }
    try {
      const st = await handle.stat({ bigint: true });
      const version: FileVersion = {
        dev: st.dev,
        ino: st.ino,
        size: st.size,
        mtimeNs: st.mtimeNs,
        ctimeNs: st.ctimeNs,
      };
      const last = this.lastRead;
      if (last && sameVersion(last.version, version)) return copyResult(last.result);
      const bytes = await handle.readFile();
      const result = parseTranscript(bytes.toString('utf8'));
      // Only bytes that are exactly the version stat saw may be reused (a write landing mid-read is not).
      this.lastRead =
        BigInt(bytes.length) === version.size ? { version, result: copyResult(result) } : undefined;
      if (!this.known) {
        this.known = new Set();
        for (const e of result.entries) if (isChainEntry(e)) this.known.add(e.uuid);
      }
      return result;
    } catch (e) {
      throw this.ioError(e);
    } finally {
      await handle.close().catch(() => {});
    }
  }

  private ioError(e: unknown): TranscriptError {
    return new TranscriptError(
      'TRANSCRIPT_IO',
      `Cannot read transcript ${this.path}: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }

  /**
   * Appends entries in one write. Chain entries whose uuid this store has already seen (in the file or in
   * an earlier append) are skipped; metadata entries are always appended. Returns the entries written.
   */
  append(entries: readonly TranscriptEntry[]): Promise<TranscriptEntry[]> {
    const run = this.tail.then(() => this.appendNow(entries));
    this.tail = run.catch(() => {});
    return run;
  }

  /** The newest leaf: the last chain entry in file order that no other entry names as its parent. */
  async leaf(): Promise<TranscriptEntry | undefined> {
    const { entries } = await this.readAll();
    return findLeaf(entries);
  }

  private async appendNow(entries: readonly TranscriptEntry[]): Promise<TranscriptEntry[]> {
    for (const entry of entries) {
      if (!isChainEntry(entry)) continue;
      const checked = chainEntrySchema.safeParse(entry);
      if (!checked.success) {
        throw new TranscriptError(
          'TRANSCRIPT_INVALID_ENTRY',
          `Refusing to append an invalid transcript entry (${checked.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}); build entries with the create*Entry helpers.`,
        );
      }
    }
    const known = await this.knownUuids();
    const fresh: TranscriptEntry[] = [];
    for (const entry of entries) {
      if (isChainEntry(entry)) {
        if (known.has(entry.uuid)) continue;
        known.add(entry.uuid);
      }
      fresh.push(entry);
    }
    if (fresh.length === 0) return fresh;
    const open = () =>
      fs.open(
        this.path,
        constants.O_RDWR | constants.O_APPEND | constants.O_CREAT,
        this.options.fileMode ?? 0o600,
      );
    // The directory exists after the first append of a session: create it only when the open says it is missing.
    const handle = await open().catch(async (e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
      await fs.mkdir(dirname(this.path), { recursive: true, mode: this.options.dirMode ?? 0o700 });
      return open();
    });
    try {
      // A torn last line from a crashed writer must stay on its own line, not swallow our first entry.
      const { size } = await handle.stat();
      let prefix = '';
      if (size > 0) {
        const last = Buffer.alloc(1);
        await handle.read(last, 0, 1, size - 1);
        if (last[0] !== NEWLINE) prefix = '\n';
      }
      const data = `${prefix}${fresh.map((e) => JSON.stringify(e)).join('\n')}\n`;
      await handle.write(data);
    } finally {
      await handle.close();
    }
    return fresh;
  }

  private async knownUuids(): Promise<Set<string>> {
    if (!this.known) {
      const { entries } = await this.readAll();
      this.known = new Set();
      for (const e of entries) if (isChainEntry(e)) this.known.add(e.uuid);
    }
    return this.known;
  }
}

export interface SubagentTranscript {
  /** `<id>` of `agent-<id>.jsonl`. */
  agentId: string;
  path: string;
}

/**
 * The subagent transcripts of a session: `<sessionDir>/subagents/agent-<id>.jsonl`, also one folder deeper
 * (docs/claude-code-format.md, "Transcripts"); sorted by path. Every entry in them is a sidechain: read them
 * with `buildChain(entries, undefined, { sidechain: true })`. A missing directory is an empty list.
 */
export async function listSubagentTranscripts(sessionDir: string): Promise<SubagentTranscript[]> {
  const root = join(sessionDir, 'subagents');
  const found: SubagentTranscript[] = [];
  const visit = async (dir: string, depth: number) => {
    let listing: import('node:fs').Dirent[];
    try {
      listing = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of listing) {
      const path = join(dir, entry.name);
      if (entry.isDirectory() && depth === 0) await visit(path, 1);
      else if (entry.isFile() && /^agent-.+\.jsonl$/.test(entry.name)) {
        found.push({ agentId: entry.name.slice('agent-'.length, -'.jsonl'.length), path });
      }
    }
  };
  await visit(root, 0);
  return found.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
