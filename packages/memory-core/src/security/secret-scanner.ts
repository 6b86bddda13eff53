// Credential patterns for the provider families of gitleaks' public rule set (rule ids follow gitleaks' ids so
// a finding can be looked up there), written for this scanner: a keyword prefilter, a pattern per rule, and a
// filter that drops documented placeholders (`AKIA…EXAMPLE`, `ghp_xxxx…`, `your-api-key`, repeated or
// sequential characters) and low-entropy values. Two kinds of pattern:
//   - prefixed tokens (`ghp_…`, `hvs.…`, `xoxb-…`) that are recognisable anywhere;
//   - keyed values (`DATADOG_API_KEY = "<40 alnum>"`): a provider name on the left of an assignment, a value of
//     the provider's format on the right. A generic rule does the same for words like `token`/`secret` with an
//     entropy floor and a stop-word list, so ordinary notes ("token_limit: 4096") stay clean.
// Used to keep secrets out of team memory, which is shared with every collaborator, and to redact the recall
// query. Results name the rule, never the matched text, so a report can be logged without leaking what it
// found. Synchronous, no dependencies; a 25 KB memory file scans in well under a millisecond per rule that
// survives the prefilter (bench/secrets.ts measures it).

import { SECRET_RULES, type SecretRule } from './secret-rules.js';

export interface SecretMatch {
  ruleId: string;
  label: string;
}

/** Shannon entropy in bits per character. */
export function shannonEntropy(value: string): number {
  if (value.length === 0) return 0;
  const counts = new Map<string, number>();
  for (const ch of value) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) {
    const p = n / value.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

const PLACEHOLDER_WORDS = [
  'example',
  'sample',
  'dummy',
  'placeholder',
  'changeme',
  'change_me',
  'redacted',
  'your_',
  'your-',
  '_here',
  '-here',
  'xxxx',
  'fake',
  'insert',
  'replace',
  'lorem',
  'foobar',
  'notreal',
  'not_real',
  'donotuse',
];
// Lower-case or upper-case (capitalised too for words of 6+ letters): a random mixed-case body of 90
// characters contains "Fake" about once in 10^5 values, a vendor's documentation never in mixed case.
const PLACEHOLDER_WORD = new RegExp(
  PLACEHOLDER_WORDS.flatMap((w) =>
    w.length >= 6 ? [w, w.toUpperCase(), w.charAt(0).toUpperCase() + w.slice(1)] : [w, w.toUpperCase()],
  ).join('|'),
);
/** Position of a character in the ascending run 0-9a-z (so `0123456789abcdef` is one run), or -1. */
function rank(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 97 && code <= 122) return code - 87;
  if (code >= 65 && code <= 90) return code - 55;
  return -1;
}

/** An ascending or descending run of 8+ characters (`abcdefgh`, `12345678`, `9876543210`). */
function hasSequence(value: string): boolean {
  let up = 1;
  let down = 1;
  for (let i = 1; i < value.length; i += 1) {
    const prev = rank(value.charCodeAt(i - 1));
    const cur = rank(value.charCodeAt(i));
    up = prev >= 0 && cur === prev + 1 ? up + 1 : 1;
    down = prev >= 0 && cur >= 0 && cur === prev - 1 ? down + 1 : 1;
    if (up >= 8 || down >= 8) return true;
  }
  return false;
}

/**
 * Documented placeholders and filler: `AKIA…EXAMPLE`, `ghp_xxxx…`, `your-api-key`, a run of one character,
 * an ascending alphabet or digit sequence, or too few distinct characters for a random value.
 */
export function isPlaceholderSecret(value: string, runsOk = false): boolean {
  if (PLACEHOLDER_WORD.test(value)) return true;
  if (hasSequence(value)) return true;
  if (!runsOk && /(.)\1{5,}/.test(value)) return true;
  // Distinct characters of the part after a known prefix (the value's last 16+ characters).
  const tail = value.length > 24 ? value.slice(-Math.max(16, Math.floor(value.length / 2))) : value;
  const distinct = new Set(tail).size;
  if (value.length >= 12 && distinct < Math.min(6, Math.ceil(tail.length / 3))) return true;
  return false;
}

// Rules whose match does not begin at one of their keywords (a left boundary character, a value before the
// distinctive part, an optional scheme): their patterns run over the whole text. Every other rule's patterns
// run only where one of its keywords occurs, as a sticky match at that offset, so the cost of a scan follows
// the number of keyword occurrences rather than rules x text length.
const WHOLE_TEXT_RULES = new Set([
  'azure-ad-client-secret',
  'huggingface-access-token',
  'facebook-access-token',
  'maxmind-license-key',
  'hashicorp-tf-api-token',
  'authress-service-client-access-key',
  'sidekiq-sensitive-url',
  'slack-webhook-url',
  'microsoft-teams-webhook',
  'kubernetes-secret-yaml',
  'freemius-secret-key',
  'telegram-bot-api-token',
  'openai-api-key',
]);

interface CompiledRule {
  rule: SecretRule;
  anchored: boolean;
  /** Global regexes (whole-text scan). */
  regexes: readonly RegExp[];
  /** Sticky regexes (run at keyword offsets). */
  sticky: readonly RegExp[];
}

const COMPILED: readonly CompiledRule[] = SECRET_RULES.map((rule) => {
  const sources = [rule.source, ...(rule.also ?? [])];
  return {
    rule,
    anchored: !WHOLE_TEXT_RULES.has(rule.id),
    regexes: sources.map((s) => new RegExp(s, `gd${rule.flags ?? ''}`)),
    sticky: sources.map((s) => new RegExp(s, `yd${rule.flags ?? ''}`)),
  };
});

function accepted(rule: SecretRule, match: RegExpExecArray, text: string): [number, number] | null {
  const span = match.indices?.groups?.secret ?? match.indices?.[0];
  if (!span || span[1] <= span[0]) return null;
  const value = text.slice(span[0], span[1]);
  if (isPlaceholderSecret(value, rule.runsOk)) return null;
  if (rule.entropy !== undefined && shannonEntropy(value) < rule.entropy) return null;
  if (rule.accept && !rule.accept(value, match, text)) return null;
  return [span[0], span[1]];
}

// Every keyword of every rule (all ASCII), indexed by its first two characters (one-character keywords by
// their only one), so one pass over the text finds all keyword occurrences at once. `PAIR_HIT` marks the
// two-character prefixes that start some keyword, so most offsets cost one typed-array read.
const KEYWORD_INDEX = new Map<number, string[]>();
const PAIR_HIT = new Uint8Array(1 << 16);
const SINGLE_HIT = new Uint8Array(1 << 8);
for (const keyword of new Set(SECRET_RULES.flatMap((r) => r.keywords))) {
  const c0 = keyword.charCodeAt(0);
  const key = keyword.length === 1 ? -c0 - 1 : (c0 << 8) | keyword.charCodeAt(1);
  if (keyword.length === 1) SINGLE_HIT[c0] = 1;
  else PAIR_HIT[key] = 1;
  const list = KEYWORD_INDEX.get(key) ?? [];
  list.push(keyword);
  KEYWORD_INDEX.set(key, list);
}

/** Offsets (ascending) of each keyword present in `lower`. */
function keywordOccurrences(lower: string): Map<string, number[]> {
  const found = new Map<string, number[]>();
  const add = (keyword: string, at: number) => {
    const list = found.get(keyword);
    if (list) list.push(at);
    else found.set(keyword, [at]);
  };
  const n = lower.length;
  let c1 = n > 0 ? lower.charCodeAt(0) : 0;
  for (let i = 0; i < n; i += 1) {
    const c0 = c1;
    c1 = i + 1 < n ? lower.charCodeAt(i + 1) : 0;
    if (c0 > 0xff) continue;
    if (SINGLE_HIT[c0] === 1) for (const keyword of KEYWORD_INDEX.get(-c0 - 1) ?? []) add(keyword, i);
    if (c1 > 0xff) continue;
    const key = (c0 << 8) | c1;
    if (PAIR_HIT[key] !== 1) continue;
    for (const keyword of KEYWORD_INDEX.get(key) ?? []) if (lower.startsWith(keyword, i)) add(keyword, i);
  }
  return found;
}

/** For each keyword, the rules (indices into COMPILED, ascending) that list it. */
const RULES_BY_KEYWORD = new Map<string, number[]>();
COMPILED.forEach(({ rule }, index) => {
  for (const keyword of new Set(rule.keywords)) {
    const list = RULES_BY_KEYWORD.get(keyword) ?? [];
    list.push(index);
    RULES_BY_KEYWORD.set(keyword, list);
  }
});

/** The rules with a keyword among `occurrences`, in rule order: only they can match (most texts have none). */
function candidateRules(occurrences: Map<string, number[]>): CompiledRule[] {
  if (occurrences.size === 0) return [];
  const indices = new Set<number>();
  for (const keyword of occurrences.keys())
    for (const i of RULES_BY_KEYWORD.get(keyword) ?? []) indices.add(i);
  return [...indices].sort((a, b) => a - b).map((i) => COMPILED[i] as CompiledRule);
}

function offsetsOf(rule: SecretRule, occurrences: Map<string, number[]>): number[] {
  const lists = rule.keywords.map((k) => occurrences.get(k)).filter((l): l is number[] => l !== undefined);
  if (lists.length === 1) return lists[0] as number[];
  const merged = lists.flat().sort((a, b) => a - b);
  return merged.filter((o, i) => i === 0 || o !== merged[i - 1]);
}

function* findings(text: string, stopAtFirstPerRule: boolean): Generator<[SecretRule, [number, number]]> {
  const lower = text.toLowerCase();
  const occurrences = keywordOccurrences(lower);
  // Keyword offsets index `text` only when lower-casing kept every offset (it can lengthen some letters).
  const offsetsValid = lower.length === text.length;
  for (const { rule, anchored, regexes, sticky } of candidateRules(occurrences)) {
    if (anchored && offsetsValid) {
      let end = 0;
      for (const at of offsetsOf(rule, occurrences)) {
        if (at < end) continue; // inside a secret already reported by this rule
        for (const regex of sticky) {
          regex.lastIndex = at;
          const match = regex.exec(text);
          const span = match ? accepted(rule, match, text) : null;
          if (span) {
            yield [rule, span];
            end = span[1];
            break;
          }
        }
        if (end > 0 && stopAtFirstPerRule) break;
      }
      continue;
    }
    let found = false;
    for (const regex of regexes) {
      regex.lastIndex = 0;
      let match: RegExpExecArray | null = regex.exec(text);
      while (match !== null) {
        const span = accepted(rule, match, text);
        if (span) {
          found = true;
          yield [rule, span];
          if (stopAtFirstPerRule) break;
        }
        // Resume right after the match start, so a rejected match does not hide a later one inside it.
        regex.lastIndex = span ? span[1] : match.index + 1;
        match = regex.exec(text);
      }
      if (found && stopAtFirstPerRule) break;
    }
  }
}

/** One entry per rule that matched (in rule order), never the matched text. */
export function scanForSecrets(text: string): SecretMatch[] {
  if (typeof text !== 'string' || text === '') return [];
  const found: SecretMatch[] = [];
  for (const [rule] of findings(text, true)) found.push({ ruleId: rule.id, label: rule.label });
  return found;
}

export const REDACTED = '[REDACTED]';

/** Replaces every match of every rule (its `secret` group when it has one) with `[REDACTED]`. */
export function redactSecrets(text: string): string {
  if (typeof text !== 'string' || text === '') return text;
  const ranges: Array<[number, number]> = [];
  for (const [, span] of findings(text, false)) ranges.push(span);
  if (ranges.length === 0) return text;
  ranges.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let out = '';
  let cursor = 0;
  for (const [start, end] of ranges) {
    if (end <= cursor) continue;
    if (start >= cursor) out += text.slice(cursor, start) + REDACTED;
    cursor = end;
  }
  return out + text.slice(cursor);
}
