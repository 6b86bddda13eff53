import { promises as fs } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBoundedContext } from '../fixtures.test-helpers.js';
import { type ReadBoundary, rootsBoundary } from '../sandbox/read-boundary.js';
import { globTool } from './glob.js';
import { grepTool } from './grep.js';
import { type ToolContext, ToolError } from './tool.js';

let base: string;
let mine: string;
let theirs: string;
let tenant: ReadBoundary;
const local: ReadBoundary = { kind: 'local', ownHome: homedir() };

beforeAll(async () => {
  base = await fs.realpath(await fs.mkdtemp(join(tmpdir(), 'search-boundary-')));
  mine = join(base, 'tenant-a');
  theirs = join(base, 'tenant-b');
  await fs.mkdir(join(mine, 'notes'), { recursive: true });
  await fs.mkdir(join(theirs, 'deep'), { recursive: true });
  await fs.writeFile(join(mine, 'notes', 'own.md'), 'TOKEN mine\n');
  await fs.writeFile(join(theirs, 'secret.md'), 'TOKEN theirs\n');
  await fs.writeFile(join(theirs, 'deep', 'more.md'), 'TOKEN theirs too\n');
  // Links inside the tenant's own tree pointing at the other tenant: a file and a directory.
  await fs.symlink(join(theirs, 'secret.md'), join(mine, 'notes', 'file-link.md'));
  await fs.symlink(theirs, join(mine, 'notes', 'dir-link'));
  await fs.symlink(theirs, join(mine, 'root-link'));
  tenant = await rootsBoundary([mine]);
});

afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

const ctxFor = (readBoundary: ReadBoundary | undefined): ToolContext =>
  readBoundedContext(mine, readBoundary);

const grep = (boundary: ReadBoundary | undefined, input: Record<string, unknown>) =>
  grepTool.call(grepTool.inputSchema.parse(input), ctxFor(boundary)).then((r) => String(r.content));
const glob = (boundary: ReadBoundary | undefined, input: Record<string, unknown>) =>
  globTool.call(globTool.inputSchema.parse(input), ctxFor(boundary)).then((r) => String(r.content));

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    if (e instanceof ToolError) return e.code;
    throw e;
  }
}

describe('Grep behind the read boundary', () => {
  it("searches the tenant's own workspace and never follows a link inside it out of the tenant", async () => {
    for (const output_mode of ['files_with_matches', 'content', 'count'] as const) {
      const out = await grep(tenant, { pattern: 'TOKEN', output_mode });
      expect(out).toContain('own.md');
      expect(out).not.toContain('theirs');
      expect(out).not.toContain('secret.md');
      expect(out).not.toContain('more.md');
    }
    expect(await grep(tenant, { pattern: 'TOKEN', path: 'notes/own.md', output_mode: 'content' })).toBe(
      '1:TOKEN mine',
    );
  });

  it("refuses another tenant's workspace, a file in it, and a root that is a symlink to it", async () => {
    expect(await refusal(grep(tenant, { pattern: 'TOKEN', path: theirs }))).toBe('OUTSIDE_BOUNDARY');
    expect(await refusal(grep(tenant, { pattern: 'TOKEN', path: join(theirs, 'secret.md') }))).toBe(
      'OUTSIDE_BOUNDARY',
    );
    expect(await refusal(grep(tenant, { pattern: 'TOKEN', path: 'root-link' }))).toBe('OUTSIDE_BOUNDARY');
    expect(await refusal(grep(tenant, { pattern: 'TOKEN', path: 'notes/file-link.md' }))).toBe(
      'OUTSIDE_BOUNDARY',
    );
    // Positive control: without a boundary (the test's own process) the same link is searched.
    expect(await grep(undefined, { pattern: 'TOKEN', path: 'root-link' })).toContain('secret.md');
  });

  it('refuses /proc/self/environ and /proc/<pid> as a files-with-matches oracle, for a tenant and a CLI job', async () => {
    for (const boundary of [tenant, local]) {
      for (const path of [
        '/proc/self/environ',
        `/proc/${process.pid}/environ`,
        `/proc/${process.pid}`,
        '/proc',
      ]) {
        expect(await refusal(grep(boundary, { pattern: 'PATH=', path }))).toBe('OUTSIDE_BOUNDARY');
      }
      expect(await refusal(grep(boundary, { pattern: 'x', path: '/sys/kernel' }))).toBe('OUTSIDE_BOUNDARY');
    }
    // The CLI boundary still searches the operator's ordinary files (positive control).
    expect(await grep(local, { pattern: 'TOKEN', path: mine })).toContain('own.md');
  });
});

describe('Glob behind the read boundary', () => {
  it("lists the tenant's own files, never what a link inside the tree points at", async () => {
    const out = await glob(tenant, { pattern: '**/*.md' });
    expect(out).toBe(join(mine, 'notes', 'own.md'));
  });

  it("refuses another tenant's directory, a symlinked root, and patterns whose base leaves the tenant", async () => {
    expect(await refusal(glob(tenant, { pattern: '**', path: theirs }))).toBe('OUTSIDE_BOUNDARY');
    expect(await refusal(glob(tenant, { pattern: '**', path: 'root-link' }))).toBe('OUTSIDE_BOUNDARY');
    expect(await refusal(glob(tenant, { pattern: '../tenant-b/**/*.md' }))).toBe('OUTSIDE_BOUNDARY');
    expect(await refusal(glob(tenant, { pattern: `${theirs}/**` }))).toBe('OUTSIDE_BOUNDARY');
    expect(await refusal(glob(tenant, { pattern: 'root-link/**' }))).toBe('OUTSIDE_BOUNDARY');
    // Positive control: the same symlinked root with no boundary lists the linked files.
    expect(await glob(undefined, { pattern: '**', path: 'root-link' })).toContain('secret.md');
  });

  it('refuses /proc, /sys and /dev for a tenant and for a CLI job', async () => {
    for (const boundary of [tenant, local]) {
      expect(await refusal(glob(boundary, { pattern: '/proc/self/*' }))).toBe('OUTSIDE_BOUNDARY');
      expect(await refusal(glob(boundary, { pattern: '*', path: `/proc/${process.pid}` }))).toBe(
        'OUTSIDE_BOUNDARY',
      );
      expect(await refusal(glob(boundary, { pattern: '/dev/*' }))).toBe('OUTSIDE_BOUNDARY');
    }
    expect(await glob(local, { pattern: '**/*.md', path: mine })).toContain('own.md');
  });

  it('a Glob root that is a file is refused as not a directory', async () => {
    expect(await refusal(glob(tenant, { pattern: '*', path: 'notes/own.md' }))).toBe('NOT_DIRECTORY');
  });
});

describe('judgeListed', () => {
  it('drops a listed name whose opened inode is outside the boundary or the judged root, keeps its own files', async () => {
    const { judgeListed } = await import('./search-boundary.js');
    // What a directory renamed into a link mid-walk would make a walker list:
    expect(await judgeListed(tenant, mine, join(mine, 'notes', 'dir-link', 'secret.md'))).toBeUndefined();
    expect(
      await judgeListed(tenant, join(mine, 'notes'), join(mine, 'root-link', 'secret.md')),
    ).toBeUndefined();
    // Inside the boundary but outside the judged search root:
    expect(await judgeListed(tenant, join(mine, 'other'), join(mine, 'notes', 'own.md'))).toBeUndefined();
    expect((await judgeListed(tenant, mine, join(mine, 'notes', 'own.md')))?.stat.isFile()).toBe(true);
  });
});
