import { describe, expect, it } from 'vitest';
import { stem } from '../text/tokenize.js';
import { isCommonWord, probableLanguages } from './common-words.js';

describe('common general-language words', () => {
  it('holds everyday words of each language and no technical vocabulary', () => {
    for (const w of ['team', 'phone', 'morning', 'plan', 'weather'])
      expect(isCommonWord(stem(w), ['en']), w).toBe(true);
    for (const w of ['opensearch', 'pnpm', 'yarn', 'index', 'install', 'checkout', 'network', 'bigquery'])
      expect(isCommonWord(stem(w)), w).toBe(false);
    expect(isCommonWord('zeit', ['de'])).toBe(true);
    expect(isCommonWord('zeit', ['en'])).toBe(false);
    expect(isCommonWord('dag', ['nl'])).toBe(true);
    expect(isCommonWord('dag', ['en'])).toBe(false);
  });

  it('guesses the languages a prompt is written in from its stop words, every language when it has none', () => {
    expect(probableLanguages('plan a team offsite in Lisbon')).toEqual(['en']);
    expect(probableLanguages('wie funktioniert der Index?')).toEqual(['de']);
    expect(probableLanguages('これは何ですか')).toContain('ja');
    expect(probableLanguages('数据库迁移')).toEqual(['zh', 'ja']);
    expect(probableLanguages('opensearch reindex').sort()).toEqual([
      'de',
      'en',
      'es',
      'fr',
      'it',
      'ja',
      'nl',
      'pt',
      'ru',
      'zh',
    ]);
  });
});
