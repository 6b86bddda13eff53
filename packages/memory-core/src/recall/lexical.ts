import type { MemoryHeader } from '../memdir/scan.js';
import { topicalTerms } from '../text/tokenize.js';
import { isCommonWord, probableLanguages } from './common-words.js';

// The recall fallback when the selector model times out, errors or answers nonsense (docs/design.md §5): a
// deterministic BM25 ranking of the memory headers against the query. It sees only what the model would
// have seen — name, description, type and the filename's words — never file bodies.
//
// Words come from the one tokenizer (text/tokenize.ts). Only topical terms count: numbers, one- and
// two-character tokens and stop words of every language the tokenizer knows are dropped from both sides, so
// "a short poem about penguins sliding on ice" shares nothing with a feature-flags note that also says "7".
//
// Relevance floor (the fallback prefers returning nothing to returning noise): a memory is returned only when
//   1. it shares two topical terms with the query — or a single one that at most LEXICAL_SINGLE_TERM_MAX_DF
//      memories contain *and* that is the only word of the query the directory knows at all *and* that is
//      not a common word of general language in the query's language (common-words.ts). One shared
//      word is weak evidence: when the query has other words the directory knows and this memory matches
//      only one of them, the query is about some other combination ("add a new label to the cart page" is
//      not about the accessibility note that mentions aria labels); only when the lone rare word is all the
//      query and the directory have in common ("rebuild the opensearch index") does it point anywhere — and
//      then only if the word is rare in language too: an everyday word ("plan a team offsite in Lisbon"
//      sharing "team" with an ownership note, "best phone to buy" sharing "phone" with the PII note) is
//      shared vocabulary, not a shared topic, while a technical one ("opensearch", "pnpm", "yarn") is;
//   2. its normalised score reaches LEXICAL_MIN_SCORE, and
//   3. its score is at least LEXICAL_RELATIVE_FLOOR of the best memory's score.
// The normalised score is the BM25 score divided by the IDF a term would have if it occurred in exactly one
// memory of the directory, so 1.0 ≈ "one fully distinctive shared word, once, in a header of average
// length" whatever the directory's size. IDF is computed as if the corpus had at least
// LEXICAL_IDF_MIN_DOCS documents, so a one-file memory directory does not make every shared word look weak
// (nor every word look distinctive in a directory of two). The constants are calibrated on the labelled
// evaluation set (bench/recall-quality.ts prints the sweep; the calibration is described in
// docs/recall.md). The recall fallback (select.ts) takes only the best of these matches
// (LEXICAL_FALLBACK_MATCHES).

export const BM25_K1 = 1.2;
export const BM25_B = 0.75;
/** In units of one fully distinctive shared word (see above). */
export const LEXICAL_MIN_SCORE = 1;
/** A returned memory scores at least this fraction of the best one. */
export const LEXICAL_RELATIVE_FLOOR = 0.95;
/**
 * A memory that shares only one topical term with the query qualifies only when at most this many memories
 * of the directory contain that term (one common shared word — a component name, "owner", "alert" — is
 * not evidence) and no other word of the query occurs in the directory (see the module comment).
 */
export const LEXICAL_SINGLE_TERM_MAX_DF = 1;
/**
 * How many ranked memories the recall fallback injects (their links may add more): without a model to
 * judge, the runner-up of a lexical ranking is rarely also relevant (on the evaluation set, none of the
 * runners-up within LEXICAL_RELATIVE_FLOOR of the best was).
 */
export const LEXICAL_FALLBACK_MATCHES = 1;
export const LEXICAL_IDF_MIN_DOCS = 10;

export { stem, tokenize } from '../text/tokenize.js';

/** The topical terms a header is ranked on: name, description, type and the filename's words (no extension). */
export function headerTokens(header: MemoryHeader): string[] {
  const filenameWords = header.filename.replace(/\.md$/i, '');
  return topicalTerms(
    [header.name ?? '', header.description ?? '', header.type ?? '', filenameWords].join(' '),
  );
}

/** A test of whether a header (as `headerTokens` sees it) shares at least one topical term with `query`. */
export function sharesTopicalTermWith(query: string): (header: MemoryHeader) => boolean {
  const terms = new Set(topicalTerms(query));
  return (header) => terms.size > 0 && headerTokens(header).some((t) => terms.has(t));
}

export interface LexicalMatch {
  header: MemoryHeader;
  score: number;
}

export interface LexicalRankOptions {
  /** Most matches returned (default 5). */
  limit?: number;
  /** Default LEXICAL_MIN_SCORE (normalised units). */
  minScore?: number;
  /** Default LEXICAL_RELATIVE_FLOOR. */
  relativeFloor?: number;
  /** Default LEXICAL_SINGLE_TERM_MAX_DF. */
  singleTermMaxDf?: number;
  /**
   * Whether a single shared term must also be the only query word the directory knows and not a common word
   * of general language (default true). `false` restores the plain rule "any lone word at most
   * `singleTermMaxDf` memories contain counts"; the bench measures what each refinement buys.
   */
  singleTermSoleKnown?: boolean;
  /**
   * Which single shared terms are too common in general language to qualify a memory alone (default: the
   * common words of the query's probable languages, common-words.ts; `null` turns the test off — the bench
   * measures what it buys). Applies with `singleTermSoleKnown` only.
   */
  singleTermCommon?: ((term: string, query: string) => boolean) | null;
}

/** The default single-term test: `term` is a common word in a language `query` is probably written in. */
export function isCommonInQueryLanguage(term: string, query: string): boolean {
  return isCommonWord(term, probableLanguages(query));
}

/**
 * Headers whose normalised BM25 score against `query` clears the floor (see the module comment), best first,
 * at most `limit`. Ties break by newer mtime, then filename, so equal input always gives equal output.
 */
export function lexicalRank(
  query: string,
  headers: readonly MemoryHeader[],
  options: LexicalRankOptions = {},
): LexicalMatch[] {
  const limit = options.limit ?? 5;
  const minScore = options.minScore ?? LEXICAL_MIN_SCORE;
  const relativeFloor = options.relativeFloor ?? LEXICAL_RELATIVE_FLOOR;
  const singleTermMaxDf = options.singleTermMaxDf ?? LEXICAL_SINGLE_TERM_MAX_DF;
  const singleTermSoleKnown = options.singleTermSoleKnown ?? true;
  const singleTermCommon =
    options.singleTermCommon === undefined ? isCommonInQueryLanguage : options.singleTermCommon;
  const queryTerms = [...new Set(topicalTerms(query))];
  if (queryTerms.length === 0 || headers.length === 0 || limit <= 0) return [];

  const docs = headers.map((header) => {
    const tf = new Map<string, number>();
    const tokens = headerTokens(header);
    for (const t of tokens) tf.set(t, (tf.get(t) ?? 0) + 1);
    return { header, tf, length: tokens.length };
  });
  const avgLength = docs.reduce((n, d) => n + d.length, 0) / docs.length || 1;
  const corpusSize = Math.max(docs.length, LEXICAL_IDF_MIN_DOCS);
  const idf = new Map<string, number>();
  const df = new Map<string, number>();
  for (const term of queryTerms) {
    const n = docs.reduce((count, d) => count + (d.tf.has(term) ? 1 : 0), 0);
    if (n > 0) {
      idf.set(term, Math.log(1 + (corpusSize - n + 0.5) / (n + 0.5)));
      df.set(term, n);
    }
  }

  // The IDF of a term found in exactly one memory: the unit of the normalised score.
  const unit = Math.log(1 + (corpusSize - 1 + 0.5) / 1.5);
  const matches: LexicalMatch[] = [];
  for (const doc of docs) {
    let score = 0;
    let shared = 0;
    let rarest = Number.POSITIVE_INFINITY;
    let lone = '';
    for (const [term, weight] of idf) {
      const f = doc.tf.get(term);
      if (!f) continue;
      shared += 1;
      lone = term;
      rarest = Math.min(rarest, df.get(term) ?? rarest);
      score +=
        (weight * f * (BM25_K1 + 1)) / (f + BM25_K1 * (1 - BM25_B + (BM25_B * doc.length) / avgLength));
    }
    score /= unit;
    if (
      shared === 1 &&
      (rarest > singleTermMaxDf || (singleTermSoleKnown && (df.size > 1 || singleTermCommon?.(lone, query))))
    )
      continue;
    if (score > 0 && score >= minScore) matches.push({ header: doc.header, score });
  }
  matches.sort(
    (a, b) =>
      b.score - a.score ||
      b.header.mtimeMs - a.header.mtimeMs ||
      (a.header.filename < b.header.filename ? -1 : a.header.filename > b.header.filename ? 1 : 0),
  );
  const best = matches[0]?.score ?? 0;
  return matches.filter((m) => m.score >= best * relativeFloor).slice(0, limit);
}
