import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODE_PATTERN } from './engram-error.js';

// The repository's rule, checked on its sources: every error class is an EngramError (so its code and
// retryable are fields the worker's retry decision can read), and every code is spelled one way.

const root = resolve(import.meta.dirname, '../../..');

function sources(): string[] {
  const out: string[] = [];
  for (const group of ['packages', 'apps']) {
    for (const ws of readdirSync(join(root, group))) {
      const walk = (dir: string) => {
        let entries: import('node:fs').Dirent[];
        try {
          entries = readdirSync(dir, { withFileTypes: true });
        } catch {
          return;
        }
        for (const e of entries) {
          const p = join(dir, e.name);
          if (e.isDirectory()) walk(p);
          else if (/\.tsx?$/.test(e.name) && !/\.(test|test-helpers)\.tsx?$/.test(e.name)) out.push(p);
        }
      };
      walk(join(root, group, ws, 'src'));
    }
  }
  return out;
}

describe('one error type', () => {
  const files = sources().map((p) => ({ path: relative(root, p), text: readFileSync(p, 'utf8') }));

  it('finds the sources (a positive control: the scan sees EngramError itself)', () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files.some((f) => /class EngramError extends Error\b/.test(f.text))).toBe(true);
  });

  it('no error class extends Error directly but EngramError', () => {
    const offenders = files.flatMap((f) =>
      [...f.text.matchAll(/class (\w+) extends Error\b/g)]
        .map((m) => m[1]!)
        .filter((name) => name !== 'EngramError')
        .map((name) => `${f.path}: ${name}`),
    );
    expect(offenders).toEqual([]);
  });

  it('every code literal given to an EngramError is upper snake case', () => {
    const bad: string[] = [];
    // Classes whose constructor takes the code first (`new ToolError('NOT_FOUND', …)`), anywhere in the tree.
    const takesCode = new Set(['EngramError', 'PermanentJobError']);
    for (const f of files)
      for (const m of f.text.matchAll(
        /class (\w+) extends \w+ \{[\s\S]*?constructor\(\s*(?:readonly\s+)?code\b/g,
      ))
        takesCode.add(m[1]!);
    const named = [...takesCode].join('|');
    for (const f of files)
      for (const m of f.text.matchAll(new RegExp(`new (?:${named})\\(\\s*'([^']*)'`, 'g')))
        if (!ERROR_CODE_PATTERN.test(m[1]!)) bad.push(`${f.path}: ${m[1]}`);
    expect(takesCode.has('ToolError')).toBe(true); // a positive control: the scan finds the classes
    for (const f of files) {
      if (!/extends (EngramError|PermanentJobError)\b|new (EngramError|PermanentJobError)\(/.test(f.text))
        continue;
      // super('CODE', …) and new EngramError('CODE', …) / new PermanentJobError('CODE', …)
      for (const m of f.text.matchAll(/(?:super|new (?:EngramError|PermanentJobError))\(\s*'([^']*)'/g))
        if (!ERROR_CODE_PATTERN.test(m[1]!)) bad.push(`${f.path}: ${m[1]}`);
      // readonly code: 'A' | 'B' (a class's declared code set)
      for (const m of f.text.matchAll(/readonly code(?:\??):\s*((?:\|?\s*'[^']*'\s*)+)/g))
        for (const lit of m[1]!.matchAll(/'([^']*)'/g))
          if (!ERROR_CODE_PATTERN.test(lit[1]!)) bad.push(`${f.path}: ${lit[1]}`);
    }
    expect(bad).toEqual([]);
  });
});
