import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';

// How "at most N processes" holds for a sandboxed command. RLIMIT_NPROC is counted per user namespace
// (Linux >= 5.14), and bwrap gives each command its own, so as a non-root worker `ulimit -u N` inside the
// sandbox bounds that command alone. For real uid 0 the kernel never enforces RLIMIT_NPROC (measured here:
// a limit of 32 let 204 processes start), so a root worker puts each command in its own pids cgroup instead:
// cgroup v1's `pids` hierarchy or a cgroup v2 directory with the pids controller delegated, whichever this
// process may create children in. Where neither exists, the status says `none`.

export type ProcessLimit =
  | { kind: 'rlimit' }
  | { kind: 'cgroup'; parent: string }
  | { kind: 'none'; reason: string };

const GROUP = 'engram-sandbox';

async function cgroupCandidates(): Promise<string[]> {
  const text = await fs.readFile('/proc/self/cgroup', 'utf8').catch(() => '');
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const [, controllers, path] = line.split(':');
    if (path === undefined || controllers === undefined) continue;
    if (controllers.split(',').includes('pids')) out.push(join('/sys/fs/cgroup/pids', path));
    if (controllers === '') {
      out.push(join('/sys/fs/cgroup', path));
      out.push(join('/sys/fs/cgroup/unified', path));
    }
  }
  return out;
}

async function usableParent(base: string): Promise<string | undefined> {
  const parent = join(base, GROUP);
  try {
    await fs.mkdir(parent, { recursive: true });
    // cgroup v2: children of `parent` get pids.max only when pids is enabled in its subtree (fails unless the
    // controller is delegated to `base`); v1 has no such file and needs nothing.
    await fs.writeFile(join(parent, 'cgroup.subtree_control'), '+pids').catch(() => undefined);
    const probe = join(parent, `probe-${process.pid}-${randomBytes(4).toString('hex')}`);
    await fs.mkdir(probe);
    try {
      await fs.writeFile(join(probe, 'pids.max'), '8');
      await fs.access(join(probe, 'cgroup.procs'));
    } finally {
      await fs.rmdir(probe).catch(() => undefined);
    }
    return parent;
  } catch {
    return undefined;
  }
}

/** Which mechanism bounds a sandboxed command's processes in this process (`uid` for tests). */
export async function detectProcessLimit(
  uid: number | undefined = process.getuid?.(),
): Promise<ProcessLimit> {
  if (uid !== 0) return { kind: 'rlimit' };
  for (const base of await cgroupCandidates()) {
    const parent = await usableParent(base);
    if (parent) {
      await sweepStale(parent);
      return { kind: 'cgroup', parent };
    }
  }
  return {
    kind: 'none',
    reason:
      'the worker runs as root, where RLIMIT_NPROC does not hold, and no pids cgroup is writable ' +
      '(run the workers as a non-root user, or delegate a cgroup with the pids controller)',
  };
}

/** Removes the empty command cgroups of processes that died before releasing them (rmdir refuses busy ones). */
async function sweepStale(parent: string): Promise<void> {
  const names = await fs.readdir(parent).catch(() => [] as string[]);
  for (const name of names) {
    const pid = /^(\d+)-[0-9a-f]+$/.exec(name)?.[1];
    if (!pid || alive(Number(pid))) continue;
    await fs.rmdir(join(parent, name)).catch(() => undefined);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Empty command cgroups of this process, for the next command: creating and removing a cgroup costs the kernel
 * an RCU grace period (tens of ms on a loaded 2-core host), reusing an empty one a write. A group is reused only
 * once its `pids.current` is 0; nothing inside a sandbox can join one (no /sys there, no capabilities).
 */
const idle: string[] = [];

/** A pids cgroup for one command: its `cgroup.procs` to enter, and `release` once the command has ended. */
export async function commandCgroup(
  parent: string,
  maxProcesses: number,
): Promise<{ procs: string; release: () => Promise<void> }> {
  let dir = idle.pop();
  if (!dir) {
    dir = join(parent, `${process.pid}-${randomBytes(6).toString('hex')}`);
    await fs.mkdir(dir);
  }
  const group = dir;
  try {
    await fs.writeFile(join(group, 'pids.max'), String(maxProcesses));
  } catch (error) {
    await fs.rmdir(group).catch(() => undefined);
    throw error;
  }
  const release = async () => {
    // The PID namespace's processes die just after bwrap: wait for the group to empty, then keep it for reuse.
    for (let i = 0; i < 100; i++) {
      const current = await fs.readFile(join(group, 'pids.current'), 'utf8').catch(() => undefined);
      if (current === undefined) return; // removed
      if (current.trim() === '0') {
        if (idle.length < 16) idle.push(group);
        else await fs.rmdir(group).catch(() => undefined);
        return;
      }
      await new Promise((r) => setTimeout(r, 50).unref());
    }
    // Still busy after 5 s: left for the sweep at the next detection.
  };
  return { procs: join(group, 'cgroup.procs'), release };
}
