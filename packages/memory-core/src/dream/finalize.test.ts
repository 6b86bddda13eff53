import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import { finalizeConsolidation } from './finalize.js';
import { readDreamManifest } from './manifest.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe('finalizeConsolidation and the manifest', () => {
  it('removes emptied files and their index lines, and adds missing pointers for written files', async () => {
    const t = makeTempDir();
    cleanups.push(t.cleanup);
    const dir = join(t.dir, 'memory');
    mkdirSync(join(dir, 'team'), { recursive: true });
    mkdirSync(join(dir, '.history', 'x'), { recursive: true });
    writeFileSync(join(dir, '.history', 'x', 'old.md'), 'snapshot copy');
    writeFileSync(join(dir, 'MEMORY.md'), '# Index\n- [Keep](keep.md) — kept\n- [Gone](gone.md) — merged\n');
    writeFileSync(join(dir, 'keep.md'), '---\nname: Keep\ndescription: kept\nmerged_from: gone\n---\nk\n');
    writeFileSync(join(dir, 'gone.md'), '  \n');
    writeFileSync(
      join(dir, 'new.md'),
      '---\nname: New one\ndescription: fresh fact\ntype: project\n---\nn\n',
    );
    writeFileSync(join(dir, 'team', 'MEMORY.md'), '- [Old team](old.md) — x\n');
    writeFileSync(join(dir, 'team', 'old.md'), '');

    const manifest = await readDreamManifest(dir);
    expect(manifest.map((e) => e.file)).toEqual(['gone.md', 'keep.md', 'new.md', 'team/old.md']);
    expect(manifest.find((e) => e.file === 'keep.md')?.mergedFrom).toEqual(['gone.md']);
    expect(manifest.find((e) => e.file === 'gone.md')?.empty).toBe(true);

    const result = await finalizeConsolidation(dir, {
      deleted: ['gone.md', 'team/old.md'],
      created: ['new.md'],
      updated: ['keep.md'],
      rebuildIndex: false,
    });
    expect(result).toEqual({
      removedFiles: ['gone.md', 'team/old.md'],
      indexLinesRemoved: 2,
      pointersAdded: ['new.md'],
      linksRewritten: [],
      indexLinesAfter: 3,
    });
    expect(existsSync(join(dir, 'gone.md'))).toBe(false);
    expect(readFileSync(join(dir, 'MEMORY.md'), 'utf8')).toBe(
      '# Index\n- [Keep](keep.md) — kept\n- [New one](new.md) — fresh fact\n',
    );
    expect(readFileSync(join(dir, 'team', 'MEMORY.md'), 'utf8')).toBe('');
    expect(existsSync(join(dir, '.history', 'x', 'old.md'))).toBe(true);
  });

  it('reports an index over its line cap', async () => {
    const t = makeTempDir();
    cleanups.push(t.cleanup);
    const dir = join(t.dir, 'memory');
    mkdirSync(dir, { recursive: true });
    const lines = Array.from({ length: 201 }, (_, i) => `- [M${i}](m${i}.md) — memory ${i}`);
    writeFileSync(join(dir, 'MEMORY.md'), `${lines.join('\n')}\n`);
    const result = await finalizeConsolidation(dir, {
      deleted: [],
      created: [],
      updated: [],
      rebuildIndex: false,
    });
    expect(result).toMatchObject({ indexLinesAfter: 201, indexOverflow: 'lines' });
  });

  it('keeps a "deleted" file that has content again, and rebuilds pointers for every survivor on request', async () => {
    const t = makeTempDir();
    cleanups.push(t.cleanup);
    const dir = join(t.dir, 'memory');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'a.md'), '---\nname: A\ndescription: alpha\n---\na\n');
    writeFileSync(join(dir, 'b.md'), '---\nname: B\ndescription: beta\n---\nb\n');
    const result = await finalizeConsolidation(
      dir,
      { deleted: ['a.md'], created: [], updated: [], rebuildIndex: true },
      { survivors: ['a.md', 'b.md'] },
    );
    expect(result.removedFiles).toEqual([]);
    expect(result.pointersAdded.sort()).toEqual(['a.md', 'b.md']);
    expect(existsSync(join(dir, 'a.md'))).toBe(true);
  });

  it('keeps [[links]] valid after a run that renamed, merged and deleted memories', async () => {
    const t = makeTempDir();
    cleanups.push(t.cleanup);
    const dir = join(t.dir, 'memory');
    mkdirSync(dir, { recursive: true });
    const fm = (name: string, extra = '') =>
      `---\nname: ${name}\ndescription: "d"\nmetadata:\n  type: feedback${extra}\n---\n`;
    writeFileSync(
      join(dir, 'MEMORY.md'),
      '- [a](a.md) — a\n- [b](b.md) — b\n- [c](c.md) — c\n- [e](e.md) — e\n',
    );
    writeFileSync(join(dir, 'a.md'), `${fm('testing')}Real DB.\n`);
    writeFileSync(join(dir, 'b.md'), `${fm('pnpm-only')}Use pnpm.\n`);
    writeFileSync(join(dir, 'c.md'), `${fm('old-freeze')}Freeze.\n`);
    writeFileSync(join(dir, 'e.md'), `${fm('tooling')}Tools.\n`);
    writeFileSync(
      join(dir, 'hub.md'),
      `${fm('hub')}See [[testing]], [[pnpm-only|package manager]], [[old-freeze]], \`[[testing]]\` and [[future-note]].\n`,
    );
    const before = await readDreamManifest(dir);
    // The run: renames a's slug, folds b into e (merged_from), empties b and c.
    writeFileSync(join(dir, 'a.md'), `${fm('testing-policy')}Real DB.\n`);
    writeFileSync(join(dir, 'e.md'), `${fm('tooling', '\nmerged_from: [b.md]')}Tools. Use pnpm.\n`);
    writeFileSync(join(dir, 'b.md'), '');
    writeFileSync(join(dir, 'c.md'), '');
    const after = await readDreamManifest(dir);
    const hubBefore = readFileSync(join(dir, 'hub.md'), 'utf8');
    const result = await finalizeConsolidation(
      dir,
      {
        deleted: ['b.md', 'c.md'],
        created: [],
        updated: ['a.md', 'e.md'],
        rebuildIndex: false,
        replaced: [{ file: 'b.md', into: 'e.md', evidence: 'merged_from', coverage: 1 }],
      },
      { before, after },
    );
    expect(result.linksRewritten).toEqual(['hub.md']);
    expect(readFileSync(join(dir, 'hub.md'), 'utf8')).toBe(
      hubBefore.replace(
        'See [[testing]], [[pnpm-only|package manager]], [[old-freeze]],',
        'See [[testing-policy]], [[tooling|package manager]], old-freeze,',
      ),
    );
  });
});
