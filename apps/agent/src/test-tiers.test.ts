import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { END_TO_END_SUITES, FAST_LOOP_PACKAGES } from '../../../vitest.shared.js';

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

  it('every workspace that has tests runs them in the fast loop too (a vitest.config.ts its projects pick up)', () => {
    const globs: readonly string[] = FAST_LOOP_PACKAGES;
    const missing: string[] = [];
    for (const group of ['packages', 'apps']) {
      for (const name of readdirSync(join(ROOT, group))) {
        const manifest = join(ROOT, group, name, 'package.json');
        if (!existsSync(manifest)) continue;
        const scripts = (JSON.parse(readFileSync(manifest, 'utf8')) as { scripts?: Record<string, string> })
          .scripts;
        if (!scripts?.test) continue;
        const config = `${group}/${name}/vitest.config.ts`;
        const picked = globs.some((glob) => glob === `${group}/*/vitest.config.ts` || glob === config);
        if (!existsSync(join(ROOT, config)) || !picked) missing.push(`${group}/${name}`);
      }
    }
    expect(globs.length).toBeGreaterThan(0);
    expect(missing).toEqual([]);
  });
});
