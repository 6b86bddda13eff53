import { describe, expect, it } from 'vitest';
import { djb2Hash, MAX_SANITIZED_LENGTH, sanitizePath } from './sanitize.js';

describe('sanitizePath', () => {
  it('replaces every character outside [A-Za-z0-9] with "-" (the Claude Code project-dir name)', () => {
    expect(sanitizePath('/Users/foo/my-project')).toBe('-Users-foo-my-project');
    expect(sanitizePath('/home/u/a_b.c d')).toBe('-home-u-a-b-c-d');
    expect(sanitizePath('C:\\Users\\x')).toBe('C--Users-x');
  });

  it('maps each UTF-16 code unit of non-ASCII text to its own "-"', () => {
    expect(sanitizePath('/tmp/café')).toBe('-tmp-caf-');
    expect(sanitizePath('/tmp/😀')).toBe('-tmp---');
  });

  it('keeps names of up to 200 characters whole', () => {
    const value = `/${'a'.repeat(MAX_SANITIZED_LENGTH - 1)}`;
    expect(sanitizePath(value)).toBe(`-${'a'.repeat(199)}`);
  });

  it('cuts longer names to 200 characters and appends "-" + base-36 |djb2| of the original', () => {
    const value = `/${'b'.repeat(250)}`;
    const expected = `-${'b'.repeat(199)}-${Math.abs(djb2Hash(value)).toString(36)}`;
    expect(sanitizePath(value)).toBe(expected);
  });

  it('gives long paths that share their first 200 characters different names', () => {
    const prefix = `/${'c'.repeat(220)}`;
    expect(sanitizePath(`${prefix}/one`)).not.toBe(sanitizePath(`${prefix}/two`));
  });
});

describe('djb2Hash', () => {
  it('is the seed-0, ×31 string hash wrapped to a signed 32-bit integer', () => {
    expect(djb2Hash('')).toBe(0);
    expect(djb2Hash('a')).toBe(97);
    expect(djb2Hash('ab')).toBe(97 * 31 + 98);
    // wraps instead of growing
    const long = djb2Hash('x'.repeat(1000));
    expect(Number.isInteger(long)).toBe(true);
    expect(long).toBeGreaterThanOrEqual(-(2 ** 31));
    expect(long).toBeLessThan(2 ** 31);
  });
});
