import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { END_TO_END_SUITES } from '../../../vitest.shared.js';

// `npm run test:fast` leaves out the end-to-end tier by path: a renamed or moved suite must not silently join
// the fast loop (or vanish from the list), and no workspace's suites may drop out of it unnoticed.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

describe('test tiers', () => {
  it('every end-to-end suite the fast loop leaves out exists', () => {
    for (const path of END_TO_END_SUITES) expect(existsSync(join(ROOT, path)), path).toBe(true);
  });

  it('every suite that runs the built CLI or workers is in the end-to-end tier (the fast loop does not build)', () => {
    const listed = new Set<string>(END_TO_END_SUITES);
    const needsBuild: string[] = [];
    for (const group of ['packages', 'apps']) {
      for (const name of readdirSync(join(ROOT, group))) {
        const src = join(ROOT, group, name, 'src');
        if (!existsSync(src)) continue;
        for (const file of readdirSync(src, { recursive: true }).map(String)) {
          const path = `${group}/${name}/src/${file}`;
          // (This file names the markers it looks for.)
          if (!file.endsWith('.test.ts') || path === 'apps/agent/src/test-tiers.test.ts') continue;
          if (
            /\b(ENGRAM_BIN|WORKER_BIN|assertBuilt|assertWorkerBuilt)\b/.test(
              readFileSync(join(ROOT, path), 'utf8'),
            )
          )
            needsBuild.push(path);
        }
      }
    }
    expect(needsBuild.length).toBeGreaterThan(5);
    expect(needsBuild.filter((path) => !listed.has(path))).toEqual([]);
  });

  it('every workspace that has tests runs them in the fast loop too (a `test:fast` script beside `test`)', () => {
    const missing: string[] = [];
    for (const group of ['packages', 'apps']) {
      for (const name of readdirSync(join(ROOT, group))) {
        const manifest = join(ROOT, group, name, 'package.json');
        if (!existsSync(manifest)) continue;
        const scripts = (JSON.parse(readFileSync(manifest, 'utf8')) as { scripts?: Record<string, string> })
          .scripts;
        if (scripts?.test && !scripts['test:fast']) missing.push(`${group}/${name}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
