import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join, posix } from 'node:path';
import { parseMemoryFile } from '../memdir/frontmatter.js';
import { listMarkdownFiles } from './walk.js';

// A full-content manifest of a memory directory, taken before and after a consolidation run, for the safety
// check (safety.ts) and the receipt. Unlike the recall scan (head only, newest 200) it covers every memory,
// because "how many memories did this run delete" must count all of them.

/** Text kept per file for the overlap heuristic. */
export const MANIFEST_TEXT_CHARS = 16 * 1024;

export interface DreamManifestEntry {
  /** Relative to the memory directory, forward slashes. */
  file: string;
  /** sha256 of the content, hex. */
  hash: string;
  bytes: number;
  mtimeMs: number;
  /** Whitespace-only content: how a consolidation fork asks for a file to be deleted. */
  empty: boolean;
  name?: string;
  description?: string;
  /** Files the frontmatter says were folded into this one (`merged_from`, `supersedes`), normalized. */
  mergedFrom: string[];
  /** Files the frontmatter relates this one to (`related`), normalized. */
  related: string[];
  /** The content, capped at MANIFEST_TEXT_CHARS. */
  text: string;
}

/** Memory files (index files excluded), sorted by path. */
export type DreamManifest = DreamManifestEntry[];

export async function readDreamManifest(memoryDir: string): Promise<DreamManifest> {
  const files = await listMarkdownFiles(memoryDir);
  const entries: DreamManifest = [];
  for (const file of files) {
    let buffer: Buffer;
    let mtimeMs: number;
    try {
      const path = join(memoryDir, file);
      [buffer, mtimeMs] = await Promise.all([fs.readFile(path), fs.stat(path).then((s) => s.mtimeMs)]);
    } catch {
      continue; // removed while reading
    }
    entries.push(manifestEntry(file, buffer, mtimeMs));
  }
  return entries;
}

/** Builds one entry from a file's bytes (exported for tests and for callers holding content in memory). */
export function manifestEntry(file: string, content: Buffer | string, mtimeMs = 0): DreamManifestEntry {
  const buffer = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const text = buffer.toString('utf8');
  const entry: DreamManifestEntry = {
    file,
    hash: createHash('sha256').update(buffer).digest('hex'),
    bytes: buffer.length,
    mtimeMs,
    empty: text.trim() === '',
    mergedFrom: [],
    related: [],
    text: text.slice(0, MANIFEST_TEXT_CHARS),
  };
  if (entry.empty) return entry;
  try {
    const parsed = parseMemoryFile(text, file);
    if (parsed.name) entry.name = parsed.name;
    if (parsed.description) entry.description = parsed.description;
    const metadata = isRecord(parsed.extra.metadata) ? parsed.extra.metadata : {};
    entry.mergedFrom = [
      ...fileList(parsed.extra.merged_from),
      ...fileList(parsed.extra.supersedes),
      ...fileList(metadata.merged_from),
    ];
    entry.related = [...fileList(parsed.extra.related), ...fileList(metadata.related)];
  } catch {
    // Unparseable frontmatter: still a memory (the scan reports it); it just offers no hints.
  }
  return entry;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `a.md`, `[a.md, ./b.md]`, `"[[c]]"`, `a.md, b.md` → normalized relative paths. */
function fileList(value: unknown): string[] {
  const raw = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',') : [];
  const out: string[] = [];
  for (const item of raw) {
    if (typeof item !== 'string') continue;
    let file = item
      .trim()
      .replace(/^\[\[(.*)\]\]$/, '$1')
      .replace(/^\[.*\]\((.*)\)$/, '$1')
      .trim();
    if (file === '') continue;
    file = posix.normalize(file.replace(/\\/g, '/')).replace(/^\.\//, '');
    if (!file.endsWith('.md')) file = `${file}.md`;
    out.push(file);
  }
  return out;
}
