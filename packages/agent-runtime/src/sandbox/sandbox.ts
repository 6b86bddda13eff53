import { spawn } from 'node:child_process';
import { existsSync, promises as fs, lstatSync, readlinkSync } from 'node:fs';
import { isAbsolute, relative, sep } from 'node:path';
import { parseSandboxLimits, type SandboxLimits } from '@engram/config/sandbox-limits';
import { EngramError } from '@engram/errors/engram-error';
import { SANDBOX_HOME, sandboxEnvironment } from './environment.js';
import { commandCgroup, detectProcessLimit, type ProcessLimit } from './process-limit.js';
import { buildSeccompFilter, seccompSupported } from './seccomp.js';

// The OS sandbox for tool calls no person approves (memory forks, served turns; any unattended agent) and for
// Grep's rg (search-jail.ts): bubblewrap showing the command only its world (the system directories, an
// allow-list of /etc, and the directories its caller names: `SandboxWorld`; a program's narrower `ProgramWorld`), no network, a private /tmp, an empty HOME, an allowlisted
// environment, no capabilities, a new PID namespace, a seccomp filter against Unix sockets and per-command
// limits (processes, memory, CPU time, file size: ENGRAM_SANDBOX_*). Whether it can start is decided once per process by a probe that runs the real invocation;
// where it cannot, callers fail closed (unattended agents get no Bash; see unattended.ts).

export type SandboxMode = 'off' | 'auto' | 'require';
export const SANDBOX_MODES: readonly SandboxMode[] = ['off', 'auto', 'require'];
/** `off`: never sandbox, so unattended agents run without Bash; `auto` (default): probe; `require`: probe, and refuse to run unattended agents at all when the sandbox cannot start. */
export const SANDBOX_MODE_ENV = 'ENGRAM_SANDBOX';
/** Where to find bwrap, when not at a standard location. */
export const SANDBOX_BWRAP_ENV = 'ENGRAM_BWRAP';

const BWRAP_CANDIDATES = ['/usr/bin/bwrap', '/usr/local/bin/bwrap', '/bin/bwrap'];
const PROBE_TIMEOUT_MS = 10_000;

export interface SandboxStatus {
  mode: SandboxMode;
  /** Whether Bash can run in the sandbox on this host. */
  available: boolean;
  backend: 'bubblewrap' | 'none';
  bwrapPath?: string;
  /** e.g. "bubblewrap 0.8.0". */
  version?: string;
  /** Why the sandbox is unavailable (set exactly when `available` is false). */
  reason?: string;
  /** How the process-count limit holds (set when available): see process-limit.ts. */
  processLimit?: ProcessLimit;
}

/** Raised where the sandbox is required (`ENGRAM_SANDBOX=require`) and cannot start. Not retryable: the host decides. */
export class SandboxUnavailableError extends EngramError {
  constructor(readonly status: SandboxStatus) {
    super(
      'SANDBOX_UNAVAILABLE',
      `The OS sandbox is required (${SANDBOX_MODE_ENV}=require) but cannot start on this host: ${status.reason}. ` +
        'Install bubblewrap (Debian: apt-get install bubblewrap) and allow user namespaces, or set ' +
        `${SANDBOX_MODE_ENV}=auto to run unattended agents without Bash.`,
      { retryable: false },
    );
  }
}

export interface SandboxProbeOptions {
  /** Default: from ENGRAM_SANDBOX, else `auto`. */
  mode?: SandboxMode;
  /** Default: ENGRAM_BWRAP, else the first of /usr/bin/bwrap, /usr/local/bin/bwrap, /bin/bwrap. */
  bwrapPath?: string;
  platform?: NodeJS.Platform;
  env?: NodeJS.ProcessEnv;
  /** How the process count of sandboxed commands is limited here. Default: detected (`detectProcessLimit`). */
  processLimit?: ProcessLimit;
}

export type ParsedSandboxMode = { ok: true; mode: SandboxMode } | { ok: false; reason: string };

export function parseSandboxMode(env: NodeJS.ProcessEnv = process.env): ParsedSandboxMode {
  const raw = env[SANDBOX_MODE_ENV]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return { ok: true, mode: 'auto' };
  if ((SANDBOX_MODES as readonly string[]).includes(raw)) return { ok: true, mode: raw as SandboxMode };
  return {
    ok: false,
    reason: `${SANDBOX_MODE_ENV}=${env[SANDBOX_MODE_ENV]} is not one of ${SANDBOX_MODES.join(', ')}`,
  };
}

function findBwrap(env: NodeJS.ProcessEnv): string | undefined {
  const configured = env[SANDBOX_BWRAP_ENV];
  if (configured) return configured;
  return BWRAP_CANDIDATES.find((p) => existsSync(p));
}

function unavailable(mode: SandboxMode, reason: string, extra: Partial<SandboxStatus> = {}): SandboxStatus {
  return { mode, available: false, backend: 'none', reason, ...extra };
}

/** Runs the probe now (no cache): the same invocation Bash uses, on a throwaway directory. */
export async function probeSandbox(opts: SandboxProbeOptions = {}): Promise<SandboxStatus> {
  const env = opts.env ?? process.env;
  let mode: SandboxMode;
  if (opts.mode) mode = opts.mode;
  else {
    const parsed = parseSandboxMode(env);
    // A misspelt setting must not weaken anything: treat it as "required", which fails closed and loudly.
    if (!parsed.ok) return unavailable('require', parsed.reason);
    mode = parsed.mode;
  }
  if (mode === 'off') return unavailable(mode, `disabled by ${SANDBOX_MODE_ENV}=off`);
  const platform = opts.platform ?? process.platform;
  if (platform !== 'linux') {
    return unavailable(mode, `unsupported OS (${platform}): the sandbox uses bubblewrap, which needs Linux`);
  }
  if (!seccompSupported()) return unavailable(mode, `no seccomp filter for the ${process.arch} architecture`);
  const bwrapPath = opts.bwrapPath ?? findBwrap(env);
  if (!bwrapPath || !existsSync(bwrapPath)) {
    return unavailable(mode, `bubblewrap is not installed (${bwrapPath ?? 'no bwrap on this host'})`);
  }
  const scratch = await fs.mkdtemp(
    `${await fs.realpath(process.env.TMPDIR ?? '/tmp')}/engram-sandbox-probe-`,
  );
  try {
    const version = await runCaptured(bwrapPath, ['--version'], {}, undefined, PROBE_TIMEOUT_MS);
    const processLimit = opts.processLimit ?? (await detectProcessLimit());
    const cgroup = processLimit.kind === 'cgroup' ? await commandCgroup(processLimit.parent, 16) : undefined;
    const invocation = bwrapInvocation(
      bwrapPath,
      { cwd: scratch, readable: [], writable: [scratch] },
      { limits: parseSandboxLimits({}), ...(cgroup ? { cgroupProcs: cgroup.procs } : {}) },
    );
    const probe = await runCaptured(
      invocation.file,
      [...invocation.args, '/bin/sh', '-c', `echo ok > ${scratch}/probe && cat ${scratch}/probe`],
      sandboxEnvironment(env),
      invocation.seccomp,
      PROBE_TIMEOUT_MS,
    ).finally(() => void cgroup?.release()); // not awaited: its retries must not hold the process
    const versionText = version.stdout.trim() || undefined;
    if (probe.code !== 0 || probe.stdout.trim() !== 'ok') {
      const why = (probe.stderr.trim() || probe.error || `exit ${probe.code}`).split('\n')[0]!.slice(0, 300);
      return unavailable(mode, `bubblewrap cannot start a sandbox here: ${why}`, {
        bwrapPath,
        ...(versionText ? { version: versionText } : {}),
      });
    }
    // `require` asks for the whole boundary: a sandbox whose commands can start processes without bound lets
    // one fork bomb take the host, so it is refused (in `auto` it runs, and doctor says the count is not limited).
    if (mode === 'require' && processLimit.kind === 'none') {
      return unavailable(
        mode,
        `the process count of sandboxed commands cannot be limited here: ${processLimit.reason}`,
        {
          bwrapPath,
          ...(versionText ? { version: versionText } : {}),
        },
      );
    }
    return {
      mode,
      available: true,
      backend: 'bubblewrap',
      bwrapPath,
      ...(versionText ? { version: versionText } : {}),
      processLimit,
    };
  } finally {
    await fs.rm(scratch, { recursive: true, force: true });
  }
}

const cache = new Map<string, Promise<SandboxStatus>>();

/** The probe's answer for this process (run once per distinct option set). */
export function sandboxStatus(opts: SandboxProbeOptions = {}): Promise<SandboxStatus> {
  const env = opts.env ?? process.env;
  const key = JSON.stringify([
    opts.mode ?? env[SANDBOX_MODE_ENV] ?? '',
    opts.bwrapPath ?? env[SANDBOX_BWRAP_ENV] ?? '',
    opts.platform ?? process.platform,
    opts.processLimit ?? null,
  ]);
  let status = cache.get(key);
  if (!status) {
    status = probeSandbox(opts);
    cache.set(key, status);
  }
  return status;
}

/** Forget cached probe results (tests that change ENGRAM_SANDBOX). */
export function resetSandboxStatusCache(): void {
  cache.clear();
}

/** One line for doctor, /readyz and logs: which mode runs. */
export function describeSandbox(status: SandboxStatus): string {
  if (status.available) {
    const procs =
      status.processLimit?.kind === 'none'
        ? `process count NOT limited: ${status.processLimit.reason}`
        : `process count limited by ${status.processLimit?.kind === 'cgroup' ? 'a pids cgroup' : 'RLIMIT_NPROC'}`;
    return `${status.version ?? 'bubblewrap'} (${SANDBOX_MODE_ENV}=${status.mode}): unattended Bash runs sandboxed (only its own world visible, no network, private /tmp; ${procs})`;
  }
  return `unavailable (${SANDBOX_MODE_ENV}=${status.mode}): ${status.reason}; unattended agents run without Bash, writes stay jailed`;
}

/**
 * Everything a sandboxed command sees besides the system directories: its world, stated by the caller. Nothing
 * else of the host is mounted (no `/root`, no `/home`, no ENGRAM_HOME beyond what is listed, no other
 * workspace): the sandbox is an allow-list, built here once for forks, served Bash and Grep's rg alike.
 */
export interface SandboxWorld {
  /** A shell's world (the default): what Bash and `engram sandbox` run in. */
  kind?: 'shell';
  /** Working directory inside the sandbox: must be inside `readable`, `writable` or an alias's `visible`. */
  cwd: string;
  /** Directories bound read-only (real paths). */
  readable: readonly string[];
  /** Directories bound read-write (real paths). */
  writable: readonly string[];
  /** Directories bound at another path (`actual` at `visible`: a staged fork's copy at the live path). */
  aliases?: readonly { visible: string; actual: string; writable: boolean }[];
}

/**
 * One program's world, without a shell (Grep's rg in the search jail): the system directories only (no /etc,
 * /dev, /proc or /tmp: a program that needs none of them), the program bound read-only at `program.at`, and
 * directories handed over as descriptors of the child (`--ro-bind-fd`: the inode the caller judged, whatever
 * its name points at by now), no environment. No limits: the caller bounds the program's time and output.
 */
export interface ProgramWorld {
  kind: 'program';
  program: { path: string; at: string };
  /** Child descriptors bound read-only at a path. */
  descriptors: readonly { fd: number; at: string }[];
  cwd: string;
}

/** How a process-count limit holds on this host (see `processLimitBackend`). */
export type ProcessLimitBackend = 'rlimit' | 'cgroup' | 'none';

export interface BwrapOptions {
  /** Default: from ENGRAM_SANDBOX_* (`parseSandboxLimits`). A shell's world only. */
  limits?: SandboxLimits;
  /**
   * A pids cgroup's `cgroup.procs` to enter before bwrap starts (root workers, where RLIMIT_NPROC does not
   * hold): the command line is then `/bin/sh -c 'echo $$ > procs; exec bwrap …'`.
   */
  cgroupProcs?: string;
}

export interface BwrapInvocation {
  file: string;
  /**
   * Arguments up to and including the limits prefix (a shell's world) or the program (a program's world);
   * append the command and its arguments.
   */
  args: string[];
  /** The seccomp program, to be written to the child's fd 3 (`--seccomp 3`). */
  seccomp: Buffer;
  /** Called once the command has ended (removes its cgroup). */
  release?: () => Promise<void>;
}

/** The child's descriptor that carries the seccomp program. */
export const SECCOMP_FD = 3;

function isUnder(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/**
 * The system directories, for every world: bound read-only when a directory, recreated when a symlink
 * (merged /usr). A program needs its libraries, a shell its tools; none of them holds the host's data.
 */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib64', '/lib32', '/libx32'];
/**
 * The part of /etc a shell and its tools need: the dynamic loader's cache and configuration, name-service
 * switch, Debian's alternatives (`awk`, `pager` are links through it), the host name and the time zone. Not `passwd`/`group`
 * (the operator's accounts), not `gitconfig` or `ssl` or `hosts`: nothing an operator configures for itself.
 */
export const SANDBOX_ETC = [
  'alternatives',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'nsswitch.conf',
  'hostname',
  'localtime',
  'timezone',
  'locale.alias',
];

let systemMounts: string[] | undefined;
function systemMountArgs(): string[] {
  if (systemMounts) return systemMounts;
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(dir);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(dir), dir);
    else if (st.isDirectory()) args.push('--ro-bind', dir, dir);
  }
  systemMounts = args;
  return args;
}

let etcMounts: string[] | undefined;
function etcMountArgs(): string[] {
  if (etcMounts) return etcMounts;
  const args: string[] = [];
  for (const name of SANDBOX_ETC) {
    const path = `/etc/${name}`;
    if (existsSync(path)) args.push('--ro-bind', path, path);
  }
  etcMounts = args;
  return args;
}

let seccompFilter: Buffer | undefined;

/**
 * `ulimit` (bash) for the limits: processes, address space (KiB), file size (KiB blocks), no core files, and
 * CPU seconds with the hard limit one second above the soft one (SIGXCPU first, so the result can name it).
 */
function ulimitLine(limits: SandboxLimits): string {
  return (
    `ulimit -u ${limits.maxProcesses} -v ${limits.memoryMb * 1024} -t ${limits.cpuSeconds + 1} ` +
    `-f ${limits.fileMb * 1024} -c 0 && ulimit -S -t ${limits.cpuSeconds} || exit 125; exec "$@"`
  );
}

/** A shell world's own mounts: its directories and aliases, parents before children. */
function worldMountArgs(world: SandboxWorld): string[] {
  const mounts = [
    ...world.readable
      .filter((p) => !world.writable.includes(p))
      .map((p) => ({ from: p, at: p, flag: '--ro-bind', alias: false })),
    ...world.writable.map((p) => ({ from: p, at: p, flag: '--bind', alias: false })),
    ...(world.aliases ?? []).map((a) => ({
      from: a.actual,
      at: a.visible,
      flag: a.writable ? '--bind' : '--ro-bind',
      alias: true,
    })),
  ];
  for (const { from, at } of mounts) {
    for (const p of [from, at]) {
      if (!isAbsolute(p) || p === '/' || p.includes('\0')) {
        throw new Error(`sandbox world: ${JSON.stringify(p)} is not an absolute directory other than /`);
      }
    }
  }
  // Parents before children (a writable directory inside a readable one stays writable, and the reverse);
  // an alias after a directory of the same depth, so it covers it.
  const depth = (p: string) => p.split(sep).length;
  mounts.sort((a, b) => depth(a.at) - depth(b.at) || Number(a.alias) - Number(b.alias));
  if (!mounts.some(({ at }) => isUnder(world.cwd, at))) {
    throw new Error(`sandbox world: the working directory ${world.cwd} is outside its directories`);
  }
  const args: string[] = [];
  const seen = new Set<string>();
  for (const { from, at, flag } of mounts) {
    if (seen.has(at)) continue;
    seen.add(at);
    args.push(flag, from, at);
  }
  return args;
}

/**
 * The bubblewrap command line for `world`: the one place a sandbox's argv is built. Every world shares
 * nothing with the host (`--unshare-all`: user, PID, network, IPC, UTS, cgroup namespaces), keeps no
 * capabilities, dies with its parent, starts a new session, mounts the system directories read-only on an
 * empty root that is made read-only once everything is mounted, and runs under the seccomp filter (fd 3).
 *
 * A shell's world adds the /etc allow-list, a minimal /dev, the /proc of the command's own PID namespace, a
 * private /tmp (sized to the file limit) with an empty HOME, then the world's readable and writable
 * directories and aliases (parents before children); after `--`, bash applies the limits (`ulimit`, inside
 * the new user namespace, so RLIMIT_NPROC counts this sandbox's processes only) and execs the command.
 * A program's world adds only the program and its descriptors, and runs the program itself.
 */
export function bwrapInvocation(
  bwrapPath: string,
  world: SandboxWorld | ProgramWorld,
  opts: BwrapOptions = {},
): BwrapInvocation {
  const args = ['--die-with-parent', '--new-session', '--unshare-all', '--cap-drop', 'ALL'];
  if (world.kind === 'program') args.push('--clearenv');
  args.push(...systemMountArgs());
  let run: string[];
  if (world.kind === 'program') {
    args.push('--ro-bind', world.program.path, world.program.at);
    for (const { fd, at } of world.descriptors) args.push('--ro-bind-fd', String(fd), at);
    run = [world.program.at];
  } else {
    const limits = opts.limits ?? parseSandboxLimits();
    args.push(
      ...etcMountArgs(),
      '--dev',
      '/dev',
      '--proc',
      '/proc',
      '--size',
      String(limits.fileMb * 1024 * 1024),
      '--tmpfs',
      '/tmp',
      '--dir',
      SANDBOX_HOME,
      ...worldMountArgs(world),
    );
    run = ['/bin/bash', '-c', ulimitLine(limits), 'engram-limits'];
  }
  // The root tmpfs bwrap builds on is writable (and in RAM): made read-only once everything is mounted.
  args.push('--remount-ro', '/', '--chdir', world.cwd, '--seccomp', String(SECCOMP_FD), '--', ...run);
  seccompFilter ??= buildSeccompFilter();
  if (opts.cgroupProcs) {
    return {
      file: '/bin/sh',
      args: ['-c', 'echo $$ > "$0" || exit 125; exec "$@"', opts.cgroupProcs, bwrapPath, ...args],
      seccomp: seccompFilter,
    };
  }
  return { file: bwrapPath, args, seccomp: seccompFilter };
}

interface Captured {
  code: number | null;
  stdout: string;
  stderr: string;
  error?: string;
}

function runCaptured(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  seccomp: Buffer | undefined,
  timeoutMs: number,
): Promise<Captured> {
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      env,
      stdio: seccomp ? ['ignore', 'pipe', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    if (seccomp) {
      const fd3 = child.stdio[3] as NodeJS.WritableStream;
      fd3.on('error', () => {});
      fd3.end(seccomp);
    }
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ code: null, stdout, stderr, error: e.message });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
