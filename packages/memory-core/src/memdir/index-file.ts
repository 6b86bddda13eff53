import { promises as fs } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { writeFileAtomic } from '@engram/fs-atomic/atomic-write';
import { ENTRYPOINT_NAME } from '../paths/memory-paths.js';
import { readRegularFileBounded } from './bounded-read.js';

// MEMORY.md is the index every session loads: one pointer line per memory, `- [Title](file.md) — hook`. It is
// loaded with two caps (lines, then characters) and a cut is never silent: the model gets a warning naming the
// cap, and callers get a structured report for the user and for metrics. Edits are surgical: only the lines
// that point at one file change; headings, prose, numbered or multi-line entries and separators written by
// people or other tools stay byte-identical.

export const MAX_ENTRYPOINT_LINES = 200;
/** Counted in UTF-16 code units (JS string length), like the reference; about 125 characters a line at 200. */
export const MAX_ENTRYPOINT_CHARS = 25_000;
/** Pointer lines longer than this waste the index budget; the hook is shortened to fit. */
export const MAX_INDEX_LINE_CHARS = 150;
/** Reading stops here; an index this large is reported as overflowing either way. */
export const MAX_INDEX_READ_BYTES = 8 * 1024 * 1024;

export interface IndexOverflow {
  cap: 'lines' | 'chars' | 'both';
  totalLines: number;
  totalChars: number;
  linesDropped: number;
  charsDropped: number;
  /** UTF-8 bytes of the dropped text. */
  bytesDropped: number;
  /** Files whose pointer lines were cut (and that no kept line points at). */
  entriesLost: string[];
}

export class MemoryIndexError extends EngramError {
  declare readonly code: 'READ_FAILED' | 'INVALID_FILE' | 'INVALID_ENTRY';
  constructor(code: 'READ_FAILED' | 'INVALID_FILE' | 'INVALID_ENTRY', message: string) {
    // A read that failed may succeed later (an I/O error); a bad file or entry will not.
    super(code, message, { retryable: code === 'READ_FAILED' });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Loading

/**
 * Applies both caps to index content: trim; cut to 200 lines; if still over 25,000 characters cut at the last
 * newline before the limit (hard cut when there is none); then append a warning naming the cap that fired.
 * Both caps are judged on the original (trimmed) text. Content under both caps is returned trimmed, as is.
 */
export function truncateEntrypoint(content: string): { content: string; overflow?: IndexOverflow } {
  const trimmed = content.trim();
  const lines = trimmed.split('\n');
  const totalLines = lines.length;
  const totalChars = trimmed.length;
  const overLines = totalLines > MAX_ENTRYPOINT_LINES;
  const overChars = totalChars > MAX_ENTRYPOINT_CHARS;
  if (!overLines && !overChars) return { content: trimmed };

  let kept = overLines ? lines.slice(0, MAX_ENTRYPOINT_LINES).join('\n') : trimmed;
  if (kept.length > MAX_ENTRYPOINT_CHARS) {
    const cut = kept.lastIndexOf('\n', MAX_ENTRYPOINT_CHARS);
    kept = kept.slice(0, cut > 0 ? cut : MAX_ENTRYPOINT_CHARS);
  }
  const cap = overLines && overChars ? 'both' : overLines ? 'lines' : 'chars';
  const dropped = trimmed.slice(kept.length);
  const keptTargets = new Set(extractLinkTargets(kept));
  const entriesLost = [...new Set(extractLinkTargets(dropped))].filter((file) => !keptTargets.has(file));
  const overflow: IndexOverflow = {
    cap,
    totalLines,
    totalChars,
    linesDropped: totalLines - (kept === '' ? 0 : kept.split('\n').length),
    charsDropped: totalChars - kept.length,
    bytesDropped: Buffer.byteLength(dropped, 'utf8'),
    entriesLost,
  };
  return { content: `${kept}\n\n${overflowWarning(overflow)}`, overflow };
}

function overflowWarning(overflow: IndexOverflow): string {
  const size = `${overflow.totalChars.toLocaleString('en-US')} characters`;
  const limitLines = `${MAX_ENTRYPOINT_LINES} lines`;
  const limitChars = `${MAX_ENTRYPOINT_CHARS.toLocaleString('en-US')} characters`;
  const what =
    overflow.cap === 'lines'
      ? `${overflow.totalLines} lines long (limit: ${limitLines})`
      : overflow.cap === 'chars'
        ? `${size} long (limit: ${limitChars}) because its entries are too long`
        : `${overflow.totalLines} lines and ${size} long (limits: ${limitLines}, ${limitChars})`;
  return (
    `> WARNING: ${ENTRYPOINT_NAME} is ${what}, so only part of it was loaded. ` +
    'Keep each index entry to one line of under ~200 characters and move the detail into the topic files.'
  );
}

export interface LoadedIndex {
  exists: boolean;
  /** The file as read (at most MAX_INDEX_READ_BYTES). */
  raw: string;
  /** What the model sees: trimmed, capped, with the warning appended when a cap fired. */
  content: string;
  overflow?: IndexOverflow;
}

/** Reads and caps an index. A missing file is `exists: false`; any other read failure throws MemoryIndexError. */
export async function loadMemoryIndex(indexPath: string): Promise<LoadedIndex> {
  let raw: string;
  try {
    raw = await readBounded(indexPath, MAX_INDEX_READ_BYTES);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { exists: false, raw: '', content: '' };
    throw new MemoryIndexError(
      'READ_FAILED',
      `Cannot read the memory index ${indexPath} (${code ?? String(error)}); check that it is a readable file.`,
    );
  }
  const { content, overflow } = truncateEntrypoint(raw);
  return overflow ? { exists: true, raw, content, overflow } : { exists: true, raw, content };
}

async function readBounded(path: string, maxBytes: number): Promise<string> {
  return (await readRegularFileBounded(path, maxBytes)).bytes.toString('utf8');
}

// ---------------------------------------------------------------------------------------------------------
// Entries

export interface IndexEntryInput {
  title: string;
  /** Path of the memory file relative to the index's directory, forward slashes (`feedback/testing.md`). */
  file: string;
  hook: string;
}

/** `- [Title](file.md) — hook`, on one line, shortened (hook first, then title) to MAX_INDEX_LINE_CHARS. */
export function formatIndexLine(entry: IndexEntryInput): string {
  const file = validateIndexFile(entry.file);
  const target = /[\s()<>]/.test(file) ? `<${file}>` : file;
  let title = oneLine(entry.title).replace(/[[\]]/g, '') || posix.basename(file, '.md');
  let hook = oneLine(entry.hook);
  const fixed = `- [](${target})`.length;
  const hookRoom = MAX_INDEX_LINE_CHARS - fixed - title.length - ' — '.length;
  if (hook.length > hookRoom) hook = hookRoom > 8 ? `${hook.slice(0, hookRoom - 1).trimEnd()}…` : '';
  if (fixed + title.length > MAX_INDEX_LINE_CHARS) {
    title = `${title.slice(0, Math.max(1, MAX_INDEX_LINE_CHARS - fixed - 1)).trimEnd()}…`;
  }
  return hook === '' ? `- [${title}](${target})` : `- [${title}](${target}) — ${hook}`;
}

function oneLine(value: string): string {
  return String(value ?? '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** Normalizes and checks an index target: relative, forward slashes, no `..`, not the index itself. */
export function validateIndexFile(file: string): string {
  const fail = (why: string) =>
    new MemoryIndexError(
      'INVALID_FILE',
      `Invalid memory file for the index (${why}); use a path like "topic.md".`,
    );
  if (typeof file !== 'string' || file.trim() === '') throw fail('empty');
  if (/[\0\r\n]/.test(file)) throw fail('contains a control character');
  if (file.includes('\\')) throw fail('contains a backslash');
  if (file.startsWith('/') || /^[A-Za-z]:/.test(file)) throw fail('absolute path');
  const normalized = posix.normalize(file.trim()).replace(/^\.\//, '');
  if (normalized === '.' || normalized.split('/').includes('..')) throw fail('leaves the memory directory');
  if (posix.basename(normalized) === ENTRYPOINT_NAME) throw fail('the index cannot point at itself');
  return normalized;
}

export interface IndexEntry {
  /** 0-based line number in the content. */
  lineIndex: number;
  line: string;
  title: string;
  /** Normalized link target (`./a.md`, `a.md#x`, `<a.md>` and `a%20b.md` become `a.md` / `a b.md`). */
  file: string;
  hook?: string;
  /** How many following lines continue this entry (indented text or sub-items). */
  continuationLines: number;
  /** The link is the first thing of its list item (`- [T](f.md) — hook`): the shape Engram writes and retitles. */
  leading: boolean;
  /** No other file is linked from the line: the line is this file's alone. */
  sole: boolean;
}

// A list item (bullet or number) whose first link is the pointer; emphasis around the link is tolerated.
const ENTRY_LINE =
  /^([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+)(?:\*\*|__|\*|_)?\[((?:[^\]\\]|\\.)*)\]\(([^)]*)\)(?:\*\*|__|\*|_)?(.*)$/;
const LINK = /\[(?:[^\]\\]|\\.)*\]\(([^)]*)\)/g;
// The same link with its text captured, for rewriting a line that links to a forgotten file.
const LINK_WITH_TEXT = /\[((?:[^\]\\]|\\.)*)\]\(([^)]*)\)/g;
const LIST_ITEM = /^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+/;

/**
 * Every pointer entry in index content, in order: one per file linked from a list item (bullet or number),
 * wherever on the item the link sits (`- [T](a.md) — hook`, `- prose … [detail](a.md)`,
 * `- [A](a.md), [B](b.md)`). A line that links several files yields one entry for each; a file linked from
 * several lines has an entry on each. Never throws.
 */
export function parseIndexEntries(content: string): IndexEntry[] {
  const lines = String(content).split('\n');
  const entries: IndexEntry[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const bare = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (!LIST_ITEM.test(bare) || !bare.includes('](')) continue;
    const links = extractLinks(bare);
    if (links.length === 0) continue;
    const files = new Set(links.map((l) => l.file));
    const lead = parseEntryLine(bare);
    const continuationLines = continuationCount(lines, i);
    const seen = new Set<string>();
    for (const link of links) {
      if (seen.has(link.file)) continue;
      seen.add(link.file);
      const leading = lead !== undefined && lead.file === link.file;
      const entry: IndexEntry = {
        lineIndex: i,
        line,
        title: leading ? lead.title : link.text,
        file: link.file,
        continuationLines,
        leading,
        sole: files.size === 1,
      };
      if (leading && lead.hook !== undefined) entry.hook = lead.hook;
      entries.push(entry);
    }
  }
  return entries;
}

function parseEntryLine(rawLine: string): { title: string; file: string; hook?: string } | undefined {
  const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine;
  const match = ENTRY_LINE.exec(line);
  if (!match) return undefined;
  const file = normalizeTarget(match[3] as string);
  if (file === undefined) return undefined;
  const hook = (match[4] ?? '').replace(/^[\s:]*(?:[—–-]+|:)?\s*/, '').trim();
  return hook === '' ? { title: match[2] as string, file } : { title: match[2] as string, file, hook };
}

function extractLinks(text: string): { text: string; file: string }[] {
  const links: { text: string; file: string }[] = [];
  for (const match of text.matchAll(LINK_WITH_TEXT)) {
    const file = normalizeTarget(match[2] as string);
    if (file !== undefined) links.push({ text: match[1] as string, file });
  }
  return links;
}

function normalizeTarget(rawTarget: string): string | undefined {
  let target = rawTarget.trim();
  // `[t](file.md "title")`
  const titled = /^(\S+)\s+["'(].*$/.exec(target);
  if (titled) target = titled[1] as string;
  if (target.startsWith('<') && target.endsWith('>')) target = target.slice(1, -1);
  target = target.replace(/[#?].*$/, '');
  if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined;
  try {
    target = decodeURI(target);
  } catch {
    // keep the raw form
  }
  target = posix.normalize(target).replace(/^\.\//, '');
  return target === '.' ? undefined : target;
}

function indentOf(line: string): number {
  return line.length - line.trimStart().length;
}

function isLinkingListItem(line: string): boolean {
  return LIST_ITEM.test(line) && line.includes('](') && extractLinks(line).length > 0;
}

/** Lines after an entry that are more indented than it and not blank belong to it (wrapped hooks, sub-items). */
function continuationCount(lines: string[], index: number): number {
  const base = indentOf(lines[index] as string);
  let count = 0;
  for (let j = index + 1; j < lines.length; j++) {
    const next = (lines[j] as string).replace(/\r$/, '');
    // A nested list item that links a file is its own entry, never part of this one.
    if (next.trim() === '' || indentOf(next) <= base || isLinkingListItem(next)) break;
    count++;
  }
  return count;
}

/**
 * Lines that link to `file` anywhere on the line (`- [T](file.md) — hook`, but also `- prose … [detail](file.md)`,
 * headings, numbered items): docs/claude-code-format.md, "Index". 0-based line numbers, in order.
 */
export function indexLinesLinkingTo(content: string, file: string): number[] {
  const target = validateIndexFile(file);
  const out: number[] = [];
  const lines = String(content).split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line.includes('](') && extractLinkTargets(line).includes(target)) out.push(i);
  }
  return out;
}

/** True when some line of the index links to `file`. */
export function indexLinksTo(content: string, file: string): boolean {
  return indexLinesLinkingTo(content, file).length > 0;
}

function extractLinkTargets(text: string): string[] {
  const targets: string[] = [];
  for (const match of text.matchAll(LINK)) {
    const target = normalizeTarget(match[1] as string);
    if (target !== undefined) targets.push(target);
  }
  return targets;
}

// ---------------------------------------------------------------------------------------------------------
// Surgical edits (pure), then the atomic file operations.

export interface IndexEdit {
  content: string;
  changed: boolean;
}

/**
 * The lines an entry owns when it goes as a whole: its line and its continuation lines — or nothing when one
 * of those continuation lines links another file (dropping it would take that file's pointer with it).
 */
function ownedLines(lines: string[], entry: IndexEntry, file: string): number[] | undefined {
  const owned = [entry.lineIndex];
  for (let k = 1; k <= entry.continuationLines; k++) {
    const line = lines[entry.lineIndex + k] as string;
    if (extractLinkTargets(line).some((t) => t !== file)) return undefined;
    owned.push(entry.lineIndex + k);
  }
  return owned;
}

/**
 * Adds or updates the pointer for `entry.file`. Only a pointer line of the shape Engram writes — a list item
 * whose first and only link is the file (`- [T](file.md) — hook`) — is rewritten, in place, keeping its list
 * marker and indentation; further lines of that same shape for the file are duplicates and go (with their
 * continuation lines, unless one of those links another file). Any other line that links the file — a line that also links other memories, prose, a heading —
 * already counts as the file's entry and is left as written. With none at all, the line is appended. Applying the same upsert twice changes nothing.
 */
export function applyIndexUpsert(content: string, entry: IndexEntryInput): IndexEdit {
  const file = validateIndexFile(entry.file);
  const newLine = formatIndexLine({ ...entry, file });
  const lines = content.split('\n');
  const crlf = detectCrlf(content);
  if (!indexLinksTo(content, file)) {
    const endsWithNewline = content === '' || content.endsWith('\n');
    const eol = crlf ? '\r\n' : '\n';
    const prefix = content === '' ? '' : endsWithNewline ? content : `${content}${eol}`;
    return { content: `${prefix}${newLine}${endsWithNewline ? eol : ''}`, changed: true };
  }
  const pointers = parseIndexEntries(content).filter((e) => e.file === file && e.leading && e.sole);
  if (pointers.length === 0) return { content, changed: false };
  const [first, ...duplicates] = pointers as [IndexEntry, ...IndexEntry[]];
  const drop = new Set<number>();
  for (const dup of duplicates) for (const k of ownedLines(lines, dup, file) ?? []) drop.add(k);
  const old = lines[first.lineIndex] as string;
  const marker = LIST_ITEM.exec(old)?.[0] ?? '- ';
  const replaced = `${marker}${newLine.slice(2)}${old.endsWith('\r') ? '\r' : ''}`;
  if (replaced === old && drop.size === 0) return { content, changed: false };
  lines[first.lineIndex] = replaced;
  return { content: lines.filter((_, k) => !drop.has(k)).join('\n'), changed: true };
}

/**
 * Forgets `file` in the index. A list item that links only `file` goes with its continuation lines, wherever
 * on the item the link sits — unless a continuation line links another file. Every other line that links it
 * (prose, a heading, an item that also links other memories, an item whose continuation links others) keeps
 * its wording with each link to `file` turned into its plain text. No other line changes, byte for byte.
 * `removed` counts the lines removed or rewritten.
 */
export function applyIndexRemove(content: string, file: string): IndexEdit & { removed: number } {
  const target = validateIndexFile(file);
  const hits = indexLinesLinkingTo(content, target);
  if (hits.length === 0) return { content, changed: false, removed: 0 };
  const lines = content.split('\n');
  const sole = new Map(
    parseIndexEntries(content)
      .filter((e) => e.file === target && e.sole)
      .map((e) => [e.lineIndex, e]),
  );
  const drop = new Set<number>();
  for (const i of hits) {
    if (drop.has(i)) continue;
    const entry = sole.get(i);
    const owned = entry ? ownedLines(lines, entry, target) : undefined;
    if (owned) {
      for (const k of owned) drop.add(k);
      continue;
    }
    lines[i] = (lines[i] as string).replace(LINK_WITH_TEXT, (whole, text: string, rawTarget: string) =>
      normalizeTarget(rawTarget) === target ? text : whole,
    );
  }
  let next = lines.filter((_, k) => !drop.has(k)).join('\n');
  // Removing the last line of a file that ended with a newline must not leave it without one.
  if (content.endsWith('\n') && next !== '' && !next.endsWith('\n'))
    next += detectCrlf(content) ? '\r\n' : '\n';
  return { content: next, changed: next !== content, removed: hits.length };
}

function detectCrlf(content: string): boolean {
  const nl = content.indexOf('\n');
  return nl > 0 && content[nl - 1] === '\r';
}

// Index edits from the same process are serialized per file, so two upserts never lose each other's line.
const locks = new Map<string, Promise<unknown>>();

async function withFileLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const previous = locks.get(path) ?? Promise.resolve();
  const run = previous.then(fn, fn);
  const settled = run.catch(() => undefined);
  locks.set(path, settled);
  try {
    return await run;
  } finally {
    if (locks.get(path) === settled) locks.delete(path);
  }
}

async function readIndexForEdit(indexPath: string): Promise<string> {
  try {
    return await readBounded(indexPath, MAX_INDEX_READ_BYTES);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw new MemoryIndexError(
      'READ_FAILED',
      `Cannot read the memory index ${indexPath} (${(error as NodeJS.ErrnoException).code ?? String(error)}).`,
    );
  }
}

/** Adds or updates the pointer line for one memory file; writes atomically, and only when something changed. */
export async function upsertIndexEntry(
  indexPath: string,
  entry: IndexEntryInput,
): Promise<{ changed: boolean }> {
  return withFileLock(indexPath, async () => {
    const edit = applyIndexUpsert(await readIndexForEdit(indexPath), entry);
    if (edit.changed) await writeFileAtomic(indexPath, edit.content);
    return { changed: edit.changed };
  });
}

/** Removes the pointer line(s) for one memory file; a missing index or entry is a no-op. */
export async function removeIndexEntry(
  indexPath: string,
  file: string,
): Promise<{ changed: boolean; removed: number }> {
  return withFileLock(indexPath, async () => {
    const edit = applyIndexRemove(await readIndexForEdit(indexPath), file);
    if (edit.changed) await writeFileAtomic(indexPath, edit.content);
    return { changed: edit.changed, removed: edit.removed };
  });
}

// ---------------------------------------------------------------------------------------------------------
// Titles that follow a memory's name.
//
// Engram titles a pointer with the memory's `name`. When another program renames the memory (Claude Code
// rewrites an Engram file with a slug `name`), the title Engram wrote goes stale; the next upkeep of that file
// retitles the pointer — only its `[title]`, nothing else on the line or in the index. Only titles Engram
// wrote are retitled: next to each index Engram keeps the name and title of every pointer it wrote or
// adopted (`.index-titles.json`; hidden, so no scan, walk or sync sees it), and a title someone edited since
// (it no longer equals the recorded title) is theirs and stays. A pointer whose title equals the file's
// current name is adopted. A pointer Engram wrote before it kept records, and whose name has changed since,
// cannot be told apart from someone else's and is left as it is.

export const INDEX_TITLES_FILE = '.index-titles.json';

interface TitleRecord {
  name: string;
  title: string;
}

/** The title formatIndexLine gives a pointer for `name` (one line, no brackets, shortened to fit). */
export function indexTitleFor(name: string, file: string): string {
  const line = formatIndexLine({ title: name, file, hook: '' });
  return parseEntryLine(line)?.title ?? name;
}

/**
 * Replaces the title of the first entry line pointing at `file` (the link first on a list item) with `title`,
 * when the current title is `expected`; every other byte of the index stays.
 */
export function applyIndexRetitle(content: string, file: string, expected: string, title: string): IndexEdit {
  const target = validateIndexFile(file);
  const entry = parseIndexEntries(content).find((e) => e.file === target && e.leading);
  if (!entry || entry.title !== expected || expected === title) return { content, changed: false };
  const lines = content.split('\n');
  const line = lines[entry.lineIndex] as string;
  const match = ENTRY_LINE.exec(line.endsWith('\r') ? line.slice(0, -1) : line);
  if (!match) return { content, changed: false };
  const open = line.indexOf('[', (match[1] as string).length);
  const close = open + 1 + expected.length;
  if (open === -1 || line.slice(open + 1, close) !== expected || line[close] !== ']') {
    return { content, changed: false };
  }
  lines[entry.lineIndex] = `${line.slice(0, open + 1)}${title}${line.slice(close)}`;
  return { content: lines.join('\n'), changed: true };
}

function titlesPath(indexPath: string): string {
  return join(dirname(indexPath), INDEX_TITLES_FILE);
}

async function readTitleRecords(indexPath: string): Promise<Record<string, TitleRecord>> {
  try {
    const parsed: unknown = JSON.parse(await fs.readFile(titlesPath(indexPath), 'utf8'));
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
    const records: Record<string, TitleRecord> = Object.create(null);
    for (const [file, value] of Object.entries(parsed as Record<string, unknown>)) {
      const record = value as Partial<TitleRecord> | null;
      if (typeof record?.name === 'string' && typeof record.title === 'string') {
        records[file] = { name: record.name, title: record.title };
      }
    }
    return records;
  } catch {
    return {}; // none yet, or unreadable: nothing is known to be Engram's
  }
}

async function writeTitleRecords(indexPath: string, records: Record<string, TitleRecord>): Promise<void> {
  const sorted = Object.fromEntries(Object.entries(records).sort(([a], [b]) => (a < b ? -1 : 1)));
  await writeFileAtomic(titlesPath(indexPath), `${JSON.stringify(sorted, null, 2)}\n`, { mode: 0o600 });
}

/** One memory file whose pointer `upkeepIndexPointers` maintains: its name and description as they are now. */
export interface PointerUpkeep {
  file: string;
  name?: string | undefined;
  /** The pointer's hook (the memory's description). */
  hook: string;
}

/**
 * Index upkeep for memory files of one index, in order, with one read and at most one write of the index and
 * of its title records (a commit keeps several files' pointers). A file without a pointer gets one, titled with
 * its name (recorded as Engram's). A file whose pointer exists: when the pointer's title is the one Engram
 * recorded for it and the file's `name` has changed since, the title follows the name; the pointer is recorded
 * as Engram's when its title is the file's current name. Returns, per file, whether its pointer was added and
 * whether its title changed.
 */
export async function upkeepIndexPointers(
  indexPath: string,
  items: readonly PointerUpkeep[],
): Promise<Array<{ added: boolean; titleUpdated: boolean }>> {
  const files = items.map((item) => validateIndexFile(item.file));
  return withFileLock(indexPath, async () => {
    let content = await readIndexForEdit(indexPath);
    let records: Record<string, TitleRecord> | undefined;
    const titleRecords = async () => {
      records ??= await readTitleRecords(indexPath);
      return records;
    };
    let indexChanged = false;
    let recordsChanged = false;
    const out: Array<{ added: boolean; titleUpdated: boolean }> = [];
    for (const [i, item] of items.entries()) {
      const file = files[i] as string;
      const name = item.name;
      if (!indexLinksTo(content, file)) {
        const edit = applyIndexUpsert(content, {
          title: name ?? posix.basename(file, '.md'),
          file,
          hook: item.hook,
        });
        if (edit.changed) {
          content = edit.content;
          indexChanged = true;
          if (name) {
            const recs = await titleRecords();
            const title = indexTitleFor(name, file);
            if (recs[file]?.name !== name || recs[file]?.title !== title) {
              recs[file] = { name, title };
              recordsChanged = true;
            }
          }
        }
        out.push({ added: edit.changed, titleUpdated: false });
        continue;
      }
      const entry = name ? parseIndexEntries(content).find((e) => e.file === file && e.leading) : undefined;
      if (!name || !entry) {
        out.push({ added: false, titleUpdated: false });
        continue;
      }
      const recs = await titleRecords();
      const record = recs[file];
      const wanted = indexTitleFor(name, file);
      if (entry.title === wanted) {
        if (record?.name !== name || record.title !== wanted) {
          recs[file] = { name, title: wanted };
          recordsChanged = true;
        }
        out.push({ added: false, titleUpdated: false });
        continue;
      }
      const edit =
        record && record.title === entry.title && record.name !== name
          ? applyIndexRetitle(content, file, entry.title, wanted)
          : { content, changed: false };
      if (edit.changed) {
        content = edit.content;
        indexChanged = true;
        recs[file] = { name, title: wanted };
        recordsChanged = true;
      }
      out.push({ added: false, titleUpdated: edit.changed });
    }
    if (indexChanged) {
      await fs.mkdir(dirname(indexPath), { recursive: true, mode: 0o700 });
      await writeFileAtomic(indexPath, content);
    }
    if (recordsChanged && records) await writeTitleRecords(indexPath, records);
    return out;
  });
}
