import { describe, expect, it } from 'vitest';
import { BASH_ATTACKS as ATTACKS, BASH_READ_ONLY as READ_ONLY } from './bash-corpus.test-helpers.js';
import { explainBashCommand, isReadOnlyBashCommand } from './bash-readonly.js';

describe('the classifier against attack classes', () => {
  const cases = Object.entries(ATTACKS).flatMap(([group, lines]) => lines.map((line) => [group, line]));

  it('covers every class with a few hundred lines', () => {
    expect(Object.keys(ATTACKS).length).toBeGreaterThanOrEqual(12);
    expect(cases.length).toBeGreaterThanOrEqual(250);
  });

  it.each(cases)('%s: %s is not read-only', (_group, line) => {
    expect(isReadOnlyBashCommand(line)).toBe(false);
    expect(explainBashCommand(line)).toEqual(expect.any(String));
  });

  it('stays not read-only behind read-only commands and inside subshells', () => {
    const wrap = [
      (w: string) => `ls && ${w}`,
      (w: string) => `(${w})`,
      (w: string) => `cat f | ${w}`,
      (w: string) => `git status; ${w}`,
    ];
    const composed = cases
      .map(([, line]) => line!)
      .filter((line) => !line.includes('\n') && !line.includes('"unterminated'))
      .flatMap((line) => wrap.map((f) => f(line)));
    expect(composed.filter((line) => isReadOnlyBashCommand(line))).toEqual([]);
  });
});

describe('the classifier on ordinary read-only command lines', () => {
  it('has at least 100 of them', () => {
    expect(READ_ONLY.length).toBeGreaterThanOrEqual(100);
  });

  it.each(READ_ONLY)('%s is read-only', (line) => {
    expect(explainBashCommand(line)).toBeUndefined();
  });
});

describe('the reasons it gives', () => {
  it('names the option an abbreviation resolves to', () => {
    expect(explainBashCommand('git branch --unset')).toMatch(/unset-upstream/);
    expect(explainBashCommand('tree -Co out')).toMatch(/-o: writes its output to a file/);
    expect(explainBashCommand("sed $'\\x2di' s/a/b/ f")).toMatch(/ANSI-C quoting/);
    expect(explainBashCommand("test -v 'a[$(id)]'")).toMatch(/test -v/);
    expect(explainBashCommand('git -c core.pager=id log')).toMatch(/-c sets configuration/);
    expect(explainBashCommand('rm x')).toBe('`rm` is not a known read-only command');
  });
});
