import type { MemoryHeader } from '../memdir/scan.js';

// The recall fallback when the selector model times out, errors or answers nonsense (DESIGN §5): a
// deterministic BM25 ranking of the memory headers against the query. It sees only what the model would
// have seen — name, description, type and the filename's words — never file bodies.
//
// Tokenisation: NFKC, lowercase; words are maximal runs of Unicode letters, marks and digits (so "naïve",
// "Straße", "数据库" and "v2" survive); runs of Han/Hiragana/Katakana, written without spaces, become
// overlapping character bigrams. English stop words (with a few conversational fillers such as "use", "new",
// "thing", which match everything and mean nothing) and one-letter Latin tokens are dropped. Stemming is a
// light, documented suffix stripper (plural -s/-es/-ies, -ing, -ed, final -e, doubled final consonant) so
// "tests"/"testing"/"tested" and "cache"/"caching" meet, without Porter's surprises.
//
// Minimum score: an unrelated query shares no content word and scores 0; a query sharing only words that
// are common across the memories (idf near 0) stays under LEXICAL_MIN_SCORE. IDF is computed as if the
// corpus had at least LEXICAL_IDF_MIN_DOCS documents, so a one-file memory directory does not make every
// shared word look weak (nor every word look distinctive in a directory of two).

export const BM25_K1 = 1.2;
export const BM25_B = 0.75;
/** One distinctive shared word (present in ≤1 of 10 memories) scores ≈2; a word in half of them ≈0.7. */
export const LEXICAL_MIN_SCORE = 1;
export const LEXICAL_IDF_MIN_DOCS = 10;

const STOP_WORDS = new Set(
  (
    'a an and are as at be been being but by can could did do does doing done for from had has have having ' +
    'he her here hers him his how i if in into is it its itself just me my myself no nor not now of off on ' +
    'once only or other our ours out over own same she should so some such than that the their theirs them ' +
    'then there these they this those through to too under until up very was we were what when where which ' +
    'while who whom why will with would you your yours yourself also about again all any because before ' +
    'after both each few more most further let lets please thanks thank ok okay yes hey hi hello want need ' +
    'like get got make made one two may might must shall us am im ive id youre dont doesnt didnt isnt cant ' +
    'wont use uses used using new know think see look way thing things something anything go going good sure ' +
    'really still even much many well back right md'
  ).split(' '),
);

const CJK_RUN = /^[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]+$/u;
const WORD = /[\p{L}\p{M}\p{N}]+/gu;
const SPLIT_CJK = /([\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]+)/u;

/** Words of `text` as the ranking compares them (see the module comment). Deterministic; order kept. */
export function tokenize(text: string): string[] {
  const out: string[] = [];
  const lower = text.normalize('NFKC').toLowerCase();
  for (const match of lower.matchAll(WORD)) {
    for (const part of match[0].split(SPLIT_CJK)) {
      if (part === '') continue;
      if (CJK_RUN.test(part)) {
        const chars = [...part];
        if (chars.length === 1) out.push(part);
        for (let i = 0; i + 1 < chars.length; i++) out.push(`${chars[i]}${chars[i + 1]}`);
        continue;
      }
      if (STOP_WORDS.has(part)) continue;
      if (part.length === 1 && /[a-z]/.test(part)) continue;
      out.push(stem(part));
    }
  }
  return out;
}

const VOWEL = /[aeiouy]/;

/**
 * Light English suffix stripping, applied only to ASCII-letter words of 4+ letters (other scripts pass
 * through unchanged): ies→y, sses→ss, -es after x/z/ch/sh, -s (not -ss/-us/-is), then -ing/-ed when a
 * vowel-bearing stem of 3+ letters remains (undoubling a final consonant other than l/s/z), then a final -e.
 */
export function stem(word: string): string {
  if (word.length < 4 || !/^[a-z]+$/.test(word)) return word;
  let w = word;
  if (w.endsWith('ies') && w.length > 4) w = `${w.slice(0, -3)}y`;
  else if (w.endsWith('sses')) w = w.slice(0, -2);
  else if (/(?:[xz]|ch|sh)es$/.test(w)) w = w.slice(0, -2);
  else if (w.endsWith('s') && !/(?:ss|us|is)$/.test(w)) w = w.slice(0, -1);
  for (const suffix of ['ing', 'ed']) {
    if (w.endsWith(suffix)) {
      const base = w.slice(0, -suffix.length);
      if (base.length >= 3 && VOWEL.test(base)) {
        w = /([b-df-hj-km-np-rtv-xz])\1$/.test(base) ? base.slice(0, -1) : base;
      }
      break;
    }
  }
  if (w.length > 4 && w.endsWith('e')) w = w.slice(0, -1);
  return w;
}

/** The words a header is ranked on: name, description, type and the filename's words (extension dropped). */
export function headerTokens(header: MemoryHeader): string[] {
  const filenameWords = header.filename.replace(/\.md$/i, '');
  return tokenize([header.name ?? '', header.description ?? '', header.type ?? '', filenameWords].join(' '));
}

export interface LexicalMatch {
  header: MemoryHeader;
  score: number;
}

export interface LexicalRankOptions {
  /** Most matches returned (default 5). */
  limit?: number;
  /** Default LEXICAL_MIN_SCORE. */
  minScore?: number;
}

/**
 * Headers whose BM25 score against `query` reaches the minimum, best first, at most `limit`. Ties break by
 * newer mtime, then filename, so equal input always gives equal output.
 */
export function lexicalRank(
  query: string,
  headers: readonly MemoryHeader[],
  options: LexicalRankOptions = {},
): LexicalMatch[] {
  const limit = options.limit ?? 5;
  const minScore = options.minScore ?? LEXICAL_MIN_SCORE;
  const queryTerms = [...new Set(tokenize(query))];
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
  for (const term of queryTerms) {
    const n = docs.reduce((count, d) => count + (d.tf.has(term) ? 1 : 0), 0);
    if (n > 0) idf.set(term, Math.log(1 + (corpusSize - n + 0.5) / (n + 0.5)));
  }

  const matches: LexicalMatch[] = [];
  for (const doc of docs) {
    let score = 0;
    for (const [term, weight] of idf) {
      const f = doc.tf.get(term);
      if (!f) continue;
      score +=
        (weight * f * (BM25_K1 + 1)) / (f + BM25_K1 * (1 - BM25_B + (BM25_B * doc.length) / avgLength));
    }
    if (score >= minScore) matches.push({ header: doc.header, score });
  }
  matches.sort(
    (a, b) =>
      b.score - a.score ||
      b.header.mtimeMs - a.header.mtimeMs ||
      (a.header.filename < b.header.filename ? -1 : a.header.filename > b.header.filename ? 1 : 0),
  );
  return matches.slice(0, limit);
}
