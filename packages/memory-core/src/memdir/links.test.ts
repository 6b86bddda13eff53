import { describe, expect, it } from 'vitest';
import { parseMemoryLinks } from './links.js';

describe('parseMemoryLinks', () => {
  it('returns distinct slugs in order of first appearance, aliases dropped, trimmed', () => {
    const md =
      'See [[deploy-checklist]] and [[ rollback | how to roll back ]], then [[deploy-checklist]] again.\n[[db/migrations]]';
    expect(parseMemoryLinks(md)).toEqual(['deploy-checklist', 'rollback', 'db/migrations']);
  });

  it('ignores links in fenced code blocks and inline code spans', () => {
    const md = [
      'Real: [[a]]',
      '```md',
      'not a link: [[b]]',
      '```',
      'Inline `[[c]]` and ``code with ` and [[d]]`` but [[e]] counts',
      '~~~',
      '[[f]]',
      '~~~',
      '[[g]]',
    ].join('\n');
    expect(parseMemoryLinks(md)).toEqual(['a', 'e', 'g']);
  });

  it('treats an unclosed fence as running to the end and an unclosed backtick as text', () => {
    expect(parseMemoryLinks('[[a]]\n```\n[[b]]')).toEqual(['a']);
    expect(parseMemoryLinks('a ` b [[c]]')).toEqual(['c']);
  });

  it('finds nothing in text without well-formed links', () => {
    expect(parseMemoryLinks('')).toEqual([]);
    expect(parseMemoryLinks('[[ ]] [[]] [single] [[a\nb]] [[x|]]')).toEqual(['x']);
  });
});
