import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script (it must run before anything is installed), no type declarations
import { staleReason } from '../../../scripts/ensure-installed.mjs';

// The install pre-step of `npm run dev` / `npm test`: when is a tree installed, missing or stale?

function tree(lock: Record<string, unknown>, installed?: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'engram-ensure-'));
  writeFileSync(join(dir, 'package-lock.json'), JSON.stringify({ packages: lock }));
  if (installed) {
    mkdirSync(join(dir, 'node_modules'));
    writeFileSync(join(dir, 'node_modules', '.package-lock.json'), JSON.stringify({ packages: installed }));
  }
  return dir;
}

const lock = {
  '': { name: 'root' },
  'node_modules/zod': { version: '4.6.7' },
  'node_modules/@biomejs/cli-darwin-arm64': { version: '2.6.8', optional: true },
  'node_modules/@engram/agent': { resolved: 'apps/agent', link: true },
};

describe('ensure-installed', () => {
  it('says node_modules is missing on a fresh clone', () => {
    expect(staleReason(tree(lock))).toBe('node_modules is missing');
  });

  it('accepts a tree that holds every non-optional package at the locked version', () => {
    const installed = {
      'node_modules/zod': { version: '4.6.7' },
      'node_modules/@engram/agent': lock['node_modules/@engram/agent'],
    };
    expect(staleReason(tree(lock, installed))).toBeUndefined();
  });

  it('is stale when the lockfile moved on: a version changed or a package is new', () => {
    const older = {
      'node_modules/zod': { version: '4.5.0' },
      'node_modules/@engram/agent': lock['node_modules/@engram/agent'],
    };
    expect(staleReason(tree(lock, older))).toBe('zod is 4.5.0 but package-lock.json wants 4.6.7');
    expect(staleReason(tree(lock, { 'node_modules/zod': { version: '4.6.7' } }))).toBe(
      '@engram/agent is not installed',
    );
  });

  it('finds the real checkout installed', () => {
    expect(staleReason()).toBeUndefined();
  });
});
