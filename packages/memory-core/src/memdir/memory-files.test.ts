import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryPathError } from '../paths/memory-paths.js';
import { makeTempDir } from '../testing/temp-dir.test-helpers.js';
import { parseMemoryFile } from './frontmatter.js';
import { upsertIndexEntry } from './index-file.js';
import {
  ensureMemoryDir,
  forgetMemory,
  listMemories,
  MAX_MEMORY_FILE_READ_BYTES,
  readMemoryFile,
  TeamSecretError,
  validateMemoryRelPath,
  writeMemoryFile,
} from './memory-files.js';

let base: string;
let mem: string;
let cleanup: () => void;
const DAY = 86_400_000;

beforeAll(async () => {
  ({ dir: base, cleanup } = makeTempDir('engram-files-'));
  mem = join(base, 'memory');
  await ensureMemoryDir(mem);
  mkdirSync(join(base, 'outside'));
});
afterAll(() => cleanup());

describe('validateMemoryRelPath', () => {
  it.each([
    '',
    '/abs.md',
    '../x.md',
    'a/../../x.md',
    'x.txt',
    'MEMORY.md',
    'team/MEMORY.md',
    '.hidden.md',
    '.history/x.md',
    'a\\b.md',
    '~/x.md',
    'a\nb.md',
  ])('refuses %j', (rel) => {
    expect(() => validateMemoryRelPath(rel)).toThrow(MemoryPathError);
  });
  it('normalizes accepted paths', () => {
    expect(validateMemoryRelPath('./feedback/../testing.md')).toBe('testing.md');
  });
});

describe('writeMemoryFile / readMemoryFile', () => {
  it('creates a memory in the current form with 0600 permissions', async () => {
    const result = await writeMemoryFile(
      mem,
      'feedback/testing.md',
      { name: 'testing', description: 'Real DB', type: 'feedback' },
      '\nUse a real DB.\n',
      { originSessionId: 'sess-1', now: new Date('2026-12-01T09:00:00.000Z') },
    );
    expect(result).toEqual({ path: join(mem, 'feedback', 'testing.md'), created: true });
    expect(readFileSync(result.path, 'utf8')).toBe(
      '---\nname: testing\ndescription: "Real DB"\nmetadata:\n  node_type: memory\n  type: feedback\n' +
        '  originSessionId: sess-1\n  modified: 2026-12-01T09:00:00.000Z\n---\n\nUse a real DB.\n',
    );
    expect(statSync(result.path).mode & 0o777).toBe(0o600);
    const read = await readMemoryFile(mem, 'feedback/testing.md');
    expect(read).toMatchObject({ name: 'testing', type: 'feedback', body: '\nUse a real DB.\n' });
  });

  it('rewrites an existing file in place: unknown fields, order and quoting stay byte-identical', async () => {
    const original =
      "---\nname: P\nmetadata:\n  node_type: memory\n  type: project\nrelated: [a.md]  # keep\nextra: 'x'\n---\nold\n";
    writeFileSync(join(mem, 'proj.md'), original);
    const result = await writeMemoryFile(
      mem,
      'proj.md',
      { name: 'p2', description: 'd', type: 'reference' },
      'new\n',
      { now: new Date('2026-12-01T09:00:00.000Z') },
    );
    expect(result.created).toBe(false);
    expect(readFileSync(result.path, 'utf8')).toBe(
      '---\nname: p2\ndescription: "d"\nmetadata:\n  node_type: memory\n  type: reference\n' +
        "  modified: 2026-12-01T09:00:00.000Z\nrelated: [a.md]  # keep\nextra: 'x'\n---\nnew\n",
    );
    const parsed = parseMemoryFile(readFileSync(result.path, 'utf8'), 'proj.md');
    expect(parsed).toMatchObject({ name: 'p2', type: 'reference', body: 'new\n' });
  });

  it('refuses paths that escape through a symlink', async () => {
    symlinkSync('../outside', join(mem, 'escape'));
    await expect(writeMemoryFile(mem, 'escape/x.md', { name: 'x' }, 'b')).rejects.toMatchObject({
      code: 'OUTSIDE_MEMORY_DIR',
    });
    await expect(readMemoryFile(mem, 'escape/x.md')).rejects.toMatchObject({ code: 'OUTSIDE_MEMORY_DIR' });
  });

  it('reads a memory bounded, judged on what it opened: a FIFO and an oversize file are refused', async () => {
    writeFileSync(join(mem, 'plain.md'), '---\nname: plain\n---\nok\n');
    // Positive control: an ordinary memory reads.
    await expect(readMemoryFile(mem, 'plain.md')).resolves.toMatchObject({ name: 'plain' });
    execFileSync('mkfifo', [join(mem, 'pipe.md')]);
    await expect(readMemoryFile(mem, 'pipe.md')).rejects.toMatchObject({ code: 'NOT_A_REGULAR_FILE' });
    writeFileSync(join(mem, 'huge.md'), 'x'.repeat(MAX_MEMORY_FILE_READ_BYTES + 1));
    await expect(readMemoryFile(mem, 'huge.md')).rejects.toMatchObject({ code: 'TOO_LARGE' });
    // A link that stays inside is resolved to its target first, and the target (a regular file) is read.
    symlinkSync('plain.md', join(mem, 'alias.md'));
    await expect(readMemoryFile(mem, 'alias.md')).resolves.toMatchObject({ name: 'plain' });
  });

  it('refuses secret-looking content in team memory but allows it in private memory', async () => {
    const token = `ghp_${'a1B2c3D4e5'.repeat(3)}abcdef`;
    await expect(
      writeMemoryFile(mem, 'team/creds.md', { name: 'creds' }, `token ${token}\n`),
    ).rejects.toBeInstanceOf(TeamSecretError);
    await expect(
      writeMemoryFile(mem, 'team/creds.md', { name: 'creds' }, 'token ...'),
    ).resolves.toMatchObject({
      created: true,
    });
    await expect(
      writeMemoryFile(mem, 'private-creds.md', { name: 'p' }, `token ${token}\n`),
    ).resolves.toMatchObject({
      created: true,
    });
  });
});

describe('listMemories', () => {
  it('lists every memory with type, name, description and age, plus problems', async () => {
    const dir = join(base, 'list');
    const now = Date.UTC(2026, 0, 20);
    await writeMemoryFile(dir, 'a.md', { name: 'A', description: 'alpha', type: 'user' }, 'x');
    await writeMemoryFile(dir, 'b.md', { description: 'beta' }, 'x');
    writeFileSync(join(dir, 'bad.md'), '---\nname: [\n---\n');
    utimesSync(join(dir, 'a.md'), (now - 3 * DAY) / 1000, (now - 3 * DAY) / 1000);
    utimesSync(join(dir, 'b.md'), (now - 1000) / 1000, (now - 1000) / 1000);
    const { memories, problems } = await listMemories(dir, { now });
    expect(memories).toEqual([
      {
        file: 'b.md',
        path: join(dir, 'b.md'),
        description: 'beta',
        mtimeMs: now - 1000,
        ageDays: 0,
        age: 'today',
      },
      {
        file: 'a.md',
        path: join(dir, 'a.md'),
        type: 'user',
        name: 'A',
        description: 'alpha',
        mtimeMs: now - 3 * DAY,
        ageDays: 3,
        age: '3 days ago',
      },
    ]);
    expect(problems.map((p) => [p.filename, p.code])).toEqual([['bad.md', 'YAML_INVALID']]);
  });
});

describe('forgetMemory', () => {
  it('removes the file and its index line, leaving the rest of the index alone', async () => {
    const dir = join(base, 'forget');
    await writeMemoryFile(dir, 'a.md', { name: 'A' }, 'x');
    await writeMemoryFile(dir, 'b.md', { name: 'B' }, 'x');
    await upsertIndexEntry(join(dir, 'MEMORY.md'), { title: 'A', file: 'a.md', hook: 'a' });
    await upsertIndexEntry(join(dir, 'MEMORY.md'), { title: 'B', file: 'b.md', hook: 'b' });
    expect(await forgetMemory(dir, 'a.md')).toEqual({ fileRemoved: true, indexLinesRemoved: 1 });
    expect(readFileSync(join(dir, 'MEMORY.md'), 'utf8')).toBe('- [B](b.md) — b\n');
    expect(() => statSync(join(dir, 'a.md'))).toThrow();
    expect(await forgetMemory(dir, 'a.md')).toEqual({ fileRemoved: false, indexLinesRemoved: 0 });
  });

  it('uses the team index for team memories', async () => {
    const dir = join(base, 'forget-team');
    await writeMemoryFile(dir, 'team/t.md', { name: 'T' }, 'x');
    await upsertIndexEntry(join(dir, 'team', 'MEMORY.md'), { title: 'T', file: 't.md', hook: 't' });
    expect(await forgetMemory(dir, 'team/t.md')).toEqual({ fileRemoved: true, indexLinesRemoved: 1 });
  });

  it('removes a symlink itself, never its target, and refuses paths outside', async () => {
    const dir = join(base, 'forget-link');
    await writeMemoryFile(dir, 'real.md', { name: 'R' }, 'x');
    symlinkSync('real.md', join(dir, 'alias.md'));
    expect((await forgetMemory(dir, 'alias.md')).fileRemoved).toBe(true);
    expect(statSync(join(dir, 'real.md')).isFile()).toBe(true);
    symlinkSync('../outside', join(dir, 'out'));
    writeFileSync(join(base, 'outside', 'victim.md'), 'keep');
    await expect(forgetMemory(dir, 'out/victim.md')).rejects.toMatchObject({ code: 'OUTSIDE_MEMORY_DIR' });
    expect(readFileSync(join(base, 'outside', 'victim.md'), 'utf8')).toBe('keep');
  });
});

describe('ensureIndexPointer', () => {
  it('adds a pointer built from frontmatter once, in the right scope, and leaves existing ones alone', async () => {
    const { ensureIndexPointer } = await import('./memory-files.js');
    const { mkdtempSync, promises: fsp } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'engram-ensure-'));
    await fsp.writeFile(
      join(dir, 'user_role.md'),
      '---\nname: User role\ndescription: Senior Go engineer, new to React\ntype: user\n---\nBody\n',
    );
    await fsp.writeFile(join(dir, 'MEMORY.md'), '# Index\n\nSome prose the user wrote.\n');
    expect(await ensureIndexPointer(dir, 'user_role.md')).toEqual({
      added: true,
      type: 'user',
      name: 'User role',
    });
    expect(await ensureIndexPointer(dir, 'user_role.md')).toEqual({
      added: false,
      type: 'user',
      name: 'User role',
    });
    expect(await fsp.readFile(join(dir, 'MEMORY.md'), 'utf8')).toBe(
      '# Index\n\nSome prose the user wrote.\n- [User role](user_role.md) — Senior Go engineer, new to React\n',
    );
    await fsp.mkdir(join(dir, 'team'));
    await fsp.writeFile(
      join(dir, 'team', 'ci.md'),
      '---\nname: CI\ndescription: Flaky job list\ntype: reference\n---\nx\n',
    );
    expect((await ensureIndexPointer(dir, 'team/ci.md')).added).toBe(true);
    expect(await fsp.readFile(join(dir, 'team', 'MEMORY.md'), 'utf8')).toContain(
      '- [CI](ci.md) — Flaky job list',
    );
    expect(await ensureIndexPointer(dir, 'gone.md')).toEqual({ added: false });
    await expect(ensureIndexPointer(dir, '../escape.md')).rejects.toThrow(/leaves the memory directory/);
  });

  it('reads only files inside the directory: a link out of it or a FIFO gets no pointer; a file inside does', async () => {
    const { ensureIndexPointer } = await import('./memory-files.js');
    const dir = join(base, 'pointer-boundary');
    mkdirSync(dir);
    // Outside the memory directory, shaped like a memory: its name and description must not reach MEMORY.md.
    writeFileSync(
      join(base, 'outside', 'secret.md'),
      '---\nname: Outside name\ndescription: outside-description-canary\ntype: user\n---\nx\n',
    );
    symlinkSync(join(base, 'outside', 'secret.md'), join(dir, 'linked.md'));
    execFileSync('mkfifo', [join(dir, 'pipe.md')]);
    expect(
      await ensureIndexPointer(dir, 'linked.md', {
        stamp: { originSessionId: 's1', modified: '2026-12-02T00:00:00Z' },
      }),
    ).toEqual({
      added: false,
    });
    expect(await ensureIndexPointer(dir, 'pipe.md')).toEqual({ added: false });
    expect(readFileSync(join(base, 'outside', 'secret.md'), 'utf8')).not.toContain('metadata');
    // Positive control: the same call on a memory inside the directory adds its pointer.
    writeFileSync(join(dir, 'inside.md'), '---\nname: Inside\ndescription: kept\ntype: user\n---\nx\n');
    expect((await ensureIndexPointer(dir, 'inside.md')).added).toBe(true);
    const index = readFileSync(join(dir, 'MEMORY.md'), 'utf8');
    expect(index).toContain('- [Inside](inside.md) — kept');
    expect(index).not.toContain('outside-description-canary');
  });

  it("with a stamp, maintains the file's metadata as Claude Code does after a write, changing nothing else", async () => {
    const { ensureIndexPointer } = await import('./memory-files.js');
    const { mkdtempSync, promises: fsp } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'engram-stamp-'));
    // What the extraction fork writes when it follows the memory prompt.
    const written = [
      '---',
      'name: no-database-mocks',
      'description: "Integration tests hit a real database, never mocks"',
      'metadata:',
      '  type: feedback',
      '---',
      'Never mock the database; see [[testing-policy]].',
      '',
    ].join('\n');
    await fsp.writeFile(join(dir, 'no-database-mocks.md'), written);
    const stamp = { originSessionId: 'sess-9', modified: '2026-12-01T09:00:00.000Z' };
    expect(await ensureIndexPointer(dir, 'no-database-mocks.md', { stamp })).toMatchObject({
      added: true,
      type: 'feedback',
    });
    expect(await fsp.readFile(join(dir, 'no-database-mocks.md'), 'utf8')).toBe(
      written.replace(
        '  type: feedback\n',
        '  type: feedback\n  node_type: memory\n  originSessionId: sess-9\n  modified: 2026-12-01T09:00:00.000Z\n',
      ),
    );
  });
});

describe('ensureIndexPointers: several files at once', () => {
  it('leaves every index, title record and result exactly as one call per file does, in one write per index', async () => {
    const { ensureIndexPointer, ensureIndexPointers } = await import('./memory-files.js');
    const { mkdtempSync, promises: fsp, statSync: stat } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const fixtures = join(import.meta.dirname, '__fixtures__', 'index-retitle');
    const fixture = (name: string) => readFileSync(join(fixtures, name), 'utf8');
    const make = async () => {
      const dir = mkdtempSync(join(tmpdir(), 'engram-pointers-'));
      for (const name of ['MEMORY.md', 'hand-titled.md', 'testing-policy.md'])
        writeFileSync(join(dir, name), fixture(name));
      writeFileSync(join(dir, 'integration-tests.md'), fixture('engram-written.md'));
      await ensureIndexPointer(dir, 'integration-tests.md');
      // Claude Code renames one memory; two new ones (one in team/) and one already gone.
      writeFileSync(join(dir, 'integration-tests.md'), fixture('claude-code-rewrite.md'));
      writeFileSync(
        join(dir, 'a.md'),
        '---\nname: Deploy day\ndescription: Deploys on Tuesdays\ntype: project\n---\nx\n',
      );
      await fsp.mkdir(join(dir, 'team'));
      writeFileSync(
        join(dir, 'team', 'ci.md'),
        '---\nname: CI\ndescription: Flaky job list\ntype: reference\n---\nx\n',
      );
      return dir;
    };
    const rels = ['a.md', 'integration-tests.md', 'gone.md', 'team/ci.md', 'hand-titled.md', 'a.md'];
    const one = await make();
    const each = [];
    for (const rel of rels) each.push(await ensureIndexPointer(one, rel));
    const batch = await make();
    const indexIno = stat(join(batch, 'MEMORY.md')).ino;
    const together = await ensureIndexPointers(batch, rels);
    expect(together).toEqual(each);
    expect(together.map((r) => r.added)).toEqual([true, false, false, true, false, false]);
    expect(together[1]?.titleUpdated).toBe(true);
    for (const file of ['MEMORY.md', '.index-titles.json', 'team/MEMORY.md', 'team/.index-titles.json'])
      expect(readFileSync(join(batch, file), 'utf8')).toBe(readFileSync(join(one, file), 'utf8'));
    // The index was replaced (atomic write), and the batch needs no second pass.
    expect(stat(join(batch, 'MEMORY.md')).ino).not.toBe(indexIno);
    expect((await ensureIndexPointers(batch, rels)).map((r) => r.added || r.titleUpdated === true)).toEqual(
      rels.map(() => false),
    );
    await expect(ensureIndexPointers(batch, ['a.md', '../escape.md'])).rejects.toThrow(
      /leaves the memory directory/,
    );
  });
});

describe('ensureIndexPointer: titles follow a renamed memory (Claude Code re-slugs names)', () => {
  const fixtures = join(import.meta.dirname, '__fixtures__', 'index-retitle');
  const fixture = (name: string) => readFileSync(join(fixtures, name), 'utf8');

  it('retitles only the pointer Engram wrote, only its title, and nothing else in the index', async () => {
    const { ensureIndexPointer } = await import('./memory-files.js');
    const { mkdtempSync, promises: fsp } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'engram-retitle-'));
    try {
      for (const name of ['MEMORY.md', 'hand-titled.md', 'testing-policy.md']) {
        writeFileSync(join(dir, name), fixture(name));
      }
      // Engram's extraction wrote the memory in the older form and added its pointer.
      writeFileSync(join(dir, 'integration-tests.md'), fixture('engram-written.md'));
      expect(await ensureIndexPointer(dir, 'integration-tests.md')).toMatchObject({ added: true });
      const indexed = readFileSync(join(dir, 'MEMORY.md'), 'utf8');
      expect(indexed).toBe(
        `${fixture('MEMORY.md')}- [Integration tests use a real DB](integration-tests.md) — Integration tests hit a real database, never mocks\n`,
      );
      // The other pointers are left alone by upkeep: one is the user's own title, one a link after prose.
      expect((await ensureIndexPointer(dir, 'hand-titled.md')).titleUpdated).toBeUndefined();
      expect((await ensureIndexPointer(dir, 'testing-policy.md')).titleUpdated).toBeUndefined();
      expect(readFileSync(join(dir, 'MEMORY.md'), 'utf8')).toBe(indexed);

      // Claude Code edits the file: slug name, type moved under metadata, description quoted.
      writeFileSync(join(dir, 'integration-tests.md'), fixture('claude-code-rewrite.md'));
      expect(await ensureIndexPointer(dir, 'integration-tests.md')).toEqual({
        added: false,
        type: 'feedback',
        name: 'integration-tests-real-db',
        titleUpdated: true,
      });
      const after = readFileSync(join(dir, 'MEMORY.md'), 'utf8');
      expect(after).toBe(
        indexed.replace(
          '- [Integration tests use a real DB](integration-tests.md)',
          '- [integration-tests-real-db](integration-tests.md)',
        ),
      );
      // Idempotent: the next upkeep changes nothing.
      expect((await ensureIndexPointer(dir, 'integration-tests.md')).titleUpdated).toBeUndefined();
      expect(readFileSync(join(dir, 'MEMORY.md'), 'utf8')).toBe(after);
      // The record is hidden from every walk (scan, consolidation, team sync).
      const { scanMemoryDir } = await import('./scan.js');
      expect((await scanMemoryDir(dir)).headers.map((h) => h.filename).sort()).toEqual([
        'hand-titled.md',
        'integration-tests.md',
        'testing-policy.md',
      ]);
      expect(await fsp.readdir(dir)).toContain('.index-titles.json');
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  it('leaves a title someone edited after Engram wrote it, and adopts one that equals the name', async () => {
    const { ensureIndexPointer } = await import('./memory-files.js');
    const { mkdtempSync, promises: fsp } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'engram-retitle-'));
    try {
      writeFileSync(join(dir, 'integration-tests.md'), fixture('engram-written.md'));
      await ensureIndexPointer(dir, 'integration-tests.md');
      const edited = readFileSync(join(dir, 'MEMORY.md'), 'utf8').replace(
        '[Integration tests use a real DB]',
        '[Real DB in tests (see CI)]',
      );
      writeFileSync(join(dir, 'MEMORY.md'), edited);
      writeFileSync(join(dir, 'integration-tests.md'), fixture('claude-code-rewrite.md'));
      expect((await ensureIndexPointer(dir, 'integration-tests.md')).titleUpdated).toBeUndefined();
      expect(readFileSync(join(dir, 'MEMORY.md'), 'utf8')).toBe(edited);

      // A pointer Claude Code wrote with the name as its title is adopted, then follows the next rename.
      writeFileSync(join(dir, 'testing-policy.md'), fixture('testing-policy.md'));
      const withClaudeLine = `${edited}- [testing-policy](testing-policy.md) — where the rules live\n`;
      writeFileSync(join(dir, 'MEMORY.md'), withClaudeLine);
      expect((await ensureIndexPointer(dir, 'testing-policy.md')).titleUpdated).toBeUndefined();
      writeFileSync(
        join(dir, 'testing-policy.md'),
        fixture('testing-policy.md').replace('name: testing-policy', 'name: testing-rules'),
      );
      expect((await ensureIndexPointer(dir, 'testing-policy.md')).titleUpdated).toBe(true);
      expect(readFileSync(join(dir, 'MEMORY.md'), 'utf8')).toBe(
        withClaudeLine.replace('[testing-policy](testing-policy.md)', '[testing-rules](testing-policy.md)'),
      );
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('readMemoryLinkReport', () => {
  it("reads a memory's links, backlinks and dangling links from the directory", async () => {
    const { readMemoryLinkReport } = await import('./memory-files.js');
    const { mkdtempSync, promises: fsp } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'engram-links-'));
    await fsp.writeFile(
      join(dir, 'a.md'),
      '---\nname: testing-policy\n---\nSee [[db-setup]] and [[not-yet]].\n',
    );
    await fsp.writeFile(join(dir, 'db-setup.md'), 'No frontmatter; links back to [[testing-policy]].\n');
    expect(await readMemoryLinkReport(dir, 'a.md')).toEqual({
      links: [{ slug: 'db-setup', file: 'db-setup.md' }, { slug: 'not-yet' }],
      backlinks: ['db-setup.md'],
      dangling: ['not-yet'],
    });
  });
});
