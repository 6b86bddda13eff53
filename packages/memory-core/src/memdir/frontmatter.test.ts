import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import {
  extractMemoryFields,
  extractMemoryFieldsWithSchema,
  isCoreNumber,
  MAX_FRONTMATTER_CHARS,
  MAX_MEMORY_FILE_CHARS,
  MemoryFormatError,
  parseFrontmatterBlock,
  parseMemoryFile,
  parseSimpleFrontmatter,
  rewriteMemoryFile,
  serializeMemoryFile,
  YAML_FLOAT,
  YAML_INT,
} from './frontmatter.js';
import { MEMORY_TYPES, parseMemoryType } from './memory-types.js';

function formatErrorCode(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    if (error instanceof MemoryFormatError) return error.code;
    throw error;
  }
  return undefined;
}

describe('parseMemoryType', () => {
  it('accepts the four types and nothing else', () => {
    for (const type of MEMORY_TYPES) expect(parseMemoryType(type)).toBe(type);
    expect(parseMemoryType(' Feedback ')).toBe('feedback');
    for (const other of ['note', '', 'users', 1, null, undefined, {}])
      expect(parseMemoryType(other)).toBeUndefined();
  });
});

describe('parseMemoryFile', () => {
  it('reads name, description, type and the body of the taught form', () => {
    const text = [
      '---',
      'name: Testing policy',
      'description: Integration tests must hit a real database',
      'type: feedback',
      '---',
      '',
      'Use a real database.',
      '**Why:** mocks hid a broken migration.',
      '',
    ].join('\n');
    const parsed = parseMemoryFile(text, 'feedback_testing.md');
    expect(parsed).toEqual({
      name: 'Testing policy',
      description: 'Integration tests must hit a real database',
      type: 'feedback',
      extra: {},
      body: '\nUse a real database.\n**Why:** mocks hid a broken migration.\n',
      hasFrontmatter: true,
    });
  });

  it('reads the type from metadata.type (newer Claude Code) and keeps metadata as an extra field', () => {
    const text = [
      '---',
      'name: Deploy freeze',
      'description: "Merge freeze from 2026-03-05: mobile release cut"',
      'metadata:',
      '  node_type: memory',
      '  type: project',
      '  originSessionId: 7f1c',
      '  modified: 2026-03-01',
      '---',
      'Body',
    ].join('\n');
    const parsed = parseMemoryFile(text, 'p.md');
    expect(parsed.type).toBe('project');
    expect(parsed.description).toBe('Merge freeze from 2026-03-05: mobile release cut');
    expect(parsed.extra.metadata).toMatchObject({
      node_type: 'memory',
      type: 'project',
      originSessionId: '7f1c',
    });
    // YAML 1.2 (the `yaml` library, as Claude Code reads it): a timestamp is text.
    expect((parsed.extra.metadata as { modified: unknown }).modified).toBe('2026-03-01');
  });

  it('prefers a valid top-level type over metadata.type', () => {
    const parsed = parseMemoryFile('---\ntype: user\nmetadata:\n  type: project\n---\n', 'x.md');
    expect(parsed.type).toBe('user');
  });

  it('loads unknown or missing types as undefined', () => {
    expect(parseMemoryFile('---\nname: a\ntype: opinion\n---\n', 'x.md').type).toBeUndefined();
    expect(parseMemoryFile('---\nname: a\n---\n', 'x.md').type).toBeUndefined();
  });

  it('accepts unquoted dates as the text written (YAML 1.2 has no timestamp type)', () => {
    const parsed = parseMemoryFile('---\ndescription: 2024-05-01\ncreated: 2024-05-01\n---\n', 'd.md');
    expect(parsed.description).toBe('2024-05-01');
    expect(parsed.extra.created).toBe('2024-05-01');
  });

  it('reads non-English, quoted, long and list-valued fields', () => {
    const long = 'Très long — '.repeat(40).trim();
    const text = [
      '---',
      'name: 日本語のメモ',
      `description: '${long}'`,
      'type: reference',
      'related: [other.md, "third.md"]',
      '---',
      'Ünïcödé body 😀',
    ].join('\n');
    const parsed = parseMemoryFile(text, 'ja.md');
    expect(parsed.name).toBe('日本語のメモ');
    expect(parsed.description).toBe(long);
    expect(parsed.extra.related).toEqual(['other.md', 'third.md']);
    expect(parsed.body).toBe('Ünïcödé body 😀');
  });

  it('coerces numeric and boolean names to text and ignores structured ones', () => {
    const parsed = parseMemoryFile('---\nname: 42\ndescription: [a, b]\n---\n', 'n.md');
    expect(parsed.name).toBe('42');
    expect(parsed.description).toBeUndefined();
  });

  it('treats a file without an opening delimiter, or with a Markdown rule, as body only', () => {
    for (const text of ['# Title\n\ntext', '----\nname: x\n---\n', '--- a heading ---\ntext\n', '']) {
      const parsed = parseMemoryFile(text, 'b.md');
      expect(parsed.hasFrontmatter).toBe(false);
      expect(parsed.body).toBe(text);
      expect(parsed.extra).toEqual({});
    }
  });

  it('handles CRLF line endings and a byte-order mark', () => {
    const parsed = parseMemoryFile('\ufeff---\r\nname: Win\r\ntype: user\r\n---\r\nbody\r\n', 'w.md');
    expect(parsed).toMatchObject({ name: 'Win', type: 'user', body: 'body\r\n' });
  });

  it('accepts `---yaml` and refuses other frontmatter languages without evaluating them', () => {
    expect(parseMemoryFile('---yaml\nname: y\n---\n', 'y.md').name).toBe('y');
    const g = globalThis as { __engramPwned?: number };
    const code = formatErrorCode(() =>
      parseMemoryFile('---js\n{ name: (globalThis.__engramPwned = 1) }\n---\n', 'evil.md'),
    );
    expect(code).toBe('UNSUPPORTED_LANGUAGE');
    expect(g.__engramPwned).toBeUndefined();
    expect(formatErrorCode(() => parseMemoryFile('---json\n{"name": "x"}\n---\n', 'j.md'))).toBe(
      'UNSUPPORTED_LANGUAGE',
    );
  });

  it('repairs unquoted values containing ": " instead of failing the file', () => {
    const parsed = parseMemoryFile(
      '---\nname: Fix\ndescription: fix: use the retry wrapper\ntype: feedback\n---\n',
      'r.md',
    );
    expect(parsed.description).toBe('fix: use the retry wrapper');
    expect(parsed.repairedYaml).toBe(true);
  });

  it.each([
    ['---\nname: x\n', 'UNTERMINATED'],
    ['---', 'UNTERMINATED'],
    ['---\nname: [unclosed\n---\n', 'YAML_INVALID'],
    ['---\nname: a\nname: b\n---\n', 'YAML_INVALID'],
    ['---\n- a\n- b\n---\n', 'NOT_A_MAPPING'],
    ['---\njust a sentence\n---\n', 'NOT_A_MAPPING'],
    ['---\nname: a\0b\n---\n', 'BINARY'],
    ['\ufffd'.repeat(50), 'BINARY'],
    ['x'.repeat(MAX_MEMORY_FILE_CHARS + 1), 'TOO_LARGE'],
    [`---\ndescription: ${'d'.repeat(MAX_FRONTMATTER_CHARS + 10)}\n---\n`, 'FRONTMATTER_TOO_LONG'],
    [`---\n${'k: v\n'.repeat(20_000)}---\n`, 'FRONTMATTER_TOO_LONG'],
    [`---\nname: ${'['.repeat(20_000)}\n---\n`, 'YAML_INVALID'],
  ])('fails %# with a typed %s error naming the file', (text, code) => {
    try {
      parseMemoryFile(text, 'broken/file.md');
      expect.unreachable('should have thrown');
    } catch (error) {
      expect(error).toBeInstanceOf(MemoryFormatError);
      expect((error as MemoryFormatError).code).toBe(code);
      expect((error as MemoryFormatError).file).toBe('broken/file.md');
      expect((error as Error).message).toMatch(/^broken\/file\.md: /);
    }
  });

  it('does not let a __proto__ key pollute objects', () => {
    const parsed = parseMemoryFile('---\n__proto__:\n  polluted: yes\nname: p\n---\n', 'p.md');
    expect(parsed.name).toBe('p');
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('refuses an alias bomb instead of expanding it', () => {
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x, x]', 'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]'];
    bomb.push(
      'c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]',
      'd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]',
    );
    expect(() => parseMemoryFile(`---\n${bomb.join('\n')}\n---\n`, 'bomb.md')).toThrow(MemoryFormatError);
  });
});

describe('serializeMemoryFile', () => {
  it('writes the current form: slug name, quoted description, metadata (node_type, type, origin, modified)', () => {
    const text = serializeMemoryFile(
      {
        name: 'no-database-mocks',
        description: 'D: with colon',
        type: 'project',
        stamp: {
          originSessionId: '7b0c1d2e-3f4a-4b5c-8d9e-0f1a2b3c4d5e',
          modified: '2026-11-30T10:12:44.120Z',
        },
        extra: { related: ['a.md'], zeta: 1 },
      },
      '\nBody\n',
    );
    expect(text).toBe(
      [
        '---',
        'name: no-database-mocks',
        'description: "D: with colon"',
        'metadata:',
        '  node_type: memory',
        '  type: project',
        '  originSessionId: 7b0c1d2e-3f4a-4b5c-8d9e-0f1a2b3c4d5e',
        '  modified: 2026-11-30T10:12:44.120Z',
        'related:',
        '  - a.md',
        'zeta: 1',
        '---',
        '',
        'Body',
        '',
      ].join('\n'),
    );
    const parsed = parseMemoryFile(text, 'n.md');
    expect(parsed).toMatchObject({
      name: 'no-database-mocks',
      description: 'D: with colon',
      type: 'project',
    });
  });

  it('keeps descriptions on one line and never folds long ones', () => {
    const description = `a ${'long '.repeat(60)}line`;
    const text = serializeMemoryFile({ description: `${description}\nsecond` }, 'b');
    expect(text.split('\n')[1]).toBe(`description: "${description} second"`);
  });

  it('writes only the body when there are no fields, and ensures a final newline', () => {
    expect(serializeMemoryFile({}, 'just body')).toBe('just body\n');
  });
});

describe('rewriteMemoryFile: only the meant change', () => {
  const stamp = { originSessionId: 'sess-2', modified: '2026-12-01T09:00:00.000Z' };

  it('an Engram file (older top-level form) edited in place: flat type updated, not duplicated; rest byte-identical', () => {
    const original = [
      '---',
      'name: Testing policy',
      "description: 'Real DB, no mocks'   # why: the migration incident",
      'type: feedback',
      'originSessionId: sess-1',
      'related: [b.md, "c.md"]',
      'custom:',
      '    nested: {deep: [1, 2]}',
      '---',
      '',
      'Integration tests hit a real database.',
      '**Why:** a mocked test passed while the migration failed.',
      '',
    ].join('\n');
    const out = rewriteMemoryFile(original, { type: 'project', stamp }, 'o.md');
    expect(out).toBe(
      original
        .replace('type: feedback', 'type: project')
        .replace('originSessionId: sess-1', 'originSessionId: sess-2')
        .replace(
          '    nested: {deep: [1, 2]}\n',
          '    nested: {deep: [1, 2]}\nmetadata:\n  node_type: memory\n  modified: 2026-12-01T09:00:00.000Z\n',
        ),
    );
    expect(out.match(/type:/g)).toHaveLength(1 + 1); // the flat type and node_type — no second `type`
    expect(parseMemoryFile(out, 'o.md').type).toBe('project');
  });

  it('a Claude Code file edited by Engram: only the description and metadata.modified change', () => {
    const original = [
      '---',
      'name: no-database-mocks',
      'description: "Integration tests hit a real database"',
      'metadata:',
      '  node_type: memory',
      '  type: feedback',
      '  originSessionId: 5d2b3c4e-1f2a-4b5c-9d8e-7f6a5b4c3d2e',
      '  modified: 2026-11-30T10:12:44.120Z',
      '---',
      'Never mock the database. See [[testing-policy]].',
      '',
    ].join('\n');
    const out = rewriteMemoryFile(
      original,
      {
        description: 'Integration tests hit a real database, never mocks',
        stamp: { modified: stamp.modified },
      },
      'c.md',
    );
    expect(out).toBe(
      original
        .replace(
          '"Integration tests hit a real database"',
          '"Integration tests hit a real database, never mocks"',
        )
        .replace('2026-11-30T10:12:44.120Z', stamp.modified),
    );
    // Nothing to change is no change at all.
    expect(rewriteMemoryFile(out, { name: 'no-database-mocks', type: 'feedback' }, 'c.md')).toBe(out);
  });

  it('a file Claude Code rewrote from an Engram one (re-slugged, type moved) round-trips through Engram', () => {
    const claudeEdited = [
      '---',
      'name: testing-policy',
      'description: "Real DB, no mocks"',
      'metadata:',
      '  node_type: memory',
      '  type: feedback',
      '  originSessionId: sess-1',
      '  modified: 2026-11-30T10:12:44.120Z',
      '---',
      'Body [[db-setup]]',
      '',
    ].join('\n');
    const out = rewriteMemoryFile(claudeEdited, { type: 'project', stamp }, 'x.md');
    expect(out).toBe(
      claudeEdited
        .replace('  type: feedback', '  type: project')
        .replace('originSessionId: sess-1', 'originSessionId: sess-2')
        .replace('2026-11-30T10:12:44.120Z', stamp.modified),
    );
    expect(out).not.toMatch(/^type:/m);
  });

  it('fills name: "" (keeping its quotes) and adds missing fields where they belong; keeps CRLF, BOM, a new body', () => {
    const original = '\ufeff---\r\nname: ""\r\ncolor: blue\r\n---\r\nold body\r\n';
    const out = rewriteMemoryFile(
      original,
      { name: 'deploy-freeze', description: 'Freeze: Fridays', type: 'project' },
      'd.md',
      'new body\n',
    );
    expect(out).toBe(
      '\ufeff---\r\nname: "deploy-freeze"\r\ndescription: "Freeze: Fridays"\r\ncolor: blue\r\nmetadata:\r\n  type: project\r\n---\r\nnew body\n',
    );
  });

  it('gives a file without frontmatter the current form and keeps its text as the body', () => {
    const out = rewriteMemoryFile('Just a note.\n', { name: 'a-note', type: 'user', stamp }, 'n.md');
    expect(out).toBe(
      '---\nname: a-note\nmetadata:\n  node_type: memory\n  type: user\n  originSessionId: sess-2\n  modified: 2026-12-01T09:00:00.000Z\n---\nJust a note.\n',
    );
    expect(rewriteMemoryFile('---\n---\nx', { name: 'e' }, 'e.md')).toBe('---\nname: e\n---\nx');
  });

  it('refuses to rewrite frontmatter that is not YAML (the caller decides)', () => {
    expect(() => rewriteMemoryFile('---\na: [\n---\n', { name: 'x' }, 'bad.md')).toThrow(MemoryFormatError);
  });
});

// ---------------------------------------------------------------------------------------------------------
// Property tests

const yamlData = (block: string): unknown => parseYaml(block);

const KEYS = [
  'name',
  'description',
  'type',
  'metadata',
  'related',
  'originSessionId',
  'node_type',
  'modified',
  'updated',
  'supersedes',
  'names',
  'Name',
  'typ',
  'metadatas',
  'true',
  'null',
  'a_b',
  'x-y',
  'K9',
];
const VALUES = [
  '',
  'plain text',
  'a: b',
  'a #b',
  'a#b',
  '#c',
  '"q"',
  "'s'",
  '"a\\"b"',
  "'it''s'",
  '"unterminated',
  'null',
  'Null',
  'true',
  'FALSE',
  '~',
  '2024-05-01',
  '1e3',
  '0x1F',
  '.5',
  '-x',
  '- x',
  '? y',
  ': z',
  '[a, b]',
  '{a: 1}',
  '&anchor x',
  '*alias',
  '!tag x',
  '|',
  '>',
  '%x',
  '@x',
  '`x',
  'x:',
  'http://example.com/a',
  'résumé',
  '日本語の説明',
  'emoji 😀',
  'tab\there',
  'trailing  ',
  ' leading',
  'yes',
  'off',
  '.inf',
  '=',
  '<<',
  "it's",
  'say "hi"',
  'back\\slash',
  'ctrl\u0007char',
  '0b3c9f8e-2d4a-4c6b-9a1e-7f5d3c2b1a09',
  '7f1c2d3e-aaaa-4bbb-8ccc-123456789abc',
  '2026-03-01',
  '2026-3-1',
  '2026-03-01T10:00:00Z',
  '2026-03-01T10:00:00.123456Z',
  '2026-03-01 10:00:00 +05:30',
  '2026-03-01t1:02:03.5-2',
  '2026-13-45',
  '2026-03-01x',
  '0b101',
  '0b',
  '0x1F',
  '0x',
  '0755',
  '08',
  '1_000',
  '1_',
  '12:30',
  '1:2:3',
  '190:20:30.15',
  '1.5e-3',
  '3 days',
  '1st',
  '0',
  '00',
  '9.',
  '1e',
  'nel\u0085char',
  'nbsp\u00a0',
  '\u00a0lead',
  'ideographic\u3000',
  '"q"\u00a0',
  '0o17',
  '0o8',
  '0o',
  '0xZ',
  '0Xff',
  '1.',
  '1.2.3',
  '1e+5',
  '1E5',
  '12e',
  '1e5x',
  '007',
  '3.14e-2x',
  '9-9',
  'back\\slash "mixed"',
  '"a # b"',
  "'a: b'",
  'line\u2028sep',
];

const lineArb = fc.oneof(
  fc
    .record({
      key: fc.constantFrom(...KEYS),
      value: fc.oneof(fc.constantFrom(...VALUES), fc.string({ maxLength: 12 })),
    })
    .map(({ key, value }) => `${key}: ${value}`),
  fc.constantFrom(...KEYS).map((key) => `${key}:`),
  fc
    .record({
      indent: fc.integer({ min: 1, max: 4 }),
      key: fc.constantFrom(...KEYS),
      value: fc.oneof(fc.constantFrom(...VALUES), fc.string({ maxLength: 8 })),
    })
    .map(({ indent, key, value }) => `${' '.repeat(indent)}${key}: ${value}`),
  fc.constantFrom(
    '',
    '   ',
    'name:value',
    'name :v',
    '# comment',
    '- item',
    '...',
    '  - nested',
    '\tname: tab',
  ),
);

describe('property: the frontmatter fast path agrees with YAML wherever it answers', () => {
  it('parseSimpleFrontmatter(block) equals the `yaml` library’s reading of the same block', () => {
    let answered = 0;
    fc.assert(
      fc.property(fc.array(lineArb, { maxLength: 8 }), (lines) => {
        const block = lines.join('\n');
        const fast = parseSimpleFrontmatter(block);
        if (fast === undefined) return;
        answered++;
        const slow = yamlData(block);
        expect(fast).toEqual(slow ?? {});
      }),
      { numRuns: 1500 },
    );
    expect(answered).toBeGreaterThan(100);
  });

  it('gives the same answer when the caller has already scanned a printable-ASCII block (the scan’s path)', () => {
    let answered = 0;
    fc.assert(
      fc.property(fc.array(lineArb, { maxLength: 8 }), (lines) => {
        const block = lines.join('\n');
        if (/[^\n\x20-\x7e]/.test(block)) return;
        const scanned = parseSimpleFrontmatter(block, {
          hash: block.includes('#'),
          backslash: block.includes('\\'),
        });
        expect(scanned).toEqual(parseSimpleFrontmatter(block));
        if (scanned === undefined) return;
        answered++;
        expect(scanned).toEqual(yamlData(block) ?? {});
      }),
      { numRuns: 1500 },
    );
    expect(answered).toBeGreaterThan(100);
  });

  it('reads current-form blocks with arbitrary field values exactly as `yaml` does', () => {
    const text = fc.oneof(
      fc.string({ unit: 'grapheme-ascii', maxLength: 40 }),
      fc.string({ unit: 'grapheme', maxLength: 12 }),
    );
    const quoted = text.map((t) => `"${t}"`);
    const uuid = fc.uuid();
    const iso = fc.date({ noInvalidDate: true }).map((d) => d.toISOString());
    const scalar = fc.oneof(text, quoted, uuid, iso, fc.constantFrom(...VALUES));
    let answered = 0;
    const slug = fc.stringMatching(/^[a-z][a-z0-9-]{0,30}$/);
    const memoryType = fc.constantFrom(...MEMORY_TYPES);
    fc.assert(
      fc.property(
        fc.oneof(slug, slug, scalar),
        fc.oneof(quoted, quoted, scalar),
        fc.oneof(memoryType, memoryType, scalar),
        fc.oneof(uuid, uuid, scalar),
        fc.oneof(iso, iso, scalar),
        (name, description, type, origin, modified) => {
          const block = [
            `name: ${name}`,
            `description: ${description}`,
            'metadata:',
            '  node_type: memory',
            `  type: ${type}`,
            `  originSessionId: ${origin}`,
            `  modified: ${modified}`,
          ].join('\n');
          const fast = parseSimpleFrontmatter(block);
          if (fast === undefined) return;
          answered++;
          expect(fast).toEqual(yamlData(block));
        },
      ),
      { numRuns: 3000 },
    );
    expect(answered).toBeGreaterThan(200);
  });

  it('isCoreNumber agrees with the core schema’s int and float patterns on digit-led text', () => {
    const digitLed = fc
      .tuple(
        fc.constantFrom(...'0123456789'),
        fc.string({ unit: fc.constantFrom(...'0123456789.eExXoO+-abcdefABCDEF_:9 '), maxLength: 8 }),
      )
      .map(([first, rest]) => first + rest);
    fc.assert(
      fc.property(digitLed, (value) => {
        expect(isCoreNumber(value, 0, value.length)).toBe(YAML_INT.test(value) || YAML_FLOAT.test(value));
      }),
      { numRuns: 3000 },
    );
  });

  it('answers for newer Claude Code metadata (UUIDs, timestamps) the way `yaml` does', () => {
    const block =
      'name: A\nmetadata:\n  node_type: memory\n  originSessionId: 0b3c9f8e-2d4a-4c6b-9a1e-7f5d3c2b1a09\n  modified: 2026-03-01T10:00:00.000Z';
    const fast = parseSimpleFrontmatter(block);
    expect(fast).toBeDefined();
    expect(fast).toEqual(yamlData(block));
  });

  it('answers for the common shapes (so the scan rarely needs a YAML parser)', () => {
    expect(
      parseSimpleFrontmatter(
        'name: A\ndescription: "x: y"\ntype: user\nmetadata:\n  node_type: memory\n  type: user',
      ),
    ).toEqual({
      name: 'A',
      description: 'x: y',
      type: 'user',
      metadata: { node_type: 'memory', type: 'user' },
    });
  });

  it('extractMemoryFields’ fast lane matches the zod schema', () => {
    const value = fc.oneof(
      fc.constant(undefined),
      fc.constant(null),
      fc.constantFrom(...MEMORY_TYPES, ' User ', 'other', '', '  '),
      fc.string({ maxLength: 10 }),
      fc.integer(),
      fc.boolean(),
      fc.date({ noInvalidDate: true }),
      fc.array(fc.string(), { maxLength: 2 }),
    );
    fc.assert(
      fc.property(
        fc.record(
          {
            name: value,
            description: value,
            type: value,
            metadata: fc.oneof(value, fc.record({ type: value })),
          },
          { requiredKeys: [] },
        ),
        (data) => {
          expect(extractMemoryFields(data)).toEqual(extractMemoryFieldsWithSchema(data));
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('property: arbitrary input never escapes as anything but a MemoryFormatError', () => {
  const check = (text: string) => {
    try {
      const parsed = parseMemoryFile(text, 'fuzz.md');
      expect(typeof parsed.body).toBe('string');
    } catch (error) {
      expect(error).toBeInstanceOf(MemoryFormatError);
    }
  };

  it('arbitrary Unicode strings', () => {
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 300 }), check), { numRuns: 800 });
  });

  it('arbitrary bytes decoded as UTF-8', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (bytes) => check(Buffer.from(bytes).toString('utf8'))),
      { numRuns: 800 },
    );
  });

  it('arbitrary text inside frontmatter delimiters', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 200 }),
        fc.string({ maxLength: 50 }),
        (block, body) => check(`---\n${block}\n---\n${body}`),
      ),
      { numRuns: 800 },
    );
  });

  it('YAML-flavoured fragments inside frontmatter delimiters', () => {
    const fragment = fc.constantFrom(
      ...VALUES,
      ':',
      '- ',
      '  ',
      '\n',
      '{',
      '}',
      '[',
      ']',
      '&a',
      '*a',
      '!!js/function',
      '!!binary',
      '<<: *a',
      '? ',
      '|-',
      '---',
    );
    fc.assert(
      fc.property(fc.array(fragment, { maxLength: 30 }), (parts) => check(`---\n${parts.join('')}\n---\n`)),
      { numRuns: 800 },
    );
  });

  it('parseFrontmatterBlock returns a plain object or throws MemoryFormatError', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (block) => {
        try {
          const { data } = parseFrontmatterBlock(block, 'b.md');
          expect(typeof data).toBe('object');
          expect(Array.isArray(data)).toBe(false);
        } catch (error) {
          expect(error).toBeInstanceOf(MemoryFormatError);
        }
      }),
      { numRuns: 800 },
    );
  });
});
