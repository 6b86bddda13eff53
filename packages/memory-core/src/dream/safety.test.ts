import { describe, expect, it } from 'vitest';
import { topicalTerms } from '../text/tokenize.js';
import { type DreamManifest, manifestEntry } from './manifest.js';
import { assessConsolidation, memoryKeywords } from './safety.js';

function mem(name: string, description: string, body: string, extra = ''): string {
  return `---\nname: ${name}\ndescription: ${description}\ntype: feedback\n${extra}---\n${body}\n`;
}

const FILES: Record<string, string> = {
  'pnpm.md': mem('Use pnpm', 'The user wants pnpm instead of npm for installs', 'Always pnpm.'),
  'pnpm-again.md': mem('Prefer pnpm', 'User prefers pnpm over npm for package installs', 'pnpm please.'),
  'tabs.md': mem('Tabs', 'Indent with tabs in Go and TypeScript files', 'Tabs, width 4.'),
  'deploy.md': mem('Deploy freeze', 'No deploys on Fridays after the March outage', 'Freeze Fridays.'),
  'team/oncall.md': mem('On-call rota', 'Weekly rotation posted in the ops channel', 'See #ops.'),
};

function manifest(files: Record<string, string>): DreamManifest {
  return Object.entries(files).map(([f, text]) => manifestEntry(f, text));
}

const INDEX =
  '- [Use pnpm](pnpm.md) — pnpm not npm\n- [Prefer pnpm](pnpm-again.md) — pnpm\n' +
  '- [Tabs](tabs.md) — tabs\n- [Deploy freeze](deploy.md) — no Friday deploys\n';

describe('assessConsolidation', () => {
  const before = manifest(FILES);

  it('accepts a merge of two duplicates (merged_from) and reports created/updated/deleted and index lines', () => {
    const after = manifest({
      ...FILES,
      'pnpm.md': mem(
        'Use pnpm',
        'The user wants pnpm, never npm, for installs',
        'Always pnpm.',
        'merged_from: [pnpm-again.md]\n',
      ),
      'pnpm-again.md': '',
      'style.md': mem('Style', 'Code style notes', 'Tabs.'),
    });
    const index =
      '- [Use pnpm](pnpm.md) — pnpm not npm\n- [Tabs](tabs.md) — tabs\n- [Deploy](deploy.md)\n- [Style](style.md)\n';
    const r = assessConsolidation({ before, after, indexContent: index, indexBefore: INDEX });
    expect(r).toMatchObject({
      ok: true,
      created: ['style.md'],
      updated: ['pnpm.md'],
      deleted: ['pnpm-again.md'],
      replaced: [{ file: 'pnpm-again.md', into: 'pnpm.md', evidence: 'merged_from' }],
      unreplacedDeleted: [],
      memoriesBefore: 5,
      memoriesAfter: 5,
      indexLinesBefore: 4,
      indexLinesAfter: 4,
      rebuildIndex: false,
    });
  });

  it('recognises a merge by word overlap without any hint', () => {
    const after = manifest({
      ...FILES,
      'pnpm.md': mem(
        'Use pnpm',
        'The user wants pnpm over npm for package installs',
        'User prefers pnpm. Always pnpm.',
      ),
    }).filter((e) => e.file !== 'pnpm-again.md');
    const r = assessConsolidation({ before, after, indexContent: INDEX });
    expect(r.replaced).toEqual([
      expect.objectContaining({ file: 'pnpm-again.md', into: 'pnpm.md', evidence: 'overlap' }),
    ]);
    expect(r.ok).toBe(true);
  });

  it('refuses a run that deletes every memory and empties the index', () => {
    const after = manifest(Object.fromEntries(Object.keys(FILES).map((f) => [f, ''])));
    const r = assessConsolidation({ before, after, indexContent: '', indexBefore: INDEX });
    expect(r.ok).toBe(false);
    expect(r.code).toBe('TOO_MANY_DELETED');
    expect(r.reason).toMatch(/deleted 5 of 5 memories \(100%, limit 50%\)/);
    expect(r.unreplacedDeleted).toHaveLength(5);
  });

  it('refuses an empty, unparseable or dangling index while memories exist', () => {
    const after = manifest(FILES);
    expect(assessConsolidation({ before, after, indexContent: '  \n' })).toMatchObject({
      ok: false,
      code: 'INDEX_EMPTY',
    });
    expect(
      assessConsolidation({ before, after, indexContent: 'I consolidated everything, all good.' }),
    ).toMatchObject({ ok: false, code: 'INDEX_UNPARSEABLE' });
    expect(
      assessConsolidation({ before, after, indexContent: '- [Gone](gone.md) — nothing here\n' }),
    ).toMatchObject({ ok: false, code: 'INDEX_DANGLING' });
  });

  it('lets a run build the index when there was none before, and asks for pointers to be rebuilt', () => {
    const r = assessConsolidation({ before, after: manifest(FILES), indexContent: '', indexBefore: '' });
    expect(r).toMatchObject({ ok: true, rebuildIndex: true });
  });

  it('allows unreplaced deletions up to the share and refuses beyond it', () => {
    const without = (...gone: string[]) => manifest(FILES).filter((e) => !gone.includes(e.file));
    // 2 of 5 (40%) deleted without a trace: allowed at the default 50%.
    const two = assessConsolidation({ before, after: without('tabs.md', 'deploy.md'), indexContent: INDEX });
    expect(two).toMatchObject({ ok: true, unreplacedDeleted: ['deploy.md', 'tabs.md'] });
    // 3 of 5 (60%): refused.
    const three = assessConsolidation({
      before,
      after: without('tabs.md', 'deploy.md', 'team/oncall.md'),
      indexContent: INDEX,
    });
    expect(three).toMatchObject({ ok: false, code: 'TOO_MANY_DELETED' });
    // A stricter share refuses the two as well.
    expect(
      assessConsolidation({
        before,
        after: without('tabs.md', 'deploy.md'),
        indexContent: INDEX,
        maxDeletedShare: 0.3,
      }).ok,
    ).toBe(false);
  });

  it('does not take an unrelated surviving file as the home of a deleted memory', () => {
    const after = manifest({ 'tabs.md': FILES['tabs.md']! });
    const r = assessConsolidation({ before, after, indexContent: '- [Tabs](tabs.md)\n' });
    expect(r.replaced).toEqual([]);
    expect(r.ok).toBe(false);
  });

  it('ignores files that were already empty before the run', () => {
    const withEmpty = manifest({ ...FILES, 'blank.md': '\n' });
    const r = assessConsolidation({ before: withEmpty, after: manifest(FILES), indexContent: INDEX });
    expect(r).toMatchObject({ ok: true, deleted: [], memoriesBefore: 5 });
  });
});

describe('keywords', () => {
  it('compares memories through the shared tokenizer: stop words, short tokens out, CJK as pairs', () => {
    // "wants" stems to the stop word "want"; the CJK run and the Latin word are tokenised separately.
    expect(topicalTerms('The user wants pnpm for all of it')).toEqual(['user', 'pnpm']);
    expect(topicalTerms('使用pnpm安装')).toEqual(['使用', 'pnpm', '安装']);
  });

  it('tops name+description up from the body when they are thin', () => {
    const k = memoryKeywords({
      name: 'X',
      description: '',
      text: '---\nname: X\n---\nDeploy freeze on Fridays',
    });
    expect([...k]).toEqual(['deploy', 'freez', 'friday']); // stemmed, as recall compares them
  });
});
