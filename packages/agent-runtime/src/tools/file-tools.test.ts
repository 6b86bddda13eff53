import { readdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../fixtures.test-helpers.js';
import { ATTENDED } from '../sandbox/boundary.js';
import { editTool } from './edit.js';
import { MODIFIED_SINCE_READ_MESSAGE, NOT_READ_MESSAGE } from './file-state.js';
import { MAX_READ_FILE_BYTES, readTool } from './read.js';
import { ReadFileState, type ToolContext, ToolError } from './tool.js';
import { writeTool } from './write.js';

let dir: string;
let cleanup: () => Promise<void>;
let ctx: ToolContext;
beforeEach(async () => {
  ({ dir, cleanup } = await makeTempDir());
  ctx = { cwd: dir, readFileState: new ReadFileState(), toolUseId: 'toolu_test', boundary: ATTENDED };
});
afterEach(() => cleanup());

const read = (input: Parameters<typeof readTool.call>[0]) =>
  readTool.call(readTool.inputSchema.parse(input), ctx);
const write = (file_path: string, content: string) => writeTool.call({ file_path, content }, ctx);
const edit = (input: { file_path: string; old_string: string; new_string: string; replace_all?: boolean }) =>
  editTool.call(editTool.inputSchema.parse(input), ctx);

/** Moves a file's mtime into the future, as a concurrent writer would. */
async function touchLater(path: string) {
  const later = new Date(Date.now() + 10_000);
  await utimes(path, later, later);
}

describe('Read', () => {
  it('returns numbered lines and records the read', async () => {
    const path = join(dir, 'a.txt');
    await writeFile(path, 'one\ntwo\nthree\n');
    const out = await read({ file_path: path });
    expect(out.content).toBe('     1\tone\n     2\ttwo\n     3\tthree');
    expect(ctx.readFileState.get(path)).toMatchObject({ mtimeMs: (await stat(path)).mtimeMs });
    expect(out.record).toEqual({ filePath: path, mtimeMs: (await stat(path)).mtimeMs });
  });

  it('reads a line window with offset and limit', async () => {
    const path = join(dir, 'a.txt');
    await writeFile(path, Array.from({ length: 10 }, (_, i) => `line ${i + 1}`).join('\n'));
    expect((await read({ file_path: path, offset: 4, limit: 2 })).content).toBe(
      '     4\tline 4\n     5\tline 5',
    );
    expect((await read({ file_path: path, offset: 40 })).content).toMatch(
      /shorter than the provided offset \(40\)/,
    );
  });

  it('refuses binary files, directories, missing files and oversized whole-file reads', async () => {
    await writeFile(join(dir, 'blob.dat'), Buffer.from([1, 0, 2, 3]));
    await expect(read({ file_path: join(dir, 'blob.dat') })).rejects.toMatchObject({ code: 'BINARY' });
    await expect(read({ file_path: dir })).rejects.toMatchObject({ code: 'IS_DIRECTORY' });
    await expect(read({ file_path: join(dir, 'nope.txt') })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const big = join(dir, 'big.txt');
    await writeFile(big, 'x'.repeat(MAX_READ_FILE_BYTES + 1));
    await expect(read({ file_path: big })).rejects.toThrow(/exceeds maximum allowed size/);
  });

  it('returns an image as an image block', async () => {
    const png = join(dir, 'p.png');
    await writeFile(png, Buffer.from([0x89, 0x50, 0x4e, 0x47]));
    const out = await read({ file_path: png });
    expect(out.content).toEqual([
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw==' } },
    ]);
  });

  it('says so when a file is empty', async () => {
    await writeFile(join(dir, 'empty.txt'), '');
    expect((await read({ file_path: 'empty.txt' })).content).toMatch(/contents are empty/);
  });
});

describe('Write', () => {
  it('creates a new file (and its directories) without a prior read', async () => {
    const path = join(dir, 'new', 'deep', 'file.md');
    const out = await write(path, '# hi\n');
    expect(out.content).toBe(`File created successfully at: ${path}`);
    expect(await readFile(path, 'utf8')).toBe('# hi\n');
    expect((await stat(path)).mode & 0o777).toBe(0o644);
    expect(out.record).toMatchObject({ filePath: path, kind: 'create' });
  });

  it('refuses to overwrite a file that was not read first, leaving it untouched', async () => {
    const path = join(dir, 'a.txt');
    await writeFile(path, 'original');
    await expect(write(path, 'clobbered')).rejects.toThrow(NOT_READ_MESSAGE);
    expect(await readFile(path, 'utf8')).toBe('original');
  });

  it('overwrites a file after a read, and refuses once someone else changed it', async () => {
    const path = join(dir, 'a.txt');
    await writeFile(path, 'v1');
    await read({ file_path: path });
    await write(path, 'v2');
    expect(await readFile(path, 'utf8')).toBe('v2');
    await writeFile(path, 'changed by the user');
    await touchLater(path);
    await expect(write(path, 'v3')).rejects.toThrow(MODIFIED_SINCE_READ_MESSAGE);
    expect(await readFile(path, 'utf8')).toBe('changed by the user');
  });

  it('accepts a touched but unchanged file after a full read', async () => {
    const path = join(dir, 'a.txt');
    await writeFile(path, 'same');
    await read({ file_path: path });
    await touchLater(path);
    await write(path, 'new');
    expect(await readFile(path, 'utf8')).toBe('new');
  });

  it('writes atomically: no temp files are left behind', async () => {
    await write(join(dir, 'x.txt'), 'data');
    expect(await readdir(dir)).toEqual(['x.txt']);
  });
});

describe('Edit', () => {
  it('replaces a unique match in a file that was read', async () => {
    const path = join(dir, 'a.ts');
    await writeFile(path, 'const a = 1;\nconst b = 2;\n');
    await read({ file_path: path });
    await edit({ file_path: path, old_string: 'const b = 2;', new_string: 'const b = $&3;' });
    expect(await readFile(path, 'utf8')).toBe('const a = 1;\nconst b = $&3;\n');
  });

  it('requires a prior read', async () => {
    const path = join(dir, 'a.ts');
    await writeFile(path, 'x');
    await expect(edit({ file_path: path, old_string: 'x', new_string: 'y' })).rejects.toThrow(
      NOT_READ_MESSAGE,
    );
  });

  it('refuses an ambiguous match unless replace_all is set', async () => {
    const path = join(dir, 'a.txt');
    await writeFile(path, 'foo foo foo');
    await read({ file_path: path });
    const error = await edit({ file_path: path, old_string: 'foo', new_string: 'bar' }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ToolError);
    expect((error as ToolError).message).toMatch(
      /^Found 3 matches of the string to replace, but replace_all is false/,
    );
    expect(await readFile(path, 'utf8')).toBe('foo foo foo');
    const out = await edit({ file_path: path, old_string: 'foo', new_string: 'bar', replace_all: true });
    expect(await readFile(path, 'utf8')).toBe('bar bar bar');
    expect(out.record).toMatchObject({ replacements: 3 });
  });

  it('reports a missing match and a no-op edit', async () => {
    const path = join(dir, 'a.txt');
    await writeFile(path, 'abc');
    await read({ file_path: path });
    await expect(edit({ file_path: path, old_string: 'zzz', new_string: 'y' })).rejects.toMatchObject({
      code: 'NO_MATCH',
    });
    await expect(edit({ file_path: path, old_string: 'abc', new_string: 'abc' })).rejects.toMatchObject({
      code: 'NO_CHANGE',
    });
  });

  it('creates a new file from an empty old_string, but not over an existing one', async () => {
    const path = join(dir, 'new.md');
    await edit({ file_path: path, old_string: '', new_string: 'hello' });
    expect(await readFile(path, 'utf8')).toBe('hello');
    await expect(edit({ file_path: path, old_string: '', new_string: 'again' })).rejects.toMatchObject({
      code: 'EXISTS',
    });
  });

  it('lets consecutive edits proceed: its own write counts as a read', async () => {
    const path = join(dir, 'a.txt');
    await writeFile(path, 'one two');
    await read({ file_path: path });
    await edit({ file_path: path, old_string: 'one', new_string: '1' });
    await edit({ file_path: path, old_string: 'two', new_string: '2' });
    expect(await readFile(path, 'utf8')).toBe('1 2');
  });
});

describe('ReadFileState', () => {
  it('clones independently', () => {
    const a = new ReadFileState([['/x', { mtimeMs: 1 }]]);
    const b = a.clone();
    b.set('/y', { mtimeMs: 2 });
    b.get('/x')!.mtimeMs = 5;
    expect(a.has('/y')).toBe(false);
    expect(a.get('/x')!.mtimeMs).toBe(1);
  });
});
