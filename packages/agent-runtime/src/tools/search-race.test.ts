import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBoundedContext } from '../fixtures.test-helpers.js';
import { type ReadBoundary, rootsBoundary } from '../sandbox/read-boundary.js';
import { type SandboxStatus, sandboxStatus } from '../sandbox/sandbox.js';
import { globTool } from './glob.js';
import { runGrep } from './grep.js';
import { ToolError } from './tool.js';

// Grep and Glob while another process (the tenant's own Bash, say) flips a directory of its workspace
// between a real directory and a link to another tenant's tree, as fast as it can. Nothing of the other
// tenant may come back in any of >= 1,000 calls, whether the flipped directory is the search root or a
// directory below it; and the calls that ran while it was a real directory found the tenant's own file
// (positive control: the race ran both ways).

let base: string;
let mine: string;
let theirs: string;
let boundary: ReadBoundary;
let sandbox: SandboxStatus;

beforeAll(async () => {
  base = await fs.realpath(await fs.mkdtemp(join(tmpdir(), 'search-race-')));
  mine = join(base, 'tenant-a');
  theirs = join(base, 'tenant-b');
  await fs.mkdir(mine, { recursive: true });
  await fs.mkdir(join(theirs, 'deeper'), { recursive: true });
  await fs.writeFile(join(theirs, 'f.md'), 'TOKEN theirs\n');
  await fs.writeFile(join(theirs, 'only-theirs.md'), 'TOKEN theirs\n');
  await fs.writeFile(join(theirs, 'deeper', 'g.md'), 'TOKEN theirs deeper\n');
  boundary = await rootsBoundary([mine]);
  sandbox = await sandboxStatus();
});
afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

/**
 * Flips `mine/<name>` between a directory holding f.md ("TOKEN mine") and a link to the other tenant,
 * atomically (renameat2 RENAME_EXCHANGE: the name is always one or the other, never missing).
 */
function flipper(name: string) {
  const script = [
    'import ctypes, os, sys',
    'libc = ctypes.CDLL(None, use_errno=True)',
    `os.chdir(${JSON.stringify(mine)})`,
    `name = ${JSON.stringify(name)}`,
    'a, b = name.encode(), (name + ".link").encode()',
    'while True:',
    '    if libc.renameat2(-100, a, -100, b, 2) != 0: sys.exit(ctypes.get_errno())',
  ].join('\n');
  return spawn('python3', ['-c', script], { stdio: 'ignore' });
}

interface Tally {
  escapes: number;
  /** Calls that found the tenant's own f.md. */
  own: number;
  /** Calls refused because the root was the link when it was opened. */
  refused: number;
  /** Calls that found nothing (the directory below the root was the link when rg or the walk reached it). */
  other: number;
}

/**
 * Runs `call` `attempts` times while `name` flips, then on (up to ten times as many calls) until `seen` holds
 * of the tally: the window some outcomes need (a flip between a listing and the open of what it listed) is a
 * few microseconds, and on a loaded machine 1,000 calls can all miss it.
 */
async function race(
  name: string,
  attempts: number,
  call: () => Promise<string>,
  seen: (tally: Tally) => boolean = () => true,
): Promise<Tally> {
  await fs.mkdir(join(mine, name), { recursive: true });
  await fs.writeFile(join(mine, name, 'f.md'), 'TOKEN mine\n');
  await fs.symlink(theirs, join(mine, `${name}.link`));
  const flip = flipper(name);
  const tally: Tally = { escapes: 0, own: 0, refused: 0, other: 0 };
  try {
    await new Promise((r) => setTimeout(r, 200));
    for (let i = 0; i < attempts || (!seen(tally) && i < attempts * 10); i++) {
      let out: string;
      try {
        out = await call();
      } catch (e) {
        if (!(e instanceof ToolError)) throw e;
        // rg's error for a directory that turned into a link while it was listing it: found nothing.
        if (e.code === 'GREP_FAILED') tally.other++;
        else if (e.code === 'OUTSIDE_BOUNDARY') tally.refused++;
        else throw e;
        continue;
      }
      if (/theirs|only-theirs|deeper|g\.md/.test(out)) tally.escapes++;
      else if (out.includes('f.md') || out.includes('mine')) tally.own++;
      else tally.other++;
    }
  } finally {
    flip.kill('SIGKILL');
  }
  return tally;
}

/** The root's race ran both ways: some calls found the tenant's file, some were refused the link. */
const rootBothWays = (t: Tally) => t.own > 0 && t.refused > 0;
/** The race below the root ran both ways: some calls found the tenant's file, some found the link instead. */
const bothWays = (t: Tally) => t.own > 0 && t.other > 0;

const ctx = () => ({ ...readBoundedContext(mine, boundary), readBoundary: boundary });

describe('Grep while a directory flips between the tenant and a link to another tenant', () => {
  for (const mode of ['files_with_matches', 'content'] as const) {
    it(`the search root flips (${mode}): 0 escapes in 1,000 calls, 500 in the search jail and 500 on the plain descriptor`, async () => {
      for (const jail of [true, false]) {
        const tally = await race(
          `root-${mode}-${jail}`,
          500,
          async () =>
            (
              await runGrep({ pattern: 'TOKEN', path: `root-${mode}-${jail}`, output_mode: mode }, ctx(), {
                jail,
                sandbox,
              })
            ).content,
          rootBothWays,
        );
        expect(tally.escapes).toBe(0);
        expect(tally.own).toBeGreaterThan(0);
        expect(tally.refused).toBeGreaterThan(0);
      }
    }, 240_000);
  }

  it.skipIf(process.platform !== 'linux')(
    'a directory below the root flips while rg walks (in the search jail): 0 escapes in 1,000 calls',
    async () => {
      if (!sandbox.available) {
        // Without the OS sandbox no unattended tool can create a link (Bash is denied), so this race has no
        // actor; the jail is what confines rg, and it needs bubblewrap.
        expect(sandbox.reason).toBeTruthy();
        return;
      }
      const tally = await race(
        'below/d',
        1000,
        async () => {
          const input = { pattern: 'TOKEN', path: 'below', output_mode: 'content' } as const;
          const out = await runGrep(input, ctx(), { jail: true, sandbox });
          return out.content;
        },
        bothWays,
      );
      expect(tally.escapes).toBe(0);
      expect(tally.own).toBeGreaterThan(0);
      expect(tally.other).toBeGreaterThan(0);
    },
    240_000,
  );
});

describe('Glob while a directory flips between the tenant and a link to another tenant', () => {
  it('the root flips, and a directory below the root flips: 0 escapes in 1,000 calls each', async () => {
    const atRoot = await race(
      'groot',
      1000,
      async () => String((await globTool.call({ pattern: '**/*.md', path: 'groot' }, ctx())).content),
      rootBothWays,
    );
    expect(atRoot.escapes).toBe(0);
    expect(atRoot.own).toBeGreaterThan(0);
    expect(atRoot.refused).toBeGreaterThan(0);
    const below = await race(
      'gbelow/d',
      1000,
      async () => String((await globTool.call({ pattern: '**/*.md', path: 'gbelow' }, ctx())).content),
      bothWays,
    );
    expect(below.escapes).toBe(0);
    expect(below.own).toBeGreaterThan(0);
    expect(below.other).toBeGreaterThan(0);
  }, 240_000);
});
