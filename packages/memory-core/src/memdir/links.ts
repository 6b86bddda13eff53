/**
 * `[[slug]]` links between memory files, the form Claude Code teaches and writes
 * (docs/claude-code-format.md, "Links"). A link names another memory's frontmatter `name`; a link to a
 * memory not yet written is allowed (it marks something worth writing). Pure functions: no I/O.
 */

/** One `[[…]]` occurrence outside code. `start`/`end` are offsets into the markdown. */
export interface MemoryLinkOccurrence {
  readonly slug: string;
  readonly alias: string | undefined;
  readonly start: number;
  readonly end: number;
}

const LINK = /\[\[([^[\]\n|]+)(?:\|([^[\]\n]*))?\]\]/g;

/**
 * Ranges `[start, end)` of the markdown that are code: fenced blocks (``` or ~~~, up to three spaces of
 * indent, closed by a fence of the same character at least as long, or the end of the text) and inline code
 * spans (a run of N backticks closed by the next run of exactly N backticks in the same paragraph).
 */
function codeRanges(markdown: string): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  let offset = 0;
  let fence: { char: string; length: number; start: number } | undefined;
  let paragraphStart = 0;
  const lines = markdown.split('\n');
  const inlineSpans = (from: number, to: number) => {
    const text = markdown.slice(from, to);
    const runs = /`+/g;
    let match: RegExpExecArray | null = runs.exec(text);
    while (match) {
      const open = match[0].length;
      const openAt = match.index;
      let close: RegExpExecArray | null = runs.exec(text);
      while (close && close[0].length !== open) close = runs.exec(text);
      if (!close) {
        // An unclosed run is literal backticks; resume scanning after it.
        runs.lastIndex = openAt + open;
        match = runs.exec(text);
        continue;
      }
      ranges.push([from + openAt, from + close.index + close[0].length]);
      match = runs.exec(text);
    }
  };
  for (const line of lines) {
    const lineEnd = offset + line.length;
    const fenceMatch = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (fenceMatch && fenceMatch[1]?.[0] === fence.char && (fenceMatch[1]?.length ?? 0) >= fence.length) {
        if (line.slice(fenceMatch[0].length).trim() === '') {
          ranges.push([fence.start, lineEnd]);
          fence = undefined;
          paragraphStart = lineEnd + 1;
        }
      }
    } else if (fenceMatch?.[1]) {
      inlineSpans(paragraphStart, offset);
      fence = { char: fenceMatch[1][0] ?? '`', length: fenceMatch[1].length, start: offset };
    } else if (line.trim() === '') {
      inlineSpans(paragraphStart, offset);
      paragraphStart = lineEnd + 1;
    }
    offset = lineEnd + 1;
  }
  if (fence) ranges.push([fence.start, markdown.length]);
  else inlineSpans(paragraphStart, markdown.length);
  return ranges;
}

/** Every `[[slug]]` / `[[slug|alias]]` outside fenced code and inline code, in document order. */
export function findMemoryLinks(markdown: string): MemoryLinkOccurrence[] {
  if (!markdown.includes('[[')) return [];
  const code = codeRanges(markdown);
  const inCode = (at: number) => code.some(([s, e]) => at >= s && at < e);
  const out: MemoryLinkOccurrence[] = [];
  for (const match of markdown.matchAll(LINK)) {
    const at = match.index ?? 0;
    if (inCode(at)) continue;
    const slug = (match[1] ?? '').trim();
    if (slug === '') continue;
    out.push({ slug, alias: match[2], start: at, end: at + match[0].length });
  }
  return out;
}

/**
 * The distinct slugs of `[[slug]]` links (`[[slug|alias]]` gives `slug`) in order of first appearance,
 * trimmed, ignoring links inside fenced code blocks and inline code spans.
 */
export function parseMemoryLinks(markdown: string): string[] {
  const seen = new Set<string>();
  for (const link of findMemoryLinks(markdown)) seen.add(link.slug);
  return [...seen];
}

/**
 * Rewrites links per `renames` (old slug → new slug, or `null` to unlink: the link becomes its alias or slug
 * as plain text). Only the link tokens change; every other byte stays. Returns the same string when nothing
 * matched.
 */
export function rewriteMemoryLinks(markdown: string, renames: ReadonlyMap<string, string | null>): string {
  if (renames.size === 0) return markdown;
  const links = findMemoryLinks(markdown).filter((l) => renames.has(l.slug));
  if (links.length === 0) return markdown;
  let out = '';
  let cursor = 0;
  for (const link of links) {
    const target = renames.get(link.slug);
    out += markdown.slice(cursor, link.start);
    if (target === null || target === undefined) out += (link.alias ?? link.slug).trim() || link.slug;
    else out += link.alias === undefined ? `[[${target}]]` : `[[${target}|${link.alias}]]`;
    cursor = link.end;
  }
  return out + markdown.slice(cursor);
}

export interface LinkableMemory {
  /** Relative to the memory directory, forward slashes. */
  file: string;
  /** Frontmatter `name` (the slug links use), when it has one. */
  name?: string;
  /** The Markdown body (frontmatter excluded). */
  body: string;
}

export interface ResolvedLink {
  slug: string;
  /** The memory the slug names; undefined for a link to a memory not written yet (dangling). */
  file?: string;
}

export interface MemoryLinkReport {
  links: ResolvedLink[];
  /** Memories whose body links to this one, in file order. */
  backlinks: string[];
  /** Slugs that name no memory (allowed: each marks something worth writing). */
  dangling: string[];
}

function basenameSlug(file: string): string {
  const base = file.slice(file.lastIndexOf('/') + 1);
  return base.endsWith('.md') ? base.slice(0, -3) : base;
}

/**
 * Slug → file: a memory's `name` first; a file without one (or whose name is taken) answers to its file
 * name without `.md`. The first file in `memories` order wins a contested slug.
 */
export function slugIndex(memories: readonly LinkableMemory[]): Map<string, string> {
  const index = new Map<string, string>();
  for (const m of memories) if (m.name && !index.has(m.name)) index.set(m.name, m.file);
  for (const m of memories) {
    const slug = basenameSlug(m.file);
    if (!index.has(slug)) index.set(slug, m.file);
  }
  return index;
}

/** Links of `file` (resolved), the memories linking to it, and its dangling links. */
export function memoryLinkReport(file: string, memories: readonly LinkableMemory[]): MemoryLinkReport {
  const index = slugIndex(memories);
  const self = memories.find((m) => m.file === file);
  const links: ResolvedLink[] = (self ? parseMemoryLinks(self.body) : []).map((slug) => {
    const target = index.get(slug);
    return target === undefined ? { slug } : { slug, file: target };
  });
  const backlinks = memories
    .filter((m) => m.file !== file && parseMemoryLinks(m.body).some((slug) => index.get(slug) === file))
    .map((m) => m.file);
  return { links, backlinks, dangling: links.filter((l) => l.file === undefined).map((l) => l.slug) };
}

export interface LinkPlanEntry {
  file: string;
  name?: string;
  /** Emptied or removed by the run. */
  gone: boolean;
}

/**
 * The link rewrites a consolidation needs (old slug → new slug, or null to unlink): a memory whose `name`
 * changed is renamed; a removed memory whose content went into another (`into`) is renamed to that one's
 * name; a removed memory with no successor is unlinked. A slug some surviving memory still answers to is
 * left alone.
 */
export function planLinkRenames(
  before: readonly LinkPlanEntry[],
  after: readonly LinkPlanEntry[],
  replaced: ReadonlyArray<{ file: string; into: string }>,
): Map<string, string | null> {
  const survivors = after.filter((e) => !e.gone);
  const live = slugIndex(
    survivors.map((e) => ({ file: e.file, ...(e.name ? { name: e.name } : {}), body: '' })),
  );
  const afterByFile = new Map(after.map((e) => [e.file, e]));
  const plan = new Map<string, string | null>();
  for (const old of before) {
    if (old.gone) continue;
    const slug = old.name ?? basenameSlug(old.file);
    if (live.has(slug)) continue;
    const now = afterByFile.get(old.file);
    let target: string | undefined;
    if (now && !now.gone) target = now.name ?? basenameSlug(now.file);
    else {
      const into = replaced.find((r) => r.file === old.file)?.into;
      const successor = into === undefined ? undefined : afterByFile.get(into);
      if (successor && !successor.gone) target = successor.name ?? basenameSlug(successor.file);
    }
    plan.set(slug, target !== undefined && target !== slug ? target : null);
  }
  return plan;
}
