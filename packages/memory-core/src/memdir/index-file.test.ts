import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import {
  applyIndexRemove,
  applyIndexRetitle,
  applyIndexUpsert,
  formatIndexLine,
  indexLinesLinkingTo,
  indexLinksTo,
  loadMemoryIndex,
  MAX_ENTRYPOINT_CHARS,
  MAX_ENTRYPOINT_LINES,
  MAX_INDEX_LINE_CHARS,
  MemoryIndexError,
  parseIndexEntries,
  removeIndexEntry,
  truncateEntrypoint,
  upsertIndexEntry,
} from './index-file.js';

const entry = (i: number) => `- [Memory ${i}](memory-${i}.md) — hook ${i}`;
const lines = (n: number) => Array.from({ length: n }, (_, i) => entry(i + 1)).join('\n');
const WARNING_SPLIT = '\n\n> WARNING: ';

function keptPart(content: string): string {
  const at = content.indexOf(WARNING_SPLIT);
  return at === -1 ? content : content.slice(0, at);
}

describe('truncateEntrypoint: the 200-line cap', () => {
  it('leaves 199 lines alone', () => {
    const result = truncateEntrypoint(lines(199));
    expect(result).toEqual({ content: lines(199) });
  });

  it('leaves exactly 200 lines alone', () => {
    const result = truncateEntrypoint(`${lines(200)}\n\n\n`);
    expect(result).toEqual({ content: lines(200) });
  });

  it('cuts 201 lines to 200, warns about lines, and reports the lost pointer', () => {
    const result = truncateEntrypoint(lines(201));
    expect(keptPart(result.content)).toBe(lines(200));
    expect(result.content).toContain(
      '> WARNING: MEMORY.md is 201 lines long (limit: 200 lines), so only part of it was loaded.',
    );
    expect(result.overflow).toEqual({
      cap: 'lines',
      totalLines: 201,
      totalChars: lines(201).length,
      linesDropped: 1,
      charsDropped: lines(201).length - lines(200).length,
      bytesDropped: Buffer.byteLength(`\n${entry(201)}`),
      entriesLost: ['memory-201.md'],
    });
  });
});

describe('truncateEntrypoint: the 25,000-character cap', () => {
  // 100 lines of exactly 250 characters (+ newline) = 25,099 characters: under the line cap, over the char cap.
  const line = (i: number) => `- [M${i}](m-${i}.md) — `.padEnd(250, 'x');
  const text = Array.from({ length: 100 }, (_, i) => line(i)).join('\n');

  it('content of exactly 25,000 characters is not cut', () => {
    const exact = 'y'.repeat(MAX_ENTRYPOINT_CHARS);
    expect(truncateEntrypoint(exact)).toEqual({ content: exact });
  });

  it('cuts at the last newline before 25,000 characters and warns about length', () => {
    expect(text.length).toBe(100 * 251 - 1);
    const result = truncateEntrypoint(text);
    const kept = keptPart(result.content);
    // Lines 1–99 end at index 24,848 (< 25,000); line 100 would end past the limit, so it is the one dropped.
    expect(kept).toBe(text.slice(0, text.lastIndexOf('\n', MAX_ENTRYPOINT_CHARS)));
    expect(kept.length).toBeLessThanOrEqual(MAX_ENTRYPOINT_CHARS);
    expect(kept.endsWith('x')).toBe(true);
    expect(result.overflow).toMatchObject({
      cap: 'chars',
      totalLines: 100,
      linesDropped: 1,
      entriesLost: ['m-99.md'],
    });
    expect(result.content).toMatch(
      /MEMORY\.md is 25,099 characters long \(limit: 25,000 characters\) because its entries are too long/,
    );
  });

  it('keeps exactly 25,000 characters when the newline falls right at the limit', () => {
    const first = 'a'.repeat(MAX_ENTRYPOINT_CHARS);
    const result = truncateEntrypoint(`${first}\n${'b'.repeat(10)}`);
    expect(keptPart(result.content)).toBe(first);
    expect(result.overflow?.charsDropped).toBe(11);
  });

  it('hard-cuts a single line longer than the limit', () => {
    const result = truncateEntrypoint('z'.repeat(30_000));
    expect(keptPart(result.content)).toBe('z'.repeat(MAX_ENTRYPOINT_CHARS));
    expect(result.overflow).toMatchObject({
      cap: 'chars',
      totalLines: 1,
      linesDropped: 0,
      charsDropped: 5000,
    });
  });

  it('applies both caps and says so when the text is over both', () => {
    const long = Array.from({ length: 250 }, (_, i) => `- [E${i}](e-${i}.md) — `.padEnd(150, 'h')).join('\n');
    const result = truncateEntrypoint(long);
    const kept = keptPart(result.content);
    expect(kept.split('\n').length).toBeLessThanOrEqual(MAX_ENTRYPOINT_LINES);
    expect(kept.length).toBeLessThanOrEqual(MAX_ENTRYPOINT_CHARS);
    expect(result.overflow?.cap).toBe('both');
    expect(result.overflow?.entriesLost).toContain('e-249.md');
    expect(result.content).toMatch(
      /is 250 lines and 37,749 characters long \(limits: 200 lines, 25,000 characters\)/,
    );
  });

  it('does not list a file as lost when a kept line still points at it', () => {
    const text2 = `${lines(200)}\n- [again](memory-1.md) — dup`;
    expect(truncateEntrypoint(text2).overflow?.entriesLost).toEqual([]);
  });

  it('property: whatever the input, the loaded part respects both caps and is a prefix of the trimmed text', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: 'binary', maxLength: 2000 }),
          fc.array(fc.string({ maxLength: 400 }), { maxLength: 260 }).map((ls) => ls.join('\n')),
        ),
        (input) => {
          const result = truncateEntrypoint(input);
          const kept = keptPart(result.content);
          expect(input.trim().startsWith(kept)).toBe(true);
          expect(kept.split('\n').length).toBeLessThanOrEqual(MAX_ENTRYPOINT_LINES);
          expect(kept.length).toBeLessThanOrEqual(MAX_ENTRYPOINT_CHARS);
          expect(result.overflow === undefined).toBe(result.content === input.trim());
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('formatIndexLine', () => {
  it('formats `- [Title](file.md) — hook`', () => {
    expect(
      formatIndexLine({ title: 'Testing policy', file: 'feedback_testing.md', hook: 'real DB, no mocks' }),
    ).toBe('- [Testing policy](feedback_testing.md) — real DB, no mocks');
  });

  it('keeps lines under the limit by shortening the hook, then the title', () => {
    const line = formatIndexLine({ title: 'T', file: 'a.md', hook: 'h'.repeat(400) });
    expect(line.length).toBeLessThanOrEqual(MAX_INDEX_LINE_CHARS);
    expect(line.endsWith('…')).toBe(true);
    const titled = formatIndexLine({ title: 'T'.repeat(400), file: 'a.md', hook: 'x' });
    expect(titled.length).toBeLessThanOrEqual(MAX_INDEX_LINE_CHARS);
  });

  it('flattens newlines, drops brackets from titles and wraps targets with spaces', () => {
    expect(formatIndexLine({ title: 'A [b]\nc', file: 'dir/my note.md', hook: 'one\ntwo' })).toBe(
      '- [A b c](<dir/my note.md>) — one two',
    );
    expect(formatIndexLine({ title: '', file: 'x.md', hook: '' })).toBe('- [x](x.md)');
  });

  it.each(['/abs/a.md', '../a.md', 'a/../../b.md', 'MEMORY.md', 'team/MEMORY.md', 'a\\b.md', '', 'a\nb.md'])(
    'refuses the target %j',
    (file) => {
      expect(() => formatIndexLine({ title: 't', file, hook: 'h' })).toThrow(MemoryIndexError);
    },
  );
});

const MESSY_INDEX = [
  '# Memory index',
  '',
  'Notes the agent keeps. Prose mentioning [testing](feedback_testing.md) is not an entry.',
  '',
  '## Feedback',
  '- [Testing policy](feedback_testing.md) — real DB, no mocks',
  '- **[Style](style.md)**: terse answers',
  '1. [Numbered](numbered.md) - first',
  '2. [Multi](multi.md)',
  '   continues the hook on a second line',
  '   - [Nested pointer](nested.md) — stays its own entry',
  '--',
  '* [Star](./star.md) – en dash hook',
  '- [Web](https://example.com) — not a file',
  '- [Anchor](anchored.md#section) — with anchor',
  '- [Spaced](<spaced name.md>) — angle brackets',
  '- [Encoded](encoded%20name.md) — percent',
  '',
].join('\n');

describe('parseIndexEntries', () => {
  it('finds pointer entries in the forms found in the wild and nothing else', () => {
    const entries = parseIndexEntries(MESSY_INDEX);
    expect(entries.map((e) => e.file)).toEqual([
      'feedback_testing.md',
      'style.md',
      'numbered.md',
      'multi.md',
      'nested.md',
      'star.md',
      'anchored.md',
      'spaced name.md',
      'encoded name.md',
    ]);
    const multi = entries.find((e) => e.file === 'multi.md');
    expect(multi?.continuationLines).toBe(1);
    expect(entries.find((e) => e.file === 'style.md')?.hook).toBe('terse answers');
    expect(entries.find((e) => e.file === 'star.md')?.hook).toBe('en dash hook');
  });
});

describe('applyIndexUpsert / applyIndexRemove', () => {
  const otherLines = (content: string, removed: Set<number>) =>
    content.split('\n').filter((_, i) => !removed.has(i));

  it('appends a new pointer, creating the index content from nothing', () => {
    expect(applyIndexUpsert('', { title: 'A', file: 'a.md', hook: 'h' })).toEqual({
      content: '- [A](a.md) — h\n',
      changed: true,
    });
    expect(applyIndexUpsert('# Index', { title: 'A', file: 'a.md', hook: 'h' }).content).toBe(
      '# Index\n- [A](a.md) — h',
    );
  });

  it('updates an entry in place, keeping its list marker, and leaves every other line byte-identical', () => {
    const edit = applyIndexUpsert(MESSY_INDEX, {
      title: 'Numbered v2',
      file: 'numbered.md',
      hook: 'updated',
    });
    const before = MESSY_INDEX.split('\n');
    const after = edit.content.split('\n');
    expect(after.length).toBe(before.length);
    const changed = after.map((line, i) => (line === before[i] ? -1 : i)).filter((i) => i >= 0);
    expect(changed).toEqual([7]);
    expect(after[7]).toBe('1. [Numbered v2](numbered.md) — updated');
  });

  it('is idempotent', () => {
    const input = { title: 'Testing policy', file: 'feedback_testing.md', hook: 'real DB, no mocks' };
    const once = applyIndexUpsert(MESSY_INDEX, input);
    expect(once.changed).toBe(false);
    expect(once.content).toBe(MESSY_INDEX);
    const added = applyIndexUpsert(MESSY_INDEX, { title: 'New', file: 'new.md', hook: 'n' });
    const again = applyIndexUpsert(added.content, { title: 'New', file: 'new.md', hook: 'n' });
    expect(again).toEqual({ content: added.content, changed: false });
  });

  it('matches `./file.md`, anchors and encoded names to the same file', () => {
    expect(applyIndexUpsert(MESSY_INDEX, { title: 'Star', file: 'star.md', hook: 'x' }).content).toContain(
      '* [Star](star.md) — x',
    );
    expect(applyIndexRemove(MESSY_INDEX, 'spaced name.md').removed).toBe(1);
    expect(applyIndexRemove(MESSY_INDEX, 'encoded name.md').removed).toBe(1);
  });

  it('collapses duplicate pointers to one', () => {
    const dup = '- [A](a.md) — one\n- [B](b.md) — b\n- [A again](a.md) — two\n';
    expect(applyIndexUpsert(dup, { title: 'A', file: 'a.md', hook: 'final' }).content).toBe(
      '- [A](a.md) — final\n- [B](b.md) — b\n',
    );
  });

  it('removes an entry with its continuation lines but not a nested pointer to another file', () => {
    const edit = applyIndexRemove(MESSY_INDEX, 'multi.md');
    expect(edit.removed).toBe(1);
    expect(edit.content).not.toContain('[Multi]');
    expect(edit.content).not.toContain('continues the hook');
    expect(edit.content).toContain('   - [Nested pointer](nested.md) — stays its own entry');
    expect(otherLines(MESSY_INDEX, new Set([8, 9]))).toEqual(edit.content.split('\n'));
    expect(applyIndexRemove(edit.content, 'multi.md')).toEqual({
      content: edit.content,
      changed: false,
      removed: 0,
    });
  });

  it('forgetting a file removes its list items and unlinks a prose mention, keeping the words', () => {
    const edit = applyIndexRemove(MESSY_INDEX, 'feedback_testing.md');
    expect(edit.content).toContain('Prose mentioning testing is not an entry.');
    expect(edit.content).not.toContain('[Testing policy]');
    expect(edit.content).not.toContain('feedback_testing.md');
    expect(edit.removed).toBe(2);
    // Every other line is byte-identical.
    const before = MESSY_INDEX.split('\n');
    const after = edit.content.split('\n');
    expect(after).toEqual(
      before
        .filter((l) => !l.startsWith('- [Testing policy]'))
        .map((l) => l.replace('[testing](feedback_testing.md)', 'testing')),
    );
  });

  it('recognises a pointer anywhere on a line: no duplicate on upsert, nothing dangling after forget', () => {
    const index = [
      '# Memory',
      '- Integration tests hit a real database … [Detail](feedback_testing.md)',
      '- Deploy notes: see [runbook](deploy.md) and [rollback](rollback.md)',
      '## [Testing](feedback_testing.md)',
      '1. Release train',
      '   details in [deploy](deploy.md)',
      '- `style.md` — terse answers',
      '',
    ].join('\n');
    const upsert = applyIndexUpsert(index, { title: 'Testing', file: 'feedback_testing.md', hook: 'x' });
    expect(upsert).toEqual({ content: index, changed: false });
    expect(indexLinksTo(index, 'deploy.md')).toBe(true);
    expect(indexLinesLinkingTo(index, './deploy.md')).toEqual([2, 5]);

    const forgot = applyIndexRemove(index, 'feedback_testing.md');
    expect(forgot.content).toBe(
      [
        '# Memory',
        '- Deploy notes: see [runbook](deploy.md) and [rollback](rollback.md)',
        '## Testing',
        '1. Release train',
        '   details in [deploy](deploy.md)',
        '- `style.md` — terse answers',
        '',
      ].join('\n'),
    );
    const deploy = applyIndexRemove(index, 'deploy.md');
    expect(deploy.content.split('\n')[2]).toBe('- Deploy notes: see runbook and [rollback](rollback.md)');
    expect(deploy.content.split('\n')[5]).toBe('   details in deploy');
    expect(deploy.removed).toBe(2);
    expect(indexLinksTo(deploy.content, 'deploy.md')).toBe(false);
  });

  it('keeps CRLF line endings on replaced and appended lines', () => {
    const crlf = '# Index\r\n- [A](a.md) — old\r\n';
    expect(applyIndexUpsert(crlf, { title: 'A', file: 'a.md', hook: 'new' }).content).toBe(
      '# Index\r\n- [A](a.md) — new\r\n',
    );
    expect(applyIndexUpsert(crlf, { title: 'B', file: 'b.md', hook: 'b' }).content).toBe(
      '# Index\r\n- [A](a.md) — old\r\n- [B](b.md) — b\r\n',
    );
  });

  const POOL = [
    '# Heading',
    '',
    'Some prose with [a link](target.md).',
    '--',
    '- [Target](target.md) — the one we edit',
    '1. [Target numbered](./target.md) - dup',
    '- [Other](other.md) — other',
    '  indented continuation',
    '    - [Deep](deep.md) — nested',
    '* [Third](third.md)',
    '- [Web](https://x.y)',
    '- broken [link(target.md)',
    '\t- [Tabbed](tabbed.md) — tab indented',
    '- [CR](cr.md) — ends with CR\r',
  ];

  it('property: upsert/remove change only lines linking to the file (and their continuations), idempotently', () => {
    const listItem = /^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+/;
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...POOL), { maxLength: 25 }), fc.boolean(), (picked, trailing) => {
        const content = picked.join('\n') + (trailing ? '\n' : '');
        const lines = content.split('\n');
        const targetEntries = parseIndexEntries(content).filter((e) => e.file === 'target.md');
        const linking = new Set(indexLinesLinkingTo(content, 'target.md'));
        // A list item linking only to the file goes with its continuation lines; other mentions are unlinked.
        const owned = new Set<number>();
        for (const e of targetEntries)
          for (let k = 0; k <= e.continuationLines; k++) owned.add(e.lineIndex + k);
        for (const i of linking) if (!listItem.test(lines[i]!)) owned.delete(i);

        const removed = applyIndexRemove(content, 'target.md');
        expect(indexLinksTo(removed.content, 'target.md')).toBe(false);
        expect(removed.content).toBe(
          lines
            .flatMap((line, i) => {
              if (owned.has(i)) return [];
              return [linking.has(i) ? line.replace('[a link](target.md)', 'a link') : line];
            })
            .join('\n'),
        );
        expect(applyIndexRemove(removed.content, 'target.md').changed).toBe(false);

        const upserted = applyIndexUpsert(content, { title: 'Target', file: 'target.md', hook: 'fresh' });
        const [first, ...dups] = targetEntries;
        if (first === undefined) {
          // A prose mention already points at the file: no duplicate is appended.
          if (linking.size > 0) expect(upserted).toEqual({ content, changed: false });
          else expect(upserted.content.startsWith(content)).toBe(true);
          return;
        }
        expect(parseIndexEntries(upserted.content).filter((e) => e.file === 'target.md')).toHaveLength(1);
        expect(
          applyIndexUpsert(upserted.content, { title: 'Target', file: 'target.md', hook: 'fresh' }).changed,
        ).toBe(false);
        // The first entry is rewritten in place; duplicates and their continuations go; nothing else moves.
        const dupOwned = new Set<number>();
        for (const e of dups) for (let k = 0; k <= e.continuationLines; k++) dupOwned.add(e.lineIndex + k);
        const expected = lines.filter((_, i) => !dupOwned.has(i));
        const got = upserted.content.split('\n');
        expect(got).toHaveLength(expected.length);
        got.forEach((line, i) => {
          if (i === first.lineIndex) expect(line).toMatch(/\[Target\]\(target\.md\) — fresh\r?$/);
          else expect(line).toBe(expected[i]);
        });
      }),
      { numRuns: 400 },
    );
  });

  it('property: arbitrary index content never makes parsing or editing throw', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 500 }), (content) => {
        parseIndexEntries(content);
        const up = applyIndexUpsert(content, { title: 'X', file: 'x.md', hook: 'y' });
        expect(parseIndexEntries(up.content).filter((e) => e.file === 'x.md').length).toBe(1);
        applyIndexRemove(content, 'x.md');
      }),
      { numRuns: 400 },
    );
  });
});

// A hand-kept index in the shape people write (docs/claude-code-format.md, "Index"): items that link several
// memories, memories listed from several lines and under two headings, continuation lines with links.
const MULTI_LINK_INDEX = readFileSync(
  join(import.meta.dirname, '__fixtures__/index-multi-link/MEMORY.md'),
  'utf8',
);

/** Every file linked from the content, with how many lines link it. */
function linkCounts(content: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of content.split('\n')) {
    for (const file of new Set([...line.matchAll(/\]\(([^)]*)\)/g)].map((m) => m[1] as string))) {
      counts.set(file, (counts.get(file) ?? 0) + 1);
    }
  }
  return counts;
}

describe('index upkeep on hand-kept indexes: several links per line, several lines per file', () => {
  it('sees every file linked from a list item as an entry, wherever the link sits on the item', () => {
    const entries = parseIndexEntries(MULTI_LINK_INDEX);
    const flaky = entries.filter((e) => e.line.startsWith('- Flaky suites'));
    expect(flaky.map((e) => [e.file, e.title, e.leading, e.sole])).toEqual([
      ['feedback_retries.md', 'retries', false, false],
      ['feedback_timeouts.md', 'timeouts', false, false],
    ]);
    const testing = entries.filter((e) => e.file === 'feedback_testing.md');
    expect(testing.map((e) => [e.lineIndex, e.leading, e.sole])).toEqual([
      [5, true, false],
      [15, true, true],
    ]);
    expect(testing[0]?.hook).toBe('real DB, no mocks; see also [CI matrix](project_ci.md)');
    // The sub-item under Retries is its own entry, not a continuation of it.
    expect(entries.find((e) => e.file === 'project_incident.md')?.lineIndex).toBe(8);
    expect(entries.find((e) => e.file === 'feedback_retries.md' && e.leading)?.continuationLines).toBe(0);
    // Prose outside list items is not an entry; every linked memory in a list item is.
    expect(new Set(entries.map((e) => e.file))).toEqual(
      new Set([
        'feedback_testing.md',
        'project_ci.md',
        'feedback_retries.md',
        'feedback_timeouts.md',
        'project_incident.md',
        'user_role.md',
      ]),
    );
  });

  it('forgetting a file linked from a line with other memories unlinks only it, keeping the other links', () => {
    const edit = applyIndexRemove(MULTI_LINK_INDEX, 'feedback_retries.md');
    const before = MULTI_LINK_INDEX.split('\n');
    const after = edit.content.split('\n');
    // `- [Retries](…)` goes; its sub-item is an entry of its own and stays; the shared line keeps timeouts.
    expect(after).toEqual(
      before
        .filter((l) => !l.startsWith('- [Retries]'))
        .map((l) =>
          l.startsWith('- Flaky suites') ? '- Flaky suites: retries, [timeouts](feedback_timeouts.md)' : l,
        ),
    );
    expect(edit.removed).toBe(2);
  });

  it("forgetting the first link of a multi-link line keeps the line and the other memory's pointer", () => {
    const edit = applyIndexRemove(MULTI_LINK_INDEX, 'feedback_testing.md');
    const after = edit.content.split('\n');
    expect(after[5]).toBe('- Testing policy — real DB, no mocks; see also [CI matrix](project_ci.md)');
    expect(after).not.toContain('2. [Testing policy](feedback_testing.md) — listed here too, on purpose');
    expect(after).toHaveLength(MULTI_LINK_INDEX.split('\n').length - 1);
    expect(indexLinksTo(edit.content, 'feedback_testing.md')).toBe(false);
  });

  it('an item whose continuation links another memory is unlinked, not dropped', () => {
    const index =
      '- [Release](release.md) — steps\n  details in [runbook](runbook.md)\n- [Other](other.md)\n';
    expect(applyIndexRemove(index, 'release.md').content).toBe(
      '- Release — steps\n  details in [runbook](runbook.md)\n- [Other](other.md)\n',
    );
    // Without a link in the continuation, the item goes with it.
    const plain = '- [Release](release.md) — steps\n  details below\n- [Other](other.md)\n';
    expect(applyIndexRemove(plain, 'release.md').content).toBe('- [Other](other.md)\n');
  });

  it('upserting a file whose pointer line links other memories leaves that line as written', () => {
    const edit = applyIndexUpsert(MULTI_LINK_INDEX, {
      title: 'Testing',
      file: 'feedback_testing.md',
      hook: 'new',
    });
    const after = edit.content.split('\n');
    const before = MULTI_LINK_INDEX.split('\n');
    // Line 5 (shared with the CI matrix) is not rewritten, so the CI matrix keeps that link; the pointer of
    // Engram's shape under `## CI` is updated; nothing else changes.
    expect(after[5]).toBe(before[5]);
    expect(after[15]).toBe('2. [Testing](feedback_testing.md) — new');
    expect(after.filter((l, i) => l !== before[i])).toEqual(['2. [Testing](feedback_testing.md) — new']);
    // A file linked only from lines that also link others, or from prose continuations, gets no new line.
    expect(
      applyIndexUpsert(MULTI_LINK_INDEX, { title: 'Runbook', file: 'reference_runbook.md', hook: 'x' }),
    ).toEqual({
      content: MULTI_LINK_INDEX,
      changed: false,
    });
  });

  it('collapsing duplicates keeps a duplicate whose continuation links another memory', () => {
    const index = '- [X](x.md) — one\n- [X](x.md) — two\n  see [Y](y.md)\n- [X](x.md) — three\n  plain\n';
    expect(applyIndexUpsert(index, { title: 'X', file: 'x.md', hook: 'one' }).content).toBe(
      '- [X](x.md) — one\n- [X](x.md) — two\n  see [Y](y.md)\n',
    );
  });

  const MULTI_POOL = [
    '## Section',
    '- [Target](target.md) — plain pointer',
    '- [Target](target.md) and [Other](other.md)',
    '- see [Other](other.md), then [target](./target.md)',
    '  continuation with [Deep](deep.md)',
    '  continuation without links',
    '- [Other](other.md) — other',
    '  - nested [target](target.md#x) mention',
    'Prose [t](target.md) and [o](other.md).',
    '1. [Third](third.md)',
  ];

  it("property: forget and upsert never lose another memory's link, and touch only lines linking the file", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...MULTI_POOL), { maxLength: 20 }), (picked) => {
        const content = `${picked.join('\n')}\n`;
        const before = linkCounts(content);
        const untouched = content.split('\n').filter((l) => !indexLinesLinkingTo(l, 'target.md').length);

        const removed = applyIndexRemove(content, 'target.md');
        expect(indexLinksTo(removed.content, 'target.md')).toBe(false);
        const afterRemove = linkCounts(removed.content);
        for (const [file, n] of before) {
          if (!file.startsWith('target.md') && !file.startsWith('./target.md'))
            expect(afterRemove.get(file)).toBe(n);
        }
        // Lines that did not link the file are all still there, in order (only unlinked continuations go).
        const kept = removed.content.split('\n');
        const keptUntouched = untouched.filter((l) => kept.includes(l));
        expect(keptUntouched.filter((l) => !/^ {2}continuation without links$/.test(l))).toEqual(
          untouched.filter((l) => !/^ {2}continuation without links$/.test(l)),
        );

        const upserted = applyIndexUpsert(content, { title: 'Target', file: 'target.md', hook: 'fresh' });
        expect(indexLinksTo(upserted.content, 'target.md')).toBe(true);
        const afterUpsert = linkCounts(upserted.content);
        for (const [file, n] of before) {
          if (file !== 'target.md') expect(afterUpsert.get(file)).toBe(n);
        }
        expect(
          applyIndexUpsert(upserted.content, { title: 'Target', file: 'target.md', hook: 'fresh' }).changed,
        ).toBe(false);
      }),
      { numRuns: 400 },
    );
  });
});

describe('index files on disk', () => {
  let dir: string;
  let cleanup: () => void;
  beforeAll(() => {
    ({ dir, cleanup } = makeTempDir('engram-index-'));
  });
  afterAll(() => cleanup());

  it('loadMemoryIndex reports a missing index as absent', async () => {
    expect(await loadMemoryIndex(join(dir, 'nope', 'MEMORY.md'))).toEqual({
      exists: false,
      raw: '',
      content: '',
    });
  });

  it('loadMemoryIndex returns the capped content with the overflow report', async () => {
    const path = join(dir, 'big', 'MEMORY.md');
    mkdirSync(join(dir, 'big'));
    writeFileSync(path, `${lines(230)}\n`);
    const loaded = await loadMemoryIndex(path);
    expect(loaded.exists).toBe(true);
    expect(loaded.raw).toBe(`${lines(230)}\n`);
    expect(loaded.overflow?.linesDropped).toBe(30);
    expect(loaded.overflow?.entriesLost).toHaveLength(30);
  });

  it('loadMemoryIndex fails with a typed error when the index is unreadable', async () => {
    const path = join(dir, 'isdir', 'MEMORY.md');
    mkdirSync(path, { recursive: true });
    await expect(loadMemoryIndex(path)).rejects.toMatchObject({
      name: 'MemoryIndexError',
      code: 'READ_FAILED',
    });
  });

  it('loadMemoryIndex refuses a FIFO named MEMORY.md at once instead of waiting on it', async () => {
    const path = join(dir, 'fifo', 'MEMORY.md');
    mkdirSync(join(dir, 'fifo'), { recursive: true });
    execFileSync('mkfifo', [path]);
    await expect(loadMemoryIndex(path)).rejects.toMatchObject({
      name: 'MemoryIndexError',
      code: 'READ_FAILED',
    });
  });

  it('upserts and removes atomically (0600), and concurrent upserts from one process all land', async () => {
    const path = join(dir, 'mem', 'MEMORY.md');
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        upsertIndexEntry(path, { title: `T${i}`, file: `t${i}.md`, hook: `h${i}` }),
      ),
    );
    const content = readFileSync(path, 'utf8');
    expect(
      parseIndexEntries(content)
        .map((e) => e.file)
        .sort(),
    ).toEqual(Array.from({ length: 20 }, (_, i) => `t${i}.md`).sort());
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(await upsertIndexEntry(path, { title: 'T3', file: 't3.md', hook: 'h3' })).toEqual({
      changed: false,
    });
    expect(await removeIndexEntry(path, 't3.md')).toEqual({ changed: true, removed: 1 });
    expect(await removeIndexEntry(path, 't3.md')).toEqual({ changed: false, removed: 0 });
    expect(readFileSync(path, 'utf8')).not.toContain('t3.md');
  });

  it('removing from a missing index creates nothing', async () => {
    const path = join(dir, 'ghost', 'MEMORY.md');
    expect(await removeIndexEntry(path, 'a.md')).toEqual({ changed: false, removed: 0 });
    expect(() => statSync(path)).toThrow();
  });
});

describe('applyIndexRetitle', () => {
  it('changes only the title of the entry line, keeping marker, emphasis, target, hook and line ending', () => {
    const content =
      '# Index\r\n  * **[Old title](a.md)** — hook [x](b.md)\r\n- [Old title](b.md) — other\r\n';
    expect(applyIndexRetitle(content, 'a.md', 'Old title', 'new-slug')).toEqual({
      content: '# Index\r\n  * **[new-slug](a.md)** — hook [x](b.md)\r\n- [Old title](b.md) — other\r\n',
      changed: true,
    });
  });

  it('does nothing when the title is not the expected one, or the link is not first on its line', () => {
    expect(applyIndexRetitle('- [Mine](a.md)\n', 'a.md', 'Old', 'new').changed).toBe(false);
    expect(applyIndexRetitle('- prose [Old](a.md)\n', 'a.md', 'Old', 'new').changed).toBe(false);
    expect(applyIndexRetitle('- [Old](a.md)\n', 'a.md', 'Old', 'Old').changed).toBe(false);
  });
});
