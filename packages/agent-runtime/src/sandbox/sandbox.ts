import { spawn } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import { isAbsolute, relative, sep } from 'node:path';
import { SANDBOX_HOME, sandboxEnvironment } from './environment.js';
import { buildSeccompFilter, seccompSupported } from './seccomp.js';

// The OS sandbox for tool calls no person approves (memory forks; any unattended agent): bubblewrap with a
// read-only view of the host, one writable directory at most, no network, a private /tmp, an empty HOME,
// an allowlisted environment, no capabilities, a new PID namespace and a seccomp filter against Unix
// sockets. Whether it can start is decided once per process by a probe that runs the real invocation;
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
}

/** Raised where the sandbox is required (`ENGRAM_SANDBOX=require`) and cannot start. Not retryable: the host decides. */
export class SandboxUnavailableError extends Error {
  override name = 'SandboxUnavailableError';
  readonly code = 'SANDBOX_UNAVAILABLE';
  readonly retryable = false;
  constructor(readonly status: SandboxStatus) {
    super(
      `The OS sandbox is required (${SANDBOX_MODE_ENV}=require) but cannot start on this host: ${status.reason}. ` +
        'Install bubblewrap (Debian: apt-get install bubblewrap) and allow user namespaces, or set ' +
        `${SANDBOX_MODE_ENV}=auto to run unattended agents without Bash.`,
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
    const invocation = bwrapInvocation(bwrapPath, { cwd: scratch, writable: [scratch] });
    const probe = await runCaptured(
      invocation.file,
      [...invocation.args, '/bin/sh', '-c', `echo ok > ${scratch}/probe && cat ${scratch}/probe`],
      sandboxEnvironment(env),
      invocation.seccomp,
      PROBE_TIMEOUT_MS,
    );
    const versionText = version.stdout.trim() || undefined;
    if (probe.code !== 0 || probe.stdout.trim() !== 'ok') {
      const why = (probe.stderr.trim() || probe.error || `exit ${probe.code}`).split('\n')[0]!.slice(0, 300);
      return unavailable(mode, `bubblewrap cannot start a sandbox here: ${why}`, {
        bwrapPath,
        ...(versionText ? { version: versionText } : {}),
      });
    }
    return {
      mode,
      available: true,
      backend: 'bubblewrap',
      bwrapPath,
      ...(versionText ? { version: versionText } : {}),
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
    return `${status.version ?? 'bubblewrap'} (${SANDBOX_MODE_ENV}=${status.mode}): unattended Bash runs sandboxed (read-only host, no network, private /tmp)`;
  }
  return `unavailable (${SANDBOX_MODE_ENV}=${status.mode}): ${status.reason}; unattended agents run without Bash, writes stay jailed`;
}

export interface BwrapSpec {
  /** Working directory inside the sandbox (visible read-only unless inside a writable path). */
  cwd: string;
  /** Directories the command may write (real paths). Everything else is read-only or private. */
  writable: readonly string[];
  /** Directories replaced by an empty tmpfs (other tenants' data on a shared host). */
  hidden?: readonly string[];
  /** Directories under a hidden one that stay visible, read-only (a tenant's own area). */
  readable?: readonly string[];
}

export interface BwrapInvocation {
  file: string;
  /** bwrap's arguments up to and including `--`; append the command and its arguments. */
  args: string[];
  /** The seccomp program, to be written to the child's fd 3 (`--seccomp 3`). */
  seccomp: Buffer;
}

function isUnder(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/**
 * The bubblewrap command line. Order matters: later mounts cover earlier ones, so the private /tmp comes
 * after the read-only root, and the paths the command needs that live under /tmp are bound back over it.
 */
export function bwrapInvocation(bwrapPath: string, spec: BwrapSpec): BwrapInvocation {
  const args = [
    '--die-with-parent',
    '--new-session',
    '--unshare-all',
    '--cap-drop',
    'ALL',
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--tmpfs',
    '/tmp',
    '--dir',
    SANDBOX_HOME,
  ];
  const hidden = spec.hidden ?? [];
  for (const p of hidden) args.push('--tmpfs', p);
  const shadowed = (p: string) =>
    isUnder(p, '/tmp') || isUnder(p, '/dev') || isUnder(p, '/proc') || hidden.some((h) => isUnder(p, h));
  const visible = [spec.cwd, ...(spec.readable ?? []), ...spec.writable].filter(shadowed);
  for (const p of [...new Set(visible)]) args.push('--ro-bind', p, p);
  for (const p of spec.writable) args.push('--bind', p, p);
  args.push('--chdir', spec.cwd, '--seccomp', '3', '--');
  return { file: bwrapPath, args, seccomp: buildSeccompFilter() };
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
