// The one tokenizer for memory text: recall's lexical ranking (recall/lexical.ts) and consolidation's
// coverage check (dream/safety.ts) both compare words through it, so a word that counts as evidence in one
// counts in the other.
//
// `tokenize`: NFKC, lowercase; words are maximal runs of Unicode letters, marks and digits (so "naïve",
// "Straße", "数据库" and "v2" survive); runs of Han, Hiragana, Katakana and Hangul become overlapping
// character bigrams (those scripts are written without spaces, or with spaces between multi-syllable
// blocks). Stop words of the languages below and one-letter Latin tokens are dropped. Stemming is a light,
// documented suffix stripper for ASCII words (plural -s/-es/-ies, -ing, -ed, final -e, doubled final
// consonant), so "tests"/"testing"/"tested" and "cache"/"caching" meet, without Porter's surprises.
//
// `topicalTerms`: the tokens that carry topical evidence — what a relevance judgement may rest on. Numbers
// ("7", "2026", "v2" is kept only when 3+ characters), tokens of one or two characters in alphabetic
// scripts, stop words of every language handled here (before and after stemming), and CJK bigrams that are
// grammar (all-Hiragana bigrams such as "です"/"して", function-word bigrams such as "如何"/"我们") are not
// topical. Languages with stop lists: English, German, French, Spanish, Italian, Portuguese, Dutch, Russian,
// Chinese, Japanese.

const STOP_LISTS: Record<string, string> = {
  en:
    'a an and are as at be been being but by can could did do does doing done for from had has have having ' +
    'he her here hers him his how i if in into is it its itself just me my myself no nor not now of off on ' +
    'once only or other our ours out over own same she should so some such than that the their theirs them ' +
    'then there these they this those through to too under until up very was we were what when where which ' +
    'while who whom why will with would you your yours yourself also about again all any because before ' +
    'after both each few more most further let lets please thanks thank ok okay yes hey hi hello want need ' +
    'like get got make made one two may might must shall us am im ive id youre dont doesnt didnt isnt cant ' +
    'wont use uses used using new know think see look way thing things something anything go going good sure ' +
    'really still even much many well back right md tell show give take put keep help write short long ' +
    'little big small lot lots bit kind sort maybe actually basically just quick quickly today tomorrow ' +
    'yesterday time times day days week year via per onto upon whose which whatever whenever however ever ' +
    'never always often sometimes again every another such said say says same',
  de:
    'der die das den dem des ein eine einer eines einem einen und oder aber nicht ist sind war waren wird ' +
    'werden wurde wurden hat haben hatte sein seine ihr ihre ich du er sie es wir ihr mit von zu zum zur für ' +
    'auf aus bei nach über unter vor wie was wer wo wann warum dass auch noch schon nur sehr so dann wenn als ' +
    'im am um an in ins bis durch gegen ohne kein keine man mich mir dich dir uns euch diese dieser dieses ' +
    'jede jeder jedes immer nie hier dort bitte danke',
  fr:
    'le la les un une des du de et ou mais ne pas est sont été être avoir a ont je tu il elle nous vous ils ' +
    'elles ce cet cette ces qui que quoi dont où quand comment pourquoi avec pour par sur sous dans en au aux ' +
    'se sa son ses leur leurs mon ma mes ton ta tes plus moins très aussi donc alors comme si tout tous toute ' +
    'toutes faire fait peut ici là merci',
  es:
    'el la los las un una unos unas y o pero no es son era fue ser estar está están he ha han yo tú él ella ' +
    'nosotros vosotros ellos ellas este esta estos estas ese esa que qué quien cual cuando donde cómo como ' +
    'por para con sin sobre entre en de del al se su sus mi mis tu tus muy más menos también ya si todo ' +
    'todos toda todas hacer hace puede aquí allí gracias',
  it:
    'il lo la i gli le un uno una e o ma non è sono era essere avere ha hanno io tu lui lei noi voi loro ' +
    'questo questa questi queste quello che chi cosa quando dove come perché con per su tra fra in di da del ' +
    'della dei delle al alla si suo sua suoi mio mia molto più meno anche già se tutto tutti fare fa può ' +
    'qui grazie',
  pt:
    'o a os as um uma uns umas e ou mas não é são era foi ser estar está estão eu tu ele ela nós vós eles ' +
    'elas este esta isto esse essa isso que quem qual quando onde como por para com sem sobre entre em de do ' +
    'da dos das ao se seu sua seus meu minha muito mais menos também já se todo todos toda fazer faz pode ' +
    'aqui obrigado',
  nl:
    'de het een en of maar niet is zijn was waren wordt worden werd heeft hebben had ik jij je hij zij ze we ' +
    'wij jullie dit dat deze die wat wie waar wanneer waarom hoe met van voor op aan in uit bij naar over ' +
    'onder door om als dan ook nog al zo zeer heel er hier daar alstublieft dank',
  ru:
    'и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было ' +
    'вот от меня еще нет о из ему теперь когда даже ну вдруг ли если уже или ни быть был него до вас нибудь ' +
    'опять уж вам ведь там потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам ' +
    'чтоб без будто чего раз тоже себе под будет ж тогда кто этот того потому этого какой совсем ним здесь ' +
    'этом один почти мой тем чтобы нее сейчас были куда зачем всех никогда можно при наконец два об другой ' +
    'хоть после над больше тот через эти нас про всего них какая много разве три эту моя впрочем хорошо ' +
    'свою этой перед иногда лучше чуть том нельзя такой им более всегда конечно всю между пожалуйста',
};

/** Bigrams of Chinese/Japanese function words (question words, pronouns, auxiliaries). */
const CJK_STOP_BIGRAMS = (
  '如何 什么 怎么 怎样 为什么 我们 你们 他们 她们 它们 这个 那个 这些 那些 一个 可以 没有 不是 就是 还是 ' +
  '已经 因为 所以 但是 如果 然后 请问 帮我 一下 这里 那里 的是 是的 了吗 吗？ 时候 自己 です ます でし まし ' +
  'して した する ない ある いる こと もの これ それ あれ この その あの どう なに ください'
).split(' ');

/** The stop words of each language above, by ISO 639-1 code (Chinese and Japanese have bigram lists instead). */
export const STOP_WORDS_BY_LANGUAGE: ReadonlyMap<string, ReadonlySet<string>> = new Map(
  Object.entries(STOP_LISTS).map(([lang, list]) => [
    lang,
    new Set(list.split(/\s+/).filter((w) => w !== '')),
  ]),
);

export const STOP_WORDS: ReadonlySet<string> = new Set(
  Object.values(STOP_LISTS).flatMap((list) => list.split(/\s+/).filter((w) => w !== '')),
);
const CJK_STOP: ReadonlySet<string> = new Set(CJK_STOP_BIGRAMS.flatMap((w) => bigramsOf(w)));

const CJK_RUN = /^[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]+$/u;
const CJK_CHAR = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
const HIRAGANA_ONLY = /^\p{Script=Hiragana}+$/u;
const WORD = /[\p{L}\p{M}\p{N}]+/gu;
const SPLIT_CJK = /([\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]+)/u;
const NUMERIC = /^[\p{N}]+$/u;

function bigramsOf(run: string): string[] {
  const chars = [...run];
  if (chars.length === 1) return [run];
  const out: string[] = [];
  for (let i = 0; i + 1 < chars.length; i++) out.push(`${chars[i]}${chars[i + 1]}`);
  return out;
}

/** Words of `text` as memory text is compared (see the module comment). Deterministic; order kept. */
export function tokenize(text: string): string[] {
  const out: string[] = [];
  const lower = text.normalize('NFKC').toLowerCase();
  for (const match of lower.matchAll(WORD)) {
    for (const part of match[0].split(SPLIT_CJK)) {
      if (part === '') continue;
      if (CJK_RUN.test(part)) {
        out.push(...bigramsOf(part));
        continue;
      }
      if (STOP_WORDS.has(part)) continue;
      if (part.length === 1 && /[a-z]/.test(part)) continue;
      out.push(stem(part));
    }
  }
  return out;
}

/** Whether a token from `tokenize` may count as evidence that two texts are about the same thing. */
export function isTopicalTerm(token: string): boolean {
  if (CJK_CHAR.test(token)) {
    if ([...token].length < 2) return false;
    return !CJK_STOP.has(token) && !HIRAGANA_ONLY.test(token);
  }
  if ([...token].length < 3) return false;
  if (NUMERIC.test(token)) return false;
  if (/^\p{N}/u.test(token) && /\p{N}$/u.test(token)) return false; // 2026-12, 3.14 split into numbers anyway
  return !STOP_WORDS.has(token);
}

/** The topical tokens of `text`, in order (duplicates kept; callers that need a set make one). */
export function topicalTerms(text: string): string[] {
  return tokenize(text).filter(isTopicalTerm);
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
