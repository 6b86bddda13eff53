import { posix } from 'node:path';
import { parseIndexEntries } from '../memdir/index-file.js';
import { TEAM_DIRNAME } from '../paths/memory-paths.js';
import { topicalTerms } from '../text/tokenize.js';
import type { DreamManifest, DreamManifestEntry } from './manifest.js';

// The consolidation safety net's judgement (pure): compare the memory directory before and after a dream and
// decide whether to keep the result. A run is refused when
//   - memories exist but MEMORY.md is empty, has no parseable pointer line, or points at no existing memory
//     (the "empty reflection wiped memory" failure: docs/peer-research.md §4) — unless the index was already empty before
//     the run, in which case there was nothing to lose and the worker rebuilds the pointers;
//   - it deleted more than `maxDeletedShare` of the memories without their content landing elsewhere.
//
// "Content landed elsewhere" (a deletion that is really a merge) is decided conservatively, in this order:
//   1. explicit: a surviving file names the deleted one in its frontmatter `merged_from` / `supersedes`
//      (also `metadata.merged_from`) — what the consolidation prompt asks the model to write;
//   2. lexical: the deleted file's keywords (its name and description, topped up from its body when they
//      give fewer than 3) appear in a surviving file's name, description and body — at least 60% of them
//      when that survivor was created or changed by this run, at least 80% when it was left untouched (a
//      true duplicate). A survivor that merely lists the file under `related` needs only 40%. Keywords are
//      lower-cased letter/digit runs of 3+ characters minus common English words; CJK runs count as
//      overlapping character pairs, so non-English memories are judged too. Fewer than 2 keywords: no
//      lexical evidence at all.
// A file emptied by the run counts as deleted (the fork's tools cannot remove files; emptying is how it asks).
// Files that were already empty before the run are not memories and are ignored.

export const DEFAULT_MAX_DELETED_SHARE = 0.5;
const TOUCHED_SURVIVOR_COVERAGE = 0.6;
const UNTOUCHED_SURVIVOR_COVERAGE = 0.8;
const RELATED_SURVIVOR_COVERAGE = 0.4;
const MIN_KEYWORDS = 2;

export type ConsolidationRefusal =
  | 'INDEX_EMPTY'
  | 'INDEX_UNPARSEABLE'
  | 'INDEX_DANGLING'
  | 'TOO_MANY_DELETED';

export interface ReplacedMemory {
  file: string;
  into: string;
  evidence: 'merged_from' | 'related' | 'overlap';
  /** Share of the deleted file's keywords found in `into` (1 for merged_from). */
  coverage: number;
}

export interface ConsolidationAssessment {
  ok: boolean;
  code?: ConsolidationRefusal;
  /** Why the run was refused, in words a user can act on. */
  reason?: string;
  created: string[];
  updated: string[];
  /** Memories removed or emptied by the run. */
  deleted: string[];
  replaced: ReplacedMemory[];
  unreplacedDeleted: string[];
  memoriesBefore: number;
  memoriesAfter: number;
  indexLinesBefore: number;
  indexLinesAfter: number;
  indexEntriesAfter: number;
  /** True when the index had no pointer before the run either: the caller should (re)build pointers. */
  rebuildIndex: boolean;
}

export interface AssessConsolidationInput {
  before: DreamManifest;
  after: DreamManifest;
  /** MEMORY.md after the run ('' when missing). */
  indexContent: string;
  /** MEMORY.md before the run ('' when missing); when omitted, treated as having had pointers. */
  indexBefore?: string;
  /** Default 0.5: more than half of the memories deleted without replacement refuses the run. */
  maxDeletedShare?: number;
}

export function countIndexLines(content: string): number {
  const trimmed = content.trim();
  return trimmed === '' ? 0 : trimmed.split('\n').length;
}

export function assessConsolidation(input: AssessConsolidationInput): ConsolidationAssessment {
  const maxShare = input.maxDeletedShare ?? DEFAULT_MAX_DELETED_SHARE;
  const beforeMap = new Map(input.before.filter((e) => !e.empty).map((e) => [e.file, e]));
  const afterLive = input.after.filter((e) => !e.empty);
  const afterMap = new Map(afterLive.map((e) => [e.file, e]));

  const created: string[] = [];
  const updated: string[] = [];
  for (const entry of afterLive) {
    const old = beforeMap.get(entry.file);
    if (!old) created.push(entry.file);
    else if (old.hash !== entry.hash) updated.push(entry.file);
  }
  created.sort();
  updated.sort();
  const deleted = [...beforeMap.keys()].filter((file) => !afterMap.has(file)).sort();
  const touched = new Set([...created, ...updated]);

  const replaced: ReplacedMemory[] = [];
  const unreplacedDeleted: string[] = [];
  for (const file of deleted) {
    const match = findReplacement(beforeMap.get(file) as DreamManifestEntry, afterLive, touched);
    if (match) replaced.push(match);
    else unreplacedDeleted.push(file);
  }

  const entriesAfter = parseIndexEntries(input.indexContent);
  const base = {
    created,
    updated,
    deleted,
    replaced,
    unreplacedDeleted,
    memoriesBefore: beforeMap.size,
    memoriesAfter: afterMap.size,
    indexLinesBefore: countIndexLines(input.indexBefore ?? ''),
    indexLinesAfter: countIndexLines(input.indexContent),
    indexEntriesAfter: entriesAfter.length,
  };
  const indexHadPointers = input.indexBefore === undefined || parseIndexEntries(input.indexBefore).length > 0;
  const rootMemories = afterLive.filter((e) => !e.file.startsWith(`${TEAM_DIRNAME}/`));

  const refuse = (code: ConsolidationRefusal, reason: string): ConsolidationAssessment => ({
    ok: false,
    code,
    reason,
    ...base,
    rebuildIndex: false,
  });

  if (rootMemories.length > 0 && indexHadPointers) {
    if (input.indexContent.trim() === '') {
      return refuse(
        'INDEX_EMPTY',
        `the run left MEMORY.md empty while ${rootMemories.length} memories exist`,
      );
    }
    if (entriesAfter.length === 0) {
      return refuse(
        'INDEX_UNPARSEABLE',
        `the run left MEMORY.md without a single "- [Title](file.md)" pointer while ${rootMemories.length} memories exist`,
      );
    }
    const live = new Set(rootMemories.map((e) => e.file));
    if (!entriesAfter.some((e) => live.has(e.file))) {
      return refuse('INDEX_DANGLING', 'the run left MEMORY.md pointing only at files that do not exist');
    }
  }

  if (base.memoriesBefore > 0 && unreplacedDeleted.length / base.memoriesBefore > maxShare) {
    const pct = Math.round((unreplacedDeleted.length / base.memoriesBefore) * 100);
    const shown = unreplacedDeleted.slice(0, 5).join(', ');
    const more = unreplacedDeleted.length > 5 ? `, … (${unreplacedDeleted.length - 5} more)` : '';
    return refuse(
      'TOO_MANY_DELETED',
      `the run deleted ${unreplacedDeleted.length} of ${base.memoriesBefore} memories (${pct}%, limit ` +
        `${Math.round(maxShare * 100)}%) without folding their content into another memory: ${shown}${more}`,
    );
  }

  return { ok: true, ...base, rebuildIndex: rootMemories.length > 0 && !indexHadPointers };
}

function refersTo(hints: readonly string[], file: string): boolean {
  const base = posix.basename(file);
  return hints.some((hint) => hint === file || posix.basename(hint) === base);
}

function findReplacement(
  gone: DreamManifestEntry,
  survivors: readonly DreamManifestEntry[],
  touched: ReadonlySet<string>,
): ReplacedMemory | undefined {
  for (const s of survivors) {
    if (refersTo(s.mergedFrom, gone.file)) {
      return { file: gone.file, into: s.file, evidence: 'merged_from', coverage: 1 };
    }
  }
  const keywords = memoryKeywords(gone);
  if (keywords.size < MIN_KEYWORDS) return undefined;
  let best: ReplacedMemory | undefined;
  for (const s of survivors) {
    const tokens = new Set(topicalTerms(`${s.name ?? ''}\n${s.description ?? ''}\n${s.text}`));
    let hits = 0;
    for (const k of keywords) if (tokens.has(k)) hits++;
    const coverage = hits / keywords.size;
    const related = refersTo(s.related, gone.file);
    const needed = related
      ? RELATED_SURVIVOR_COVERAGE
      : touched.has(s.file)
        ? TOUCHED_SURVIVOR_COVERAGE
        : UNTOUCHED_SURVIVOR_COVERAGE;
    if (coverage >= needed && (!best || coverage > best.coverage)) {
      best = { file: gone.file, into: s.file, evidence: related ? 'related' : 'overlap', coverage };
    }
  }
  return best;
}

/** Keywords of a memory: its name and description, topped up from its body when they give fewer than 3. */
export function memoryKeywords(
  entry: Pick<DreamManifestEntry, 'name' | 'description' | 'text'>,
): Set<string> {
  const keywords = new Set(topicalTerms(`${entry.name ?? ''}\n${entry.description ?? ''}`));
  if (keywords.size < 3) {
    const body = entry.text.replace(/^---[\s\S]*?\n---\s*\n/, '');
    for (const token of topicalTerms(body)) {
      if (keywords.size >= 12) break;
      keywords.add(token);
    }
  }
  return keywords;
}
