import { describe, expect, it } from 'vitest';
import type { MemoryHeader } from '../memdir/scan.js';
import { headerTokens, LEXICAL_MIN_SCORE, lexicalRank, stem, tokenize } from './lexical.js';
import { REALISTIC_HEADERS } from './recall-fixtures.test-helpers.js';

const names = (query: string, headers: readonly MemoryHeader[] = REALISTIC_HEADERS) =>
  lexicalRank(query, headers).map((m) => m.header.filename);

describe('tokenize', () => {
  it('lowercases, splits on anything but letters and digits, and drops stop words and single letters', () => {
    expect(tokenize("Don't mock the DB in the v2 API-tests, OK? (x)")).toEqual([
      'don',
      'mock',
      'db',
      'v2',
      'api',
      'test',
    ]);
  });

  it('keeps Unicode letters and digits whole', () => {
    expect(tokenize('Straße naïve café #5 Ünïcödé')).toEqual(['straße', 'naïve', 'café', '5', 'ünïcödé']);
    expect(tokenize('ＡＰＩ')).toEqual(['api']); // fullwidth folds under NFKC
  });

  it('turns runs of Han, Hiragana and Katakana into character bigrams', () => {
    expect(tokenize('数据库迁移')).toEqual(['数据', '据库', '库迁', '迁移']);
    expect(tokenize('库')).toEqual(['库']);
    expect(tokenize('redis数据库')).toEqual(['redis', '数据', '据库']);
  });

  it('stems plural and verb forms so they meet, and leaves short and non-ASCII words alone', () => {
    const groups = [
      ['test', 'tests', 'testing', 'tested'],
      ['cache', 'caches', 'caching', 'cached'],
      ['database', 'databases'],
      ['run', 'running'],
      ['fix', 'fixes', 'fixed'],
      ['query', 'queries'],
      ['fail', 'fails', 'failing', 'failed'],
      ['class', 'classes'],
    ];
    for (const group of groups) expect(new Set(group.map(stem)).size, group.join(',')).toBe(1);
    expect(stem('redis')).toBe('redis');
    expect(stem('status')).toBe('status');
    expect(stem('string')).toBe('string');
    expect(stem('go')).toBe('go');
    expect(stem('größes')).toBe('größes');
  });

  it('ranks a header on its name, description, type and filename words', () => {
    const tokens = headerTokens(REALISTIC_HEADERS[0]!);
    expect(tokens).toEqual(expect.arrayContaining(['pnpm', 'npm', 'feedback', 'install', 'script']));
    expect(tokens).not.toContain('md');
  });
});

describe('lexicalRank', () => {
  it('finds the memory that shares words with the query, first', () => {
    expect(names('should I mock the database in these integration tests?')[0]).toBe('feedback_db_tests.md');
    expect(names('run the installs with npm please')[0]).toBe('feedback_pnpm.md');
    expect(names('where do we track ingest pipeline bugs')[0]).toBe('reference_linear.md');
    expect(names('can I deploy to production on Friday?')[0]).toBe('team/deploy.md');
    expect(names('the caching layer is slow')[0]).toBe('notes/legacy.md');
  });

  it('matches non-English memories by bigrams', () => {
    expect(names('如何执行数据库迁移')[0]).toBe('数据库.md');
  });

  it('recalls nothing for a query that shares no content word', () => {
    expect(names('what is the capital of France?')).toEqual([]);
    expect(names('tell me a joke about penguins')).toEqual([]);
    expect(names('please')).toEqual([]);
    // Conversational fillers ("use", "new", "thing") are not evidence of relevance.
    expect(names('how do I use this new thing')).toEqual([]);
    expect(names('')).toEqual([]);
  });

  it('recalls nothing when the only shared word is common to every memory', () => {
    const headers = REALISTIC_HEADERS.map((h) => ({ ...h, description: `${h.description} (repo)` }));
    expect(names('what is in the repo', headers)).toEqual([]);
    const scores = lexicalRank('repo', headers, { minScore: 0 }).map((m) => m.score);
    expect(Math.max(...scores)).toBeLessThan(LEXICAL_MIN_SCORE);
  });

  it('finds the one memory of a one-file directory when the query shares a distinctive word', () => {
    expect(names('which package manager, pnpm or yarn?', [REALISTIC_HEADERS[0]!])).toEqual([
      'feedback_pnpm.md',
    ]);
  });

  it('caps the result and breaks ties by newer mtime, then filename', () => {
    const base: MemoryHeader = {
      filename: 'x.md',
      filePath: '/m/x.md',
      mtimeMs: 1000,
      description: 'kafka topic naming',
    };
    const headers = [
      { ...base, filename: 'c.md' },
      { ...base, filename: 'a.md' },
      { ...base, filename: 'b.md', mtimeMs: 2000 },
      ...Array.from({ length: 12 }, (_, i) => ({
        ...base,
        filename: `other${i}.md`,
        description: `unrelated ${i}`,
      })),
    ];
    const first = lexicalRank('kafka topics', headers).map((m) => m.header.filename);
    expect(first).toEqual(['b.md', 'a.md', 'c.md']);
    expect(lexicalRank('kafka topics', [...headers].reverse()).map((m) => m.header.filename)).toEqual(first);
    expect(lexicalRank('kafka topics', headers, { limit: 2 })).toHaveLength(2);
  });
});
