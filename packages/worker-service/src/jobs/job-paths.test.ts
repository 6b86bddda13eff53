import { mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { insideBoundary } from '@engram/agent-runtime/sandbox/read-boundary';
import { tenantHomeDir } from '@engram/tenants/tenant-store';
import { afterAll, describe, expect, it } from 'vitest';
import { jobBoundary, readBoundaryForJob } from './job-paths.js';

const engramHome = mkdtempSync(join(tmpdir(), 'job-paths-'));
afterAll(() => rmSync(engramHome, { recursive: true, force: true }));

describe('readBoundaryForJob', () => {
  it("bounds a CLI job (no tenant) away from /proc, /sys, /dev and other users' homes, not from the operator's files", async () => {
    const boundary = await readBoundaryForJob({ engramHome }, {});
    expect(boundary).toEqual({ kind: 'local', ownHome: homedir() });
    for (const secret of ['/proc/self/environ', `/proc/${process.pid}/environ`, '/sys/kernel', '/dev/zero']) {
      expect(insideBoundary(boundary, secret)).toBe(false);
    }
    expect(insideBoundary(boundary, '/home/someone-else/.ssh/id_ed25519')).toBe(
      homedir().startsWith('/home/someone-else'),
    );
    // Positive controls: the operator's ENGRAM_HOME and own home stay readable.
    expect(insideBoundary(boundary, join(engramHome, 'projects', 'x', 'memory', 'MEMORY.md'))).toBe(true);
    expect(insideBoundary(boundary, join(homedir(), 'project', 'README.md'))).toBe(true);
  });

  it("bounds a tenant's job to its own area of ENGRAM_HOME", async () => {
    const boundary = await readBoundaryForJob({ engramHome }, { tenant: 'acme' });
    expect(boundary.kind).toBe('roots');
    expect(insideBoundary(boundary, '/proc/self/environ')).toBe(false);
    expect(insideBoundary(boundary, join(engramHome, 'projects', 'x', 'memory', 'MEMORY.md'))).toBe(false);
    // Positive control: the tenant's own area.
    expect(
      insideBoundary(boundary, join(tenantHomeDir(engramHome, 'acme'), 'projects', 'x', 'MEMORY.md')),
    ).toBe(true);
  });
});

describe('jobBoundary', () => {
  it("is the handler's jail with the job's read boundary; Bash's world is a local job's cwd, a tenant's own roots", async () => {
    const mem = join(engramHome, 'projects', 'x', 'memory');
    const local = await jobBoundary({ engramHome }, {}, { root: mem, bash: 'read-only' }, mem);
    expect(local).toEqual({
      kind: 'unattended',
      jail: { root: mem, bash: 'read-only' },
      read: { kind: 'local', ownHome: homedir() },
      world: [mem],
    });
    const acmeMem = join(tenantHomeDir(engramHome, 'acme'), 'projects', 'x', 'memory');
    const tenant = await jobBoundary(
      { engramHome },
      { tenant: 'acme' },
      { root: acmeMem, bash: 'read-only' },
      acmeMem,
    );
    expect(tenant.jail).toEqual({ root: acmeMem, bash: 'read-only' });
    expect(tenant.read.kind).toBe('roots');
    // Bash sees what the job may read, nothing of the operator's ENGRAM_HOME beyond the tenant's area.
    expect(tenant.world).toEqual(tenant.read.kind === 'roots' ? tenant.read.roots : []);
    expect(tenant.world.every((d) => insideBoundary(tenant.read, join(d, 'x')))).toBe(true);
    expect(tenant.world.some((d) => d === engramHome)).toBe(false);
  });
});
