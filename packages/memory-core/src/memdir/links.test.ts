import { describe, expect, it } from 'vitest';
import { findMemoryLinks, parseMemoryLinks, rewriteMemoryLinks } from './links.js';

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
