import { describe, expect, it } from 'vitest';
import { isTopicalTerm, STOP_WORDS, tokenize, topicalTerms } from './tokenize.js';

describe('topicalTerms', () => {
  it('drops numbers, one- and two-character tokens and stop words, keeps content words stemmed', () => {
    expect(topicalTerms('Deploy 7 services to v2 on 2026-12-01, OK?')).toEqual(['deploy', 'servic']);
    expect(topicalTerms('a short poem about penguins sliding on ice')).toEqual([
      'poem',
      'penguin',
      'slid',
      'ice',
    ]);
  });

  it('has stop words for every language it handles, applied after stemming too', () => {
    for (const w of ['the', 'und', 'les', 'los', 'della', 'não', 'het', 'что'])
      expect(STOP_WORDS.has(w)).toBe(true);
    expect(topicalTerms('wants things')).toEqual([]);
    expect(topicalTerms('Wie lange dauert der Reindex?')).toEqual(['lang', 'dauert', 'reindex']); // the English stemmer also trims ASCII German words; both sides alike
  });

  it('keeps CJK bigrams as evidence except grammar (all-Hiragana, function-word pairs)', () => {
    expect(topicalTerms('如何执行数据库迁移')).toEqual([
      '何执',
      '执行',
      '行数',
      '数据',
      '据库',
      '库迁',
      '迁移',
    ]);
    expect(topicalTerms('これはです')).toEqual([]);
    expect(isTopicalTerm('売上')).toBe(true);
    expect(tokenize('안녕하세요')).toEqual(['안녕', '녕하', '하세', '세요']);
  });
});
