import { posix } from 'node:path';
import type { MemoryHeader } from '../memdir/scan.js';
import { topicalTerms } from '../text/tokenize.js';

// Which memories a newer one replaces, so recall never hands the model two conflicting versions of one fact
// (consolidation merges them eventually; until it runs both files exist). The rule, in order of strength:
//   1. explicit — the newer memory names the older in its frontmatter `supersedes:` (a slug, filename or
//      `[[link]]`, or a list). Applies whatever the dates say.
//   2. same subject — both memories have the same `name` (compared as a slug: case, spaces, `_`/`-` folded),
//      the name has at least two topical words (so "Notes" never merges with "Notes"), and their types are
//      equal (or one is untyped).
//   3. near duplicate — same type, and the topical words of their names overlap by ≥ NAME_OVERLAP and of
//      their descriptions by ≥ DESCRIPTION_OVERLAP (Jaccard), with at least three description words each.
//      Two memories about the same subject that say different things (a checklist and a rollback runbook)
//      overlap far less; bench/recall-quality.ts counts false supersessions on near-duplicate pairs that
//      must stay apart. And the two must not name different subjects: when each name has a topical word
//      that the other memory (name and description) never mentions — "catalogue timeout alerting" and
//      "wishlist timeout alerting", written from one template — they are two facts, not two versions of
//      one. A reworded name that only adds words ("Node runtime version" → "Node runtime version upgrade")
//      still qualifies.
// For rules 2 and 3 the newer memory wins: frontmatter `modified:`/`updated:` when present, else the file's
// mtime; equal dates supersede nothing (there is no way to tell which is current). Chains resolve to the
// newest (A → B → C: A and B are both superseded by C).

export const NAME_OVERLAP = 0.5;
export const DESCRIPTION_OVERLAP = 0.5;

export type SupersessionReason = 'explicit' | 'same-name' | 'near-duplicate';

export interface Supersession {
  /** The superseded memory (relative path). */
  older: string;
  /** The memory that replaces it, after following chains. */
  newer: string;
  reason: SupersessionReason;
}

/** Slug form of a name or link target: NFKC, lowercase, `.md` dropped, non-letters/digits folded to `-`. */
export function memorySlug(text: string): string {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .replace(/\.md$/, '')
    .replace(/[^\p{L}\p{N}/]+/gu, '-')
    .replace(/^-+|-+$/g, '');
}

/**
 * The memory a `[[slug]]` (or `supersedes:` entry) names: its relative path without `.md`, else its file's
 * basename, else its frontmatter name, all compared as slugs. Several at one level: the newest. Undefined
 * when nothing matches.
 */
export function resolveMemoryLink(slug: string, headers: readonly MemoryHeader[]): MemoryHeader | undefined {
  const target = memorySlug(slug);
  if (target === '') return undefined;
  const levels: Array<(h: MemoryHeader) => string> = [
    (h) => memorySlug(h.filename),
    (h) => memorySlug(posix.basename(h.filename)),
    (h) => (h.name ? memorySlug(h.name) : ''),
  ];
  for (const key of levels) {
    let found: MemoryHeader | undefined;
    for (const h of headers) {
      if (key(h) === target && (!found || dateOf(h) > dateOf(found))) found = h;
    }
    if (found) return found;
  }
  return undefined;
}

export function dateOf(header: MemoryHeader): number {
  return header.modifiedMs ?? header.mtimeMs;
}

function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 || b.size === 0) return 0;
  let shared = 0;
  for (const t of a) if (b.has(t)) shared++;
  return shared / (a.size + b.size - shared);
}

const typesMatch = (a: MemoryHeader, b: MemoryHeader) => !a.type || !b.type || a.type === b.type;

interface NameInfo {
  nameTerms: ReadonlySet<string>;
  descTerms: ReadonlySet<string>;
}

/** Whether `a`'s name has a topical word that `b` mentions nowhere (neither in its name nor description). */
function namesOwnSubject(a: NameInfo, b: NameInfo): boolean {
  for (const t of a.nameTerms) if (!b.nameTerms.has(t) && !b.descTerms.has(t)) return true;
  return false;
}

/** How many directories' answers `findSupersessions` keeps (a worker serves many projects' recalls). */
const SUPERSESSION_MEMO_SIZE = 32;
const memo = new Map<string, Map<string, Supersession>>();

/** Every header field the rules read, in order: equal keys give equal answers. */
function supersessionKey(headers: readonly MemoryHeader[]): string {
  let key = '';
  for (const h of headers) {
    key += `${h.filename}\0${h.mtimeMs}\0${h.modifiedMs ?? ''}\0${h.name ?? '\u0001'}\0${h.description ?? '\u0001'}\0`;
    key += `${h.type ?? ''}\0${h.supersedes?.join('\u0002') ?? '\u0001'}\0\u0003`;
  }
  return key;
}

/**
 * Every superseded memory among `headers`, keyed by its relative path (see the module comment). Recall asks
 * this for every prompt of a directory that rarely changes between two prompts, and tokenizing every name and
 * description is most of the selector's own work: the answer for the same headers is remembered.
 */
export function findSupersessions(headers: readonly MemoryHeader[]): Map<string, Supersession> {
  const key = supersessionKey(headers);
  let found = memo.get(key);
  if (found) {
    memo.delete(key);
  } else {
    found = computeSupersessions(headers);
    if (memo.size >= SUPERSESSION_MEMO_SIZE) memo.delete(memo.keys().next().value as string);
  }
  memo.set(key, found);
  return new Map(found);
}

function computeSupersessions(headers: readonly MemoryHeader[]): Map<string, Supersession> {
  const direct = new Map<string, { newer: MemoryHeader; reason: SupersessionReason }>();
  const propose = (older: MemoryHeader, newer: MemoryHeader, reason: SupersessionReason) => {
    if (older.filename === newer.filename) return;
    const current = direct.get(older.filename);
    if (current) {
      // Explicit beats implicit; among equals the newest replacement wins.
      if (current.reason === 'explicit' && reason !== 'explicit') return;
      const upgrade = reason === 'explicit' && current.reason !== 'explicit';
      if (!upgrade && dateOf(current.newer) >= dateOf(newer)) return;
    }
    const reverse = direct.get(newer.filename);
    if (reverse?.newer.filename === older.filename) {
      // Two memories claiming to replace each other: the newer one stands.
      if (dateOf(newer) <= dateOf(older)) return;
      direct.delete(newer.filename);
    }
    direct.set(older.filename, { newer, reason });
  };

  // 1. explicit
  for (const h of headers) {
    for (const ref of h.supersedes ?? []) {
      const older = resolveMemoryLink(
        ref,
        headers.filter((o) => o !== h),
      );
      if (older) propose(older, h, 'explicit');
    }
  }

  // 2. same name, 3. near duplicate
  const info = headers.map((h) => ({
    h,
    slug: h.name ? memorySlug(h.name) : '',
    nameTerms: new Set(topicalTerms(h.name ?? '')),
    descTerms: new Set(topicalTerms(h.description ?? '')),
  }));
  const bySlug = new Map<string, typeof info>();
  for (const i of info) {
    if (i.slug === '' || i.nameTerms.size < 2) continue;
    const list = bySlug.get(i.slug) ?? [];
    list.push(i);
    bySlug.set(i.slug, list);
  }
  for (const group of bySlug.values()) {
    if (group.length < 2) continue;
    for (const a of group)
      for (const b of group)
        if (typesMatch(a.h, b.h) && dateOf(b.h) > dateOf(a.h)) propose(a.h, b.h, 'same-name');
  }
  // Near duplicates: compare within groups sharing a topical name word (keeps this far from quadratic).
  const byNameTerm = new Map<string, typeof info>();
  for (const i of info) {
    if (i.descTerms.size < 3) continue;
    for (const t of i.nameTerms) {
      const list = byNameTerm.get(t) ?? [];
      list.push(i);
      byNameTerm.set(t, list);
    }
  }
  const compared = new Set<string>();
  for (const group of byNameTerm.values()) {
    for (let x = 0; x < group.length; x++) {
      for (let y = x + 1; y < group.length; y++) {
        const a = group[x] as (typeof info)[number];
        const b = group[y] as (typeof info)[number];
        const key =
          a.h.filename < b.h.filename
            ? `${a.h.filename}\0${b.h.filename}`
            : `${b.h.filename}\0${a.h.filename}`;
        if (compared.has(key)) continue;
        compared.add(key);
        if (a.h.type !== b.h.type || dateOf(a.h) === dateOf(b.h)) continue;
        if (jaccard(a.nameTerms, b.nameTerms) < NAME_OVERLAP) continue;
        if (jaccard(a.descTerms, b.descTerms) < DESCRIPTION_OVERLAP) continue;
        if (namesOwnSubject(a, b) && namesOwnSubject(b, a)) continue;
        const [older, newer] = dateOf(a.h) < dateOf(b.h) ? [a.h, b.h] : [b.h, a.h];
        if (!direct.has(older.filename)) propose(older, newer, 'near-duplicate');
      }
    }
  }

  // Follow chains to the newest replacement (a cycle of explicit claims stops where it closes).
  const out = new Map<string, Supersession>();
  for (const [older, { newer, reason }] of direct) {
    let final = newer;
    const seen = new Set([older]);
    for (
      let next = direct.get(final.filename);
      next && !seen.has(final.filename);
      next = direct.get(final.filename)
    ) {
      seen.add(final.filename);
      if (next.newer.filename === older) break;
      final = next.newer;
    }
    if (final.filename !== older) out.set(older, { older, newer: final.filename, reason });
  }
  return out;
}

/**
 * One line per newer memory naming what it supersedes, to put before its header when it is injected:
 * keyed by the newer memory's relative path.
 */
export function supersessionNotes(superseded: readonly Supersession[]): Map<string, string> {
  const olderByNewer = new Map<string, string[]>();
  for (const s of superseded) olderByNewer.set(s.newer, [...(olderByNewer.get(s.newer) ?? []), s.older]);
  const notes = new Map<string, string>();
  for (const [newer, older] of olderByNewer) {
    const list = older.sort().join(', ');
    notes.set(
      newer,
      `This memory supersedes ${list} (an older version of the same fact, left out of this recall); where they disagree, this one is current.`,
    );
  }
  return notes;
}
