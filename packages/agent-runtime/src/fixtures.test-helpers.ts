import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSandboxLimits } from '@engram/config/sandbox-limits';
import type { ModelServer } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { createModelClient, type ModelClient } from './model/client.js';
import { ATTENDED, type UnattendedBoundary } from './sandbox/boundary.js';
import { type ReadBoundary, rootsBoundary } from './sandbox/read-boundary.js';
import type { ToolSandbox } from './sandbox/unattended.js';
import { ReadFileState, type ToolContext } from './tools/tool.js';

// Shared test fixtures: a fresh temporary directory per test and a model client bound to the testkit server.

export async function makeTempDir(
  prefix = 'engram-runtime-',
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await realpath(await mkdtemp(join(tmpdir(), prefix)));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * Temporary directories removed after the test that made them (this registers the file's afterEach), and other
 * per-test cleanups run at the same moment.
 */
export function useTempDirs(): { tempDir(): Promise<string>; onCleanup(cleanup: () => Promise<void>): void } {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });
  return {
    async tempDir() {
      const t = await makeTempDir();
      cleanups.push(t.cleanup);
      return t.dir;
    },
    onCleanup: (cleanup) => void cleanups.push(cleanup),
  };
}

/** The write jail's layout in `base`: the root `mem` and an `outside` directory holding `target.md`. */
export function jailLayout(base: string): { base: string; mem: string; outside: string } {
  const mem = join(base, 'mem');
  const outside = join(base, 'outside');
  mkdirSync(mem);
  mkdirSync(outside);
  writeFileSync(join(outside, 'target.md'), 'untouched\n');
  return { base, mem, outside };
}

/** Every path below `dir`, sorted. */
export const listing = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: false }).map(String).sort();

export interface TenantPair {
  /** `tenant-a`, holding `own.md`; the read boundary's one root. */
  readonly mine: string;
  /** `tenant-b`, holding `secret.md` (`THEIRS`). */
  readonly theirs: string;
  readonly boundary: ReadBoundary;
}

/** Two tenants' directories for a test file (made before its tests, removed after them), and `mine`'s boundary. */
export function useTenantPair(): TenantPair {
  let base: string | undefined;
  const pair = {} as { mine: string; theirs: string; boundary: ReadBoundary };
  beforeAll(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), 'read-boundary-')));
    pair.mine = join(base, 'tenant-a');
    pair.theirs = join(base, 'tenant-b');
    await mkdir(pair.mine);
    await mkdir(pair.theirs);
    await writeFile(join(pair.mine, 'own.md'), 'mine\n');
    await writeFile(join(pair.theirs, 'secret.md'), 'THEIRS\n');
    pair.boundary = await rootsBoundary([pair.mine]);
  });
  afterAll(async () => {
    if (base) await rm(base, { recursive: true, force: true });
  });
  return pair;
}

export function clientFor(server: ModelServer, maxRetries = 2): ModelClient {
  return createModelClient({ apiKey: 'test', baseURL: server.url, maxRetries });
}

export interface ModelTestbed {
  /** The file's scripted model server (every request a test makes must be scripted). */
  readonly server: ModelServer;
  /** A model client bound to it. */
  readonly client: ModelClient;
  /** This test's temporary directory (removed after the test). */
  readonly dir: string;
}

/** Registers the hooks of a file whose tests talk to the scripted model from a fresh directory each. */
export function useModelTestbed(): ModelTestbed {
  const scripted = useModelServer({ requireScripted: true });
  let client: ModelClient | undefined;
  let dir: string | undefined;
  beforeAll(() => {
    client = clientFor(scripted.server);
  });
  beforeEach(async () => {
    const temp = await makeTempDir();
    dir = temp.dir;
    scripted.closer.defer(temp.cleanup);
  });
  const ready = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is set up in the hooks: use it inside tests`);
    return value;
  };
  return {
    get server() {
      return scripted.server;
    },
    get client() {
      return ready(client, 'the model client');
    },
    get dir() {
      return ready(dir, 'the test directory');
    },
  };
}

/**
 * A CLI fork's boundary, as the job handlers state it for a job without a tenant: `root` the directory it may
 * change (read-only to Bash), the `local` read boundary, its working directory (`root` unless given) as Bash's world.
 */
export function localForkBoundary(root: string, cwd = root): UnattendedBoundary {
  return {
    kind: 'unattended',
    jail: { root, bash: 'read-only' },
    read: { kind: 'local', ownHome: homedir() },
    world: [cwd],
  };
}

/**
 * A tool context whose boundary is `sandbox` (Bash runs in it, Write/Edit land below its root) and reads
 * anywhere: for tests of Bash alone, or of the jailed write alone.
 */
export function sandboxContext(sandbox: ToolSandbox, cwd: string): ToolContext {
  return {
    cwd,
    readFileState: new ReadFileState(),
    toolUseId: 't',
    boundary: {
      kind: 'unattended',
      read: { kind: 'roots', roots: ['/'] },
      writeRoots: [sandbox.writableRoot],
      sandbox,
    },
  };
}

/**
 * A tool context bounded by `read` alone (what Read, Grep, Glob and the read-before-write may open; writes land
 * below `cwd` through the jailed writer; no Bash), or attended without one: for tests of the read boundary.
 */
export function readBoundedContext(cwd: string, read: ReadBoundary | undefined): ToolContext {
  const base = { cwd, readFileState: new ReadFileState(), toolUseId: 't' };
  if (!read) return { ...base, boundary: ATTENDED };
  return {
    ...base,
    boundary: {
      kind: 'unattended',
      read,
      writeRoots: [cwd],
      sandbox: {
        writableRoot: cwd,
        bashWritesRoot: false,
        readable: [],
        limits: parseSandboxLimits({}),
        status: { mode: 'off', available: false, backend: 'none', reason: 'not used by this test' },
      },
    },
  };
}
