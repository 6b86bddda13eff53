import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useTempDirs } from '../fixtures.test-helpers.js';
import { bashTool } from '../tools/bash.js';
import { editTool } from '../tools/edit.js';
import { globTool } from '../tools/glob.js';
import { grepTool } from '../tools/grep.js';
import { readTool } from '../tools/read.js';
import { type CanUseTool, ReadFileState, type ToolContext, ToolError } from '../tools/tool.js';
import { writeTool } from '../tools/write.js';
import { actualPath, type UnattendedBoundary, visiblePath, visibleText } from './boundary.js';
import { gatedPolicy, type PreparedBoundary, prepareUnattended } from './unattended.js';

// The path alias of an unattended boundary (boundary.ts): a staged fork's prompt names the live memory
// directory, its files are a private copy below it (`<live>/.staging/<job>`). Every file tool maps a path under
// the live directory to the copy before it opens or judges anything, judges what it opened, and shows the live
// path; Bash sees the copy mounted at the live path.

const { tempDir } = useTempDirs();

/** A live memory directory, its staged copy, and another tenant's file a link in the copy points at. */
async function staged() {
  const dir = await tempDir();
  const live = join(dir, 'home', 'memory');
  const copy = join(live, '.staging', 'job-1');
  const outside = join(dir, 'rival');
  mkdirSync(copy, { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(live, 'a.md'), 'LIVE-A\n');
  writeFileSync(join(live, 'only-live.md'), 'ONLY-LIVE\n');
  writeFileSync(join(copy, 'a.md'), 'COPY-A\n');
  writeFileSync(join(outside, 'secret.md'), 'RIVAL-SECRET\n');
  symlinkSync(join(outside, 'secret.md'), join(copy, 'link.md'));
  symlinkSync(outside, join(copy, 'dirlink'));
  const boundary = (alias: boolean, bash: 'read-only' | 'write-root' = 'read-only'): UnattendedBoundary => ({
    kind: 'unattended',
    jail: { root: copy, bash },
    // A tenant's job: its own area (which holds the live directory and the copy), not the rival's.
    read: { kind: 'roots', roots: [join(dir, 'home')] },
    world: [join(dir, 'home')],
    ...(alias ? { alias: { visible: live, actual: copy } } : {}),
  });
  return { base: dir, live, copy, outside, boundary };
}

const ctxIn = (prepared: PreparedBoundary, cwd: string): ToolContext => ({
  cwd,
  readFileState: new ReadFileState(),
  toolUseId: 't',
  boundary: prepared,
});

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    if (e instanceof ToolError) return e.code;
    throw e;
  }
}

describe('the path alias: mapping', () => {
  it('maps below `visible` to the same path below `actual`, leaves `actual` and everything else alone, and shows `visible`', () => {
    const alias = { visible: '/m', actual: '/m/.staging/j' };
    expect(actualPath(alias, '/m/a.md')).toBe('/m/.staging/j/a.md');
    expect(actualPath(alias, '/m')).toBe('/m/.staging/j');
    expect(actualPath(alias, '/m/.staging/j/a.md')).toBe('/m/.staging/j/a.md');
    // Normalised first: `..` leaves `visible` (then nothing is mapped), never `actual` by way of the mapping.
    expect(actualPath(alias, '/m/x/../../etc/passwd')).toBe('/etc/passwd');
    expect(actualPath(alias, '/m/.staging/other/a.md')).toBe('/m/.staging/j/.staging/other/a.md');
    expect(actualPath(alias, '/mx/a.md')).toBe('/mx/a.md');
    expect(visiblePath(alias, '/m/.staging/j/sub/a.md')).toBe('/m/sub/a.md');
    expect(visiblePath(alias, '/m/.staging/j2/a.md')).toBe('/m/.staging/j2/a.md');
    expect(visibleText(alias, "'/m/.staging/j/a.md' and /m/.staging/j2/b.md")).toBe(
      "'/m/a.md' and /m/.staging/j2/b.md",
    );
    // Without an alias: every path as it is.
    expect(actualPath(undefined, '/m/a.md')).toBe('/m/a.md');
  });

  it('refuses an alias whose copy the run could not see anyway', async () => {
    const s = await staged();
    await expect(
      prepareUnattended({ ...s.boundary(false), alias: { visible: s.live, actual: s.outside } }),
    ).rejects.toMatchObject({ code: 'INVALID_BOUNDARY' });
  });
});

describe('the path alias: file tools', () => {
  it('Read opens the copy at the live path and shows the live path; without the alias the live file (positive control)', async () => {
    const s = await staged();
    const ctx = ctxIn(await prepareUnattended(s.boundary(true)), s.live);
    const out = await readTool.call({ file_path: join(s.live, 'a.md') }, ctx);
    expect(out.content).toBe('     1\tCOPY-A');
    expect(out.record).toMatchObject({ filePath: join(s.live, 'a.md') });
    expect(ctx.readFileState.has(join(s.live, 'a.md'))).toBe(true);
    expect(ctx.readFileState.has(join(s.copy, 'a.md'))).toBe(false);
    // A relative path resolves against the working directory (the live one) first.
    expect((await readTool.call({ file_path: 'a.md' }, ctx)).content).toBe('     1\tCOPY-A');
    // The copy's own path is the same file, shown as the live one.
    const direct = await readTool.call({ file_path: join(s.copy, 'a.md') }, ctx);
    expect(direct.record).toMatchObject({ filePath: join(s.live, 'a.md') });
    // What is only in the live directory is not in the copy.
    expect(await codeOf(readTool.call({ file_path: join(s.live, 'only-live.md') }, ctx))).toBe('NOT_FOUND');
    // Positive control: the same boundary without the alias reads the live file.
    const plain = ctxIn(await prepareUnattended(s.boundary(false)), s.live);
    expect((await readTool.call({ file_path: join(s.live, 'a.md') }, plain)).content).toBe('     1\tLIVE-A');
  });

  it('Read: a link or `..` out of the alias is still refused, judged on what was opened, and the refusal shows the live path', async () => {
    const s = await staged();
    const ctx = ctxIn(await prepareUnattended(s.boundary(true)), s.live);
    for (const file_path of [
      join(s.live, 'link.md'),
      join(s.live, 'dirlink', 'secret.md'),
      `${s.live}/../../rival/secret.md`,
    ]) {
      const error = await readTool.call({ file_path }, ctx).then(
        () => undefined,
        (e: unknown) => e as ToolError,
      );
      expect(error?.code, file_path).toBe('OUTSIDE_BOUNDARY');
      expect(error?.message, file_path).not.toContain('.staging');
    }
  });

  it('Write and Edit land in the copy, never in the live directory, and say the live path; a link out is refused', async () => {
    const s = await staged();
    const ctx = ctxIn(await prepareUnattended(s.boundary(true)), s.live);
    const created = await writeTool.call({ file_path: join(s.live, 'new.md'), content: 'NEW\n' }, ctx);
    expect(created.content).toBe(`File created successfully at: ${join(s.live, 'new.md')}`);
    expect(created.record).toMatchObject({ filePath: join(s.live, 'new.md'), kind: 'create' });
    expect(readFileSync(join(s.copy, 'new.md'), 'utf8')).toBe('NEW\n');
    expect(existsSync(join(s.live, 'new.md'))).toBe(false);
    // Read before write, keyed by the live path: an unread file is refused, a read one edited in the copy.
    expect(
      await codeOf(
        editTool.call(
          editTool.inputSchema.parse({
            file_path: join(s.live, 'a.md'),
            old_string: 'COPY',
            new_string: 'X',
          }),
          ctx,
        ),
      ),
    ).toBe('NOT_READ');
    await readTool.call({ file_path: join(s.live, 'a.md') }, ctx);
    const edited = await editTool.call(
      editTool.inputSchema.parse({
        file_path: join(s.live, 'a.md'),
        old_string: 'COPY',
        new_string: 'EDITED',
      }),
      ctx,
    );
    expect(edited.record).toMatchObject({ filePath: join(s.live, 'a.md'), kind: 'update' });
    expect(readFileSync(join(s.copy, 'a.md'), 'utf8')).toBe('EDITED-A\n');
    expect(readFileSync(join(s.live, 'a.md'), 'utf8')).toBe('LIVE-A\n');
    // A link in the copy, or `..` out of it: the jail and the read boundary decide, on what they open.
    for (const file_path of [join(s.live, 'dirlink', 'x.md'), `${s.live}/../../rival/x.md`]) {
      const error = await writeTool.call({ file_path, content: 'pwned' }, ctx).then(
        () => undefined,
        (e: unknown) => e as ToolError,
      );
      expect(error, file_path).toBeInstanceOf(ToolError);
      expect(error?.message, file_path).not.toContain('.staging');
    }
    expect(readFileSync(join(s.outside, 'secret.md'), 'utf8')).toBe('RIVAL-SECRET\n');
    expect(existsSync(join(s.outside, 'x.md'))).toBe(false);
  });

  it('Glob and Grep search the copy and list it under the live path; a link out is refused', async () => {
    const s = await staged();
    writeFileSync(join(s.copy, 'b.md'), 'COPY-B TOKEN\n');
    const ctx = ctxIn(await prepareUnattended(s.boundary(true)), s.live);
    const listed = String((await globTool.call({ pattern: '*.md', path: s.live }, ctx)).content).split('\n');
    // Glob lists files, not links it would have to follow (link.md points out of the boundary).
    expect(listed.sort()).toEqual([join(s.live, 'a.md'), join(s.live, 'b.md')]);
    const absolute = String((await globTool.call({ pattern: `${s.live}/*.md` }, ctx)).content);
    expect(absolute.split('\n').sort()).toEqual([join(s.live, 'a.md'), join(s.live, 'b.md')]);
    const grep = (input: Record<string, unknown>) =>
      grepTool.call(grepTool.inputSchema.parse(input), ctx).then((r) => String(r.content));
    // Shown relative to the working directory (the live one), as any Grep result is.
    expect(await grep({ pattern: 'TOKEN', path: s.live })).toBe('Found 1 file\nb.md');
    expect(await grep({ pattern: 'COPY', output_mode: 'content' })).toBe(
      'a.md:1:COPY-A\nb.md:1:COPY-B TOKEN',
    );
    expect(await grep({ pattern: 'LIVE|ONLY', path: s.live })).toBe('No files found');
    expect(await grep({ pattern: 'TOKEN', path: join(s.live, 'b.md'), output_mode: 'count' })).toBe(
      'b.md:1\n\nFound 1 total occurrence across 1 file.',
    );
    for (const [tool, input] of [
      [grepTool, { pattern: 'SECRET', path: join(s.live, 'dirlink') }],
      [globTool, { pattern: '**', path: join(s.live, 'dirlink') }],
    ] as const) {
      const error = await tool.call(tool.inputSchema.parse(input) as never, ctx).then(
        () => undefined,
        (e: unknown) => e as ToolError,
      );
      expect(error?.code).toBe('OUTSIDE_BOUNDARY');
      expect(error?.message).not.toContain('.staging');
    }
  });
});

describe('the path alias: Bash', () => {
  it('sees the copy at the live path (read-only to Bash by default), and writes land in the copy where Bash may write', async () => {
    const s = await staged();
    const run = async (command: string, bash: 'read-only' | 'write-root' = 'read-only') => {
      const prepared = await prepareUnattended(s.boundary(true, bash));
      expect(prepared.sandbox.status.available).toBe(true);
      return String((await bashTool.call({ command }, ctxIn(prepared, s.live))).content);
    };
    expect(await run(`cat ${s.live}/a.md; pwd`)).toBe(`COPY-A\n${s.live}`);
    expect(await run(`cat ${s.live}/only-live.md`)).toMatch(/No such file or directory/);
    // The copy's own name, and the other staging copies, are not in Bash's world.
    expect(await run(`ls -A ${s.live}`)).toBe('a.md\ndirlink\nlink.md');
    expect(await run(`cat ${s.live}/link.md`)).toMatch(/No such file or directory/);
    // The jail's rule: read-only to Bash unless granted.
    expect(await run(`echo w > ${s.live}/w.md`)).toMatch(/Read-only file system/);
    expect(existsSync(join(s.copy, 'w.md'))).toBe(false);
    expect(await run(`echo w > ${s.live}/w.md && cat w.md`, 'write-root')).toBe('w');
    expect(readFileSync(join(s.copy, 'w.md'), 'utf8')).toBe('w\n');
    expect(existsSync(join(s.live, 'w.md'))).toBe(false);
    // Positive control: without the alias, the live directory itself.
    const plain = await prepareUnattended(s.boundary(false));
    expect(String((await bashTool.call({ command: 'cat a.md' }, ctxIn(plain, s.live))).content)).toBe(
      'LIVE-A',
    );
  }, 30_000);
});

describe('the path alias: the permission policy', () => {
  it('is asked about the file the tool opens (the copy), and its refusals show the live path', async () => {
    const s = await staged();
    const asked: Array<Record<string, unknown>> = [];
    // A policy over the copy, as a staged job builds it: it judges paths below the copy and names the copy.
    const policy: CanUseTool = (_tool, input) => {
      asked.push(input);
      const path = String(input.file_path ?? input.path);
      return path.startsWith(`${s.copy}/`) && !path.endsWith('link.md')
        ? { behavior: 'allow' }
        : { behavior: 'deny', message: `only files inside ${s.copy}, not ${path}` };
    };
    const prepared = await prepareUnattended(s.boundary(true));
    const gated = gatedPolicy(policy, prepared);
    const ask = (name: string, input: Record<string, unknown>) =>
      gated({ name }, input, { toolUseId: 't', cwd: s.live });
    expect(await ask('Write', { file_path: join(s.live, 'new.md'), content: 'x' })).toEqual({
      behavior: 'allow',
    });
    expect(await ask('Edit', { file_path: 'a.md' })).toEqual({ behavior: 'allow' });
    expect(await ask('Grep', { pattern: 'x', path: s.live })).toMatchObject({ behavior: 'deny' });
    expect(asked.map((i) => i.file_path ?? i.path)).toEqual([
      join(s.copy, 'new.md'),
      join(s.copy, 'a.md'),
      s.copy,
    ]);
    // The link in the copy is judged as the copy's file; the refusal names the live directory only.
    const link = await ask('Write', { file_path: join(s.live, 'link.md'), content: 'x' });
    expect(link).toEqual({
      behavior: 'deny',
      message: `only files inside ${s.live}, not ${join(s.live, 'link.md')}`,
    });
    // `..` out of the live directory is not mapped: the policy sees where it leads.
    expect(await ask('Write', { file_path: `${s.live}/../../rival/x.md` })).toMatchObject({
      behavior: 'deny',
    });
    expect(asked.at(-1)!.file_path).toBe(join(s.outside, 'x.md'));
    // The model's own input is left as it wrote it (the transcript records that).
    const input = { file_path: join(s.live, 'new.md') };
    await ask('Write', input);
    expect(input.file_path).toBe(join(s.live, 'new.md'));
    // Positive control: without the alias the policy is asked about the live path as given.
    await gatedPolicy(policy, await prepareUnattended(s.boundary(false)))({ name: 'Write' }, input, {
      toolUseId: 't',
      cwd: s.live,
    });
    expect(asked.at(-1)!.file_path).toBe(join(s.live, 'new.md'));
  });
});
