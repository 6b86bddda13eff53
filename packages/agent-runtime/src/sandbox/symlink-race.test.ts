import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startRaceLoop } from '@engram/testkit/race-loop';
import { describe, expect, it } from 'vitest';
import {
  jailLayout,
  listing,
  readBoundedContext,
  sandboxContext,
  useTempDirs,
  useTenantPair,
} from '../fixtures.test-helpers.js';
import { readTool } from '../tools/read.js';
import { ToolError } from '../tools/tool.js';
import { writeTool } from '../tools/write.js';
import type { ReadBoundary } from './read-boundary.js';
import { createToolSandbox } from './unattended.js';

// The write jail and the read boundary against another process that flips a symlink between inside and outside
// as fast as it can, hundreds of times over (an end-to-end suite: `END_TO_END_SUITES`, soak). The checks these
// races repeat are unit-tested one case at a time in jailed-write.test.ts and read-boundary.test.ts.

const { tempDir } = useTempDirs();

describe('writeFileJailed', () => {
  it('lands nothing outside while a symlink is flipped in a loop during 400 writes through the Write tool', async () => {
    const { mem, outside } = jailLayout(await tempDir());
    const sandbox = await createToolSandbox({ root: mem, bash: 'read-only' });
    const ctx = sandboxContext(sandbox, mem);
    // Another process swaps mem/sub between a real directory and a link to outside/, and mem/f.md between
    // a regular file and a link to outside/target.md, as fast as it can.
    const flipper = startRaceLoop(
      `cd '${mem}'; while :; do rm -rf sub; ln -s '${outside}' sub; rm -f sub; mkdir sub; ` +
        `rm -f f.md; ln -s '${outside}/target.md' f.md; rm -f f.md; echo x > f.md; done`,
    );
    let written = 0;
    let refused = 0;
    try {
      for (let i = 0; i < 400; i++) {
        const file_path = i % 2 === 0 ? join(mem, 'sub', 'target.md') : join(mem, 'f.md');
        try {
          // The model "has read" the file: only the jail decides.
          ctx.readFileState.set(file_path, { mtimeMs: Number.MAX_SAFE_INTEGER });
          await writeTool.call({ file_path, content: `pwned ${i}\n` }, ctx);
          written++;
        } catch {
          refused++;
        }
      }
    } finally {
      await flipper.stop();
    }
    expect(written + refused).toBe(400);
    expect(written).toBeGreaterThan(0);
    expect(readFileSync(join(outside, 'target.md'), 'utf8')).toBe('untouched\n');
    expect(listing(outside)).toEqual(['target.md']);
  });
});

describe('Read with a read boundary', () => {
  const tenants = useTenantPair();

  const ctxFor = (readBoundary?: ReadBoundary) => readBoundedContext(tenants.mine, readBoundary);

  it('a symlink flipped between inside and another tenant while Read runs: 0 escapes in 1,000 reads', async () => {
    const target = join(tenants.mine, 'flip.md');
    const inside = join(tenants.mine, 'own.md');
    const outside = join(tenants.theirs, 'secret.md');
    // The flipper is another process: it swaps the link's target as fast as it can (rename is atomic).
    const flipper = startRaceLoop(
      `while :; do ln -sfn "${inside}" "${target}.i" && mv -fT "${target}.i" "${target}"; ln -sfn "${outside}" "${target}.o" && mv -fT "${target}.o" "${target}"; done`,
      'sh',
    );
    try {
      let escapes = 0;
      let ok = 0;
      let refused = 0;
      for (let i = 0; i < 1000; i++) {
        try {
          const out = await readTool.call({ file_path: target }, ctxFor(tenants.boundary));
          if (String(out.content).includes('THEIRS')) escapes++;
          else ok++;
        } catch (e) {
          if (!(e instanceof ToolError)) throw e;
          refused++;
        }
      }
      expect(escapes).toBe(0);
      // Positive control: the race really ran both ways (reads inside succeeded, the outside ones refused).
      expect(ok).toBeGreaterThan(0);
      expect(refused).toBeGreaterThan(0);
    } finally {
      await flipper.stop();
    }
  }, 120_000);
});
