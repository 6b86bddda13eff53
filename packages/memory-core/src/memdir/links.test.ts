import { describe, expect, it } from 'vitest';
import {
  findMemoryLinks,
  memoryLinkReport,
  parseMemoryLinks,
  planLinkRenames,
  rewriteMemoryLinks,
  slugIndex,
} from './links.js';

describe('parseMemoryLinks', () => {
  it('returns distinct trimmed slugs in order of first appearance, alias form included', () => {
    const body =
      'See [[testing-policy]] and [[ db-setup |the database]].\nAgain [[testing-policy]], then [[not-yet]].';
    expect(parseMemoryLinks(body)).toEqual(['testing-policy', 'db-setup', 'not-yet']);
  });

  it('ignores links inside fenced code blocks and inline code spans', () => {
    const body = [
      'Real [[one]].',
      '```md',
      '[[fenced]]',
      '```',
      'Inline `[[span]]` and ``a `[[double]]` b`` then [[two]].',
      '~~~~',
      '[[tilde]]',
      '~~~',
      'still fenced [[tilde-two]]',
      '~~~~',
      'after [[three]]',
    ].join('\n');
    expect(parseMemoryLinks(body)).toEqual(['one', 'two', 'three']);
  });

  it('treats an unclosed backtick as literal and an unclosed fence as running to the end', () => {
    expect(parseMemoryLinks('a ` b [[kept]]')).toEqual(['kept']);
    expect(parseMemoryLinks('x [[a]]\n```\n[[b]]')).toEqual(['a']);
  });

  it('ignores empty and multi-line brackets', () => {
    expect(parseMemoryLinks('[[ ]] [[a\nb]] [[]]')).toEqual([]);
  });
});

describe('rewriteMemoryLinks', () => {
  it('renames only the link tokens and keeps every other byte', () => {
    const body = 'Keep `[[old]]` as code.\n- see [[old]] and [[old|alias]] and [[other]]\n';
    const out = rewriteMemoryLinks(body, new Map([['old', 'new']]));
    expect(out).toBe('Keep `[[old]]` as code.\n- see [[new]] and [[new|alias]] and [[other]]\n');
  });

  it('unlinks a deleted target to its alias or slug text', () => {
    const out = rewriteMemoryLinks('a [[gone]] b [[gone|the thing]]', new Map([['gone', null]]));
    expect(out).toBe('a gone b the thing');
    expect(findMemoryLinks(out)).toEqual([]);
  });

  it('returns the input unchanged when nothing matches', () => {
    const body = 'no [[match]] here';
    expect(rewriteMemoryLinks(body, new Map([['x', 'y']]))).toBe(body);
  });
});

describe('memoryLinkReport', () => {
  const memories = [
    {
      file: 'no-database-mocks.md',
      name: 'no-database-mocks',
      body: 'See [[testing-policy]] and [[db-setup]].',
    },
    { file: 'feedback_testing.md', name: 'testing-policy', body: 'Real DB. Related: [[no-database-mocks]]' },
    { file: 'deploy.md', body: 'Freeze; tests per [[testing-policy|the policy]].' },
    { file: 'notes/db.md', name: 'Database notes', body: '`[[testing-policy]]` is only code here.' },
  ];

  it('resolves links by name (then file name), lists backlinks and flags dangling links', () => {
    expect(memoryLinkReport('no-database-mocks.md', memories)).toEqual({
      links: [{ slug: 'testing-policy', file: 'feedback_testing.md' }, { slug: 'db-setup' }],
      backlinks: ['feedback_testing.md'],
      dangling: ['db-setup'],
    });
    expect(memoryLinkReport('feedback_testing.md', memories).backlinks).toEqual([
      'no-database-mocks.md',
      'deploy.md',
    ]);
    expect(slugIndex(memories).get('deploy')).toBe('deploy.md');
  });
});

describe('planLinkRenames', () => {
  it('renames on a name change and a merge, unlinks a deletion without successor, keeps live slugs', () => {
    const before = [
      { file: 'a.md', name: 'old-a', gone: false },
      { file: 'b.md', name: 'b-slug', gone: false },
      { file: 'c.md', name: 'c-slug', gone: false },
      { file: 'd.md', name: 'd-slug', gone: false },
    ];
    const after = [
      { file: 'a.md', name: 'new-a', gone: false },
      { file: 'b.md', gone: true },
      { file: 'c.md', gone: true },
      { file: 'd.md', name: 'd-slug', gone: false },
      { file: 'e.md', name: 'merged-e', gone: false },
    ];
    const plan = planLinkRenames(before, after, [{ file: 'b.md', into: 'e.md' }]);
    expect([...plan]).toEqual([
      ['old-a', 'new-a'],
      ['b-slug', 'merged-e'],
      ['c-slug', null],
    ]);
    expect(rewriteMemoryLinks('[[old-a]] [[b-slug]] [[c-slug|C]] [[d-slug]]', plan)).toBe(
      '[[new-a]] [[merged-e]] C [[d-slug]]',
    );
  });
});
