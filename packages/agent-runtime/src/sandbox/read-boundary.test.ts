import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readBoundedContext, useTenantPair } from '../fixtures.test-helpers.js';
import { readTool } from '../tools/read.js';
import { type ToolContext, ToolError } from '../tools/tool.js';
import { writeTool } from '../tools/write.js';
import { insideBoundary, type ReadBoundary, ReadBoundaryError, readFileBounded } from './read-boundary.js';

const tenants = useTenantPair();

const ctxFor = (readBoundary?: ReadBoundary): ToolContext => readBoundedContext(tenants.mine, readBoundary);

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    if (e instanceof ReadBoundaryError || e instanceof ToolError) return e.code;
    throw e;
  }
}

describe('readFileBounded', () => {
  it("reads the tenant's own file and refuses another tenant's, directly or through a link", async () => {
    expect(
      (await readFileBounded(tenants.boundary, join(tenants.mine, 'own.md'), 1024)).data.toString(),
    ).toBe('mine\n');
    expect(await codeOf(readFileBounded(tenants.boundary, join(tenants.theirs, 'secret.md'), 1024))).toBe(
      'OUTSIDE_BOUNDARY',
    );
    await fs.symlink(join(tenants.theirs, 'secret.md'), join(tenants.mine, 'link.md'));
    await fs.symlink(tenants.theirs, join(tenants.mine, 'dirlink'));
    expect(await codeOf(readFileBounded(tenants.boundary, join(tenants.mine, 'link.md'), 1024))).toBe(
      'OUTSIDE_BOUNDARY',
    );
    expect(
      await codeOf(readFileBounded(tenants.boundary, join(tenants.mine, 'dirlink', 'secret.md'), 1024)),
    ).toBe('OUTSIDE_BOUNDARY');
    // A link that stays inside is fine: the inode is judged, not the name.
    await fs.symlink(join(tenants.mine, 'own.md'), join(tenants.mine, 'inner.md'));
    expect(
      (await readFileBounded(tenants.boundary, join(tenants.mine, 'inner.md'), 1024)).data.toString(),
    ).toBe('mine\n');
  });

  it('caps on the bytes read, not on stat.size (a /proc file reports size 0)', async () => {
    const status = '/proc/self/status';
    expect((await fs.stat(status)).size).toBe(0);
    expect(await codeOf(readFileBounded(undefined, status, 16))).toBe('TOO_LARGE');
    expect((await readFileBounded(undefined, status, 1 << 20)).data.length).toBeGreaterThan(16);
  });

  it('refuses devices and FIFOs without blocking, and other reads proceed meanwhile', async () => {
    expect(await codeOf(readFileBounded(undefined, '/dev/zero', 1024))).toBe('NOT_REGULAR');
    const fifos = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const path = join(tenants.mine, `pipe-${i}`);
        execFileSync('mkfifo', [path]);
        return path;
      }),
    );
    // Eight FIFOs (more than the libuv pool's four threads) then a normal read: all answer promptly.
    const results = await Promise.all([
      ...fifos.map((f) => codeOf(readFileBounded(tenants.boundary, f, 1024))),
      codeOf(readFileBounded(tenants.boundary, join(tenants.mine, 'own.md'), 1024)),
    ]);
    expect(results).toEqual([...fifos.map(() => 'NOT_REGULAR'), 'ok']);
  });

  it('local tenants.boundary: anything but /proc, /sys, /dev and other homes', () => {
    const local: ReadBoundary = { kind: 'local', ownHome: '/home/me' };
    expect(insideBoundary(local, '/tmp/x')).toBe(true);
    expect(insideBoundary(local, '/home/me/notes.md')).toBe(true);
    expect(insideBoundary(local, '/proc/1/environ')).toBe(false);
    expect(insideBoundary(local, '/sys/kernel')).toBe(false);
    expect(insideBoundary(local, '/dev/zero')).toBe(false);
    expect(insideBoundary(local, '/home/other/.ssh/id_ed25519')).toBe(false);
    expect(insideBoundary(local, '/root/.ssh/id_ed25519')).toBe(false);
  });
});

describe('Read and Write with a read boundary', () => {
  it('Read: own file works, another tenant and /proc/self/environ are refused', async () => {
    const own = await readTool.call({ file_path: join(tenants.mine, 'own.md') }, ctxFor(tenants.boundary));
    expect(own.content).toContain('mine');
    expect(
      await codeOf(readTool.call({ file_path: join(tenants.theirs, 'secret.md') }, ctxFor(tenants.boundary))),
    ).toBe('OUTSIDE_BOUNDARY');
    expect(await codeOf(readTool.call({ file_path: '/proc/self/environ' }, ctxFor(tenants.boundary)))).toBe(
      'OUTSIDE_BOUNDARY',
    );
    expect(await codeOf(readTool.call({ file_path: '/proc/self/environ' }, ctxFor({ kind: 'local' })))).toBe(
      'OUTSIDE_BOUNDARY',
    );
  });

  it("Write's read-before-write of a FIFO fails fast instead of blocking", async () => {
    const fifo = join(tenants.mine, 'write-pipe');
    execFileSync('mkfifo', [fifo]);
    expect(await codeOf(writeTool.call({ file_path: fifo, content: 'x' }, ctxFor(tenants.boundary)))).toBe(
      'NOT_REGULAR',
    );
  });
});
