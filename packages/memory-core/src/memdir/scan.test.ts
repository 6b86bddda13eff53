import { mkdirSync, renameSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import { extractMemoryFields, MemoryFormatError, parseMemoryFile } from './frontmatter.js';
import {
  clearScanCache,
  formatMemoryManifest,
  MAX_MEMORY_FILES,
  type MemoryHeader,
  parseHead,
  type ScanResult,
  scanMemoryDir,
} from './scan.js';

let base: string;
let mem: string;
let cleanup: () => void;
const T0 = Date.UTC(2026, 0, 10, 12, 0, 0);

function put(rel: string, content: string | Buffer, mtimeMs?: number): string {
  const path = join(mem, rel);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
  if (mtimeMs !== undefined) utimesSync(path, mtimeMs / 1000, mtimeMs / 1000);
  return path;
}

const fm = (fields: string[], body = 'Body\n') => `---\n${fields.join('\n')}\n---\n\n${body}`;

beforeAll(() => {
  ({ dir: base, cleanup } = makeTempDir('engram-scan-'));
  mem = join(base, 'memory');
  mkdirSync(join(base, 'outside'), { recursive: true });
  put(
    'user_role.md',
    fm(['name: Role', 'description: Senior Go engineer, new to React', 'type: user']),
    T0 - 1000,
  );
  put(
    'feedback/testing.md',
    fm([
      'name: Testing',
      'description: "Real DB: no mocks"',
      'metadata:',
      '  node_type: memory',
      '  type: feedback',
    ]),
    T0 - 2000,
  );
  put('plain.md', '# No frontmatter\n\njust text\n', T0 - 3000);
  put(
    'team/deploy.md',
    fm(['name: Deploy', 'description: Deploy runbook lives in Notion', 'type: reference']),
    T0 - 4000,
  );
  put('MEMORY.md', '- [Role](user_role.md) — role\n', T0);
  put('team/MEMORY.md', '- [Deploy](deploy.md) — runbook\n', T0);
  put('.history/old.md', fm(['name: old']), T0);
  put('.hidden.md', fm(['name: hidden']), T0);
  put('notes.txt', 'not markdown', T0);
  put('broken-yaml.md', fm(['name: [unclosed', 'description: x']), T0 - 5000);
  put('binary.md', Buffer.from([0x2d, 0x2d, 0x2d, 0x0a, 0x00, 0x01, 0x02]), T0 - 6000);
  put('js.md', '---js\n{ name: "x" }\n---\n', T0 - 7000);
  put('unterminated.md', '---\nname: open\ndescription: never closed\n', T0 - 8000);
  put('too-long.md', `---\n${Array.from({ length: 40 }, (_, i) => `k${i}: v`).join('\n')}\n---\n`, T0 - 9000);
  put('long-description.md', fm([`description: ${'wide '.repeat(1200)}end`, 'type: project']), T0 - 10_000);
  put('repaired.md', fm(['description: fix: quote me', 'type: feedback']), T0 - 11_000);
  put('tie-b.md', fm(['description: b']), T0 - 12_000);
  put('tie-a.md', fm(['description: a']), T0 - 12_000);
  writeFileSync(join(base, 'outside', 'secret.md'), fm(['description: outside secret']));
  symlinkSync('../outside/secret.md', join(mem, 'link-out.md'));
  symlinkSync('user_role.md', join(mem, 'alias.md'));
  symlinkSync('../outside', join(mem, 'linked-dir'));
});

afterAll(() => cleanup());
beforeEach(() => clearScanCache());

const byName = (result: ScanResult) => new Map(result.headers.map((h) => [h.filename, h]));
const problemCodes = (result: ScanResult) =>
  Object.fromEntries(
    result.problems.map((p) => [p.filename, p.code]).sort(([a], [b]) => String(a).localeCompare(String(b))),
  );

describe('scanMemoryDir', () => {
  it('lists *.md recursively except MEMORY.md, hidden entries, outward symlinks and symlinked directories', async () => {
    const result = await scanMemoryDir(mem);
    expect(result.headers.map((h) => h.filename).sort()).toEqual(
      [
        'alias.md',
        'feedback/testing.md',
        'long-description.md',
        'plain.md',
        'repaired.md',
        'team/deploy.md',
        'tie-a.md',
        'tie-b.md',
        'user_role.md',
      ].sort(),
    );
  });

  it('reads name, description and type (top level or metadata.type); null description without frontmatter', async () => {
    const headers = byName(await scanMemoryDir(mem));
    expect(headers.get('user_role.md')).toEqual({
      filename: 'user_role.md',
      filePath: join(mem, 'user_role.md'),
      mtimeMs: T0 - 1000,
      name: 'Role',
      description: 'Senior Go engineer, new to React',
      type: 'user',
    });
    expect(headers.get('feedback/testing.md')).toMatchObject({
      description: 'Real DB: no mocks',
      type: 'feedback',
    });
    expect(headers.get('plain.md')).toEqual({
      filename: 'plain.md',
      filePath: join(mem, 'plain.md'),
      mtimeMs: T0 - 3000,
      description: null,
    });
    expect(headers.get('repaired.md')?.description).toBe('fix: quote me');
    expect(headers.get('long-description.md')?.description).toMatch(/^wide (wide )+end$/);
  });

  it('reports every bad file as a problem instead of throwing', async () => {
    const result = await scanMemoryDir(mem);
    expect(problemCodes(result)).toEqual({
      'binary.md': 'BINARY',
      'broken-yaml.md': 'YAML_INVALID',
      'js.md': 'UNSUPPORTED_LANGUAGE',
      'link-out.md': 'OUTSIDE_MEMORY_DIR',
      'too-long.md': 'FRONTMATTER_TOO_LONG',
      'unterminated.md': 'UNTERMINATED',
    });
    for (const problem of result.problems) {
      expect(problem.filePath).toBe(join(mem, problem.filename));
      expect(problem.message.length).toBeGreaterThan(10);
    }
  });

  it('sorts newest first, breaking mtime ties by name', async () => {
    const names = (await scanMemoryDir(mem)).headers.map((h) => h.filename);
    expect(names).toEqual([
      'alias.md', // a symlink: the target's mtime, tied with it and first by name
      'user_role.md',
      'feedback/testing.md',
      'plain.md',
      'team/deploy.md',
      'long-description.md',
      'repaired.md',
      'tie-a.md',
      'tie-b.md',
    ]);
  });

  it('gives the same answer through the async I/O path and with the cache disabled', async () => {
    const auto = await scanMemoryDir(mem);
    clearScanCache();
    const asyncResult = await scanMemoryDir(mem, { io: 'async' });
    const uncached = await scanMemoryDir(mem, { cache: false });
    expect(asyncResult).toEqual(auto);
    expect(uncached).toEqual(auto);
  });

  it('returns nothing (and no problem) for a missing directory, and a problem for a file in its place', async () => {
    expect(await scanMemoryDir(join(base, 'nope'))).toEqual({ headers: [], problems: [], totalFiles: 0 });
    const result = await scanMemoryDir(join(mem, 'plain.md'));
    expect(result.headers).toEqual([]);
    expect(result.problems[0]?.code).toBe('DIRECTORY_UNREADABLE');
  });

  it('rejects with the abort reason when the signal is aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await expect(scanMemoryDir(mem, { signal: controller.signal })).rejects.toThrow('stop');
  });
});

describe('scanMemoryDir limits and cache', () => {
  let many: string;
  beforeAll(() => {
    many = join(base, 'many');
    for (let i = 0; i < MAX_MEMORY_FILES + 5; i++) {
      const path = join(many, i % 3 === 0 ? 'sub' : '', `m${String(i).padStart(3, '0')}.md`);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, fm([`description: memory ${i}`, 'type: project']));
      const t = (T0 - i * 60_000) / 1000;
      utimesSync(path, t, t);
    }
  });

  it('keeps the newest 200 of more files and counts them all', async () => {
    const result = await scanMemoryDir(many);
    expect(result.totalFiles).toBe(MAX_MEMORY_FILES + 5);
    expect(result.headers).toHaveLength(MAX_MEMORY_FILES);
    expect(result.headers[0]?.description).toBe('memory 0');
    expect(result.headers.at(-1)?.description).toBe('memory 199');
    expect((await scanMemoryDir(many, { maxFiles: Number.POSITIVE_INFINITY })).headers).toHaveLength(205);
  });

  it('a repeat scan sees edits, atomic replacements and deletions', async () => {
    const dir = join(base, 'cache');
    const path = join(dir, 'a.md');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path, fm(['description: first']));
    expect((await scanMemoryDir(dir)).headers[0]?.description).toBe('first');
    expect((await scanMemoryDir(dir)).headers[0]?.description).toBe('first');

    writeFileSync(path, fm(['description: second, same size?']));
    expect((await scanMemoryDir(dir)).headers[0]?.description).toBe('second, same size?');

    writeFileSync(join(dir, '.tmp'), fm(['description: renamed in']));
    renameSync(join(dir, '.tmp'), path);
    expect((await scanMemoryDir(dir)).headers[0]?.description).toBe('renamed in');

    writeFileSync(path, 'broken\0');
    expect((await scanMemoryDir(dir)).problems[0]?.code).toBe('BINARY');
  });

  it('rebases cached entries when the same file is scanned from another root', async () => {
    await scanMemoryDir(mem);
    const team = await scanMemoryDir(join(mem, 'team'));
    expect(team.headers.map((h) => h.filename)).toEqual(['deploy.md']);
    expect(team.headers[0]?.filePath).toBe(join(mem, 'team', 'deploy.md'));
  });
});

describe('parseHead', () => {
  const candidate = { rel: 'f.md', path: '/x/f.md' };

  it('asks for more bytes when the buffer ends inside a short frontmatter', () => {
    const text = fm([`description: ${'x'.repeat(5000)}`]);
    const buffer = Buffer.from(text);
    expect(parseHead(candidate, 0, buffer, 4096, false)).toBe('need-more');
    expect(parseHead(candidate, 0, buffer, buffer.length, true)).toMatchObject({
      header: { description: 'x'.repeat(5000) },
    });
  });

  const LINES = [
    '---',
    'name: N',
    'description: D',
    'description: "q: x"',
    'type: user',
    'type: nope',
    'metadata:',
    '  type: project',
    'related: [a.md]',
    'bad: [',
    '---js',
    '----',
    '--- text',
    '',
    'body line',
    '...',
    '---  ',
    '\r',
  ];

  it('property: on whole files it agrees with parseMemoryFile (fields, or the same problem code)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.constantFrom(...LINES), fc.string({ maxLength: 20 })), { maxLength: 20 }),
        fc.boolean(),
        (lines, bom) => {
          const text = (bom ? '\ufeff' : '') + lines.join('\n');
          const outcome = parseHead(candidate, 0, Buffer.from(text), Buffer.byteLength(text), true);
          let expected: { header: Partial<MemoryHeader> } | { code: string };
          try {
            const parsed = parseMemoryFile(text, 'f.md');
            expected = {
              header: { name: parsed.name, description: parsed.description ?? null, type: parsed.type },
            };
          } catch (error) {
            if (!(error instanceof MemoryFormatError)) throw error;
            expected = { code: error.code };
          }
          if ('code' in expected) {
            expect(outcome).toMatchObject({ problem: { code: expected.code } });
          } else {
            expect(outcome).not.toBe('need-more');
            const header = outcome !== 'need-more' && 'header' in outcome ? outcome.header : undefined;
            expect({ name: header?.name, description: header?.description, type: header?.type }).toEqual(
              expected.header,
            );
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('property: current-form heads read exactly as the `yaml` library reads their block', () => {
    const text = fc.oneof(
      fc.string({ unit: 'grapheme-ascii', maxLength: 40 }),
      fc.string({ unit: 'grapheme', maxLength: 12 }),
    );
    const scalar = fc.oneof(
      text,
      text.map((t) => `"${t}"`),
      text.map((t) => `'${t}'`),
      fc.uuid(),
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
      fc.constantFrom(
        'user',
        'feedback',
        'project',
        'reference',
        'null',
        '12',
        '0x1F',
        '1e3',
        '',
        '~',
        'a: b',
      ),
    );
    let compared = 0;
    fc.assert(
      fc.property(
        scalar,
        scalar,
        scalar,
        scalar,
        scalar,
        fc.boolean(),
        (name, description, type, origin, modified, crlf) => {
          const lines = [
            `name: ${name}`,
            `description: ${description}`,
            'metadata:',
            '  node_type: memory',
            `  type: ${type}`,
            `  originSessionId: ${origin}`,
            `  modified: ${modified}`,
          ];
          const block = lines.join(crlf ? '\r\n' : '\n');
          if (block.includes('\0') || /(^|\n)---/.test(block)) return;
          let data: unknown;
          try {
            data = parseYaml(block, { uniqueKeys: true, logLevel: 'error' });
          } catch {
            return; // not YAML: the scan reports or repairs it (covered above)
          }
          if (data === null || typeof data !== 'object' || Array.isArray(data)) return;
          const eol = crlf ? '\r\n' : '\n';
          const file = `---${eol}${block}${eol}---${eol}Body with [[a-link]].${eol}`;
          const buffer = Buffer.from(file);
          const outcome = parseHead(candidate, 0, buffer, buffer.length, true);
          expect(outcome).not.toBe('need-more');
          if (outcome === 'need-more' || !('header' in outcome)) throw new Error(JSON.stringify(outcome));
          const fields = extractMemoryFields(data as Record<string, unknown>);
          compared++;
          expect({
            name: outcome.header.name,
            description: outcome.header.description,
            type: outcome.header.type,
          }).toEqual({ name: fields.name, description: fields.description ?? null, type: fields.type });
          expect(outcome.header.links).toEqual(['a-link']);
        },
      ),
      { numRuns: 1500 },
    );
    expect(compared).toBeGreaterThan(300);
  });

  it('property: arbitrary bytes never throw', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.boolean(), (bytes, eof) => {
        const buffer = Buffer.from(bytes);
        const outcome = parseHead(candidate, 0, buffer, buffer.length, eof);
        expect(outcome === 'need-more' || 'header' in outcome || 'problem' in outcome).toBe(true);
      }),
      { numRuns: 800 },
    );
  });
});

describe('formatMemoryManifest', () => {
  it('writes one `- [type] path (ISO mtime): description` line per memory', () => {
    const headers: MemoryHeader[] = [
      { filename: 'a.md', filePath: '/m/a.md', mtimeMs: T0, description: 'Alpha', type: 'user' },
      { filename: 'sub/b.md', filePath: '/m/sub/b.md', mtimeMs: T0 - 86_400_000, description: null },
      { filename: 'c.md', filePath: '/m/c.md', mtimeMs: T0, description: 'multi\n  line', type: 'reference' },
    ];
    expect(formatMemoryManifest(headers)).toBe(
      [
        '- [user] a.md (2026-01-10T12:00:00.000Z): Alpha',
        '- sub/b.md (2026-01-09T12:00:00.000Z)',
        '- [reference] c.md (2026-01-10T12:00:00.000Z): multi line',
      ].join('\n'),
    );
    expect(formatMemoryManifest([])).toBe('');
  });
});
