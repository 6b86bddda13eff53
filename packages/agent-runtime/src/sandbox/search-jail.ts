import { realpathSync } from 'node:fs';
import { buildSeccompFilter } from './seccomp.js';

// Where a bounded Grep's ripgrep runs: a bubblewrap mount namespace that holds the judged search root and
// nothing else of the host's data. The root is handed over as the descriptor the read boundary judged
// (`--ro-bind-fd`), so what is mounted is that inode, whatever its name points at by now; inside there is
// no /proc, no /dev, no ENGRAM_HOME, no other workspace, no $HOME — only the system directories a
// dynamically linked rg needs to start (read-only) and rg itself. A directory in the tree swapped for a
// link while rg walks it resolves inside this namespace, where no other tenant's file exists: Grep is
// confined by construction, not by judging rg's answers afterwards (which it still does). No capabilities,
// new user/PID/IPC/UTS namespaces, the seccomp filter of the Bash sandbox.
//
// This is not the Bash sandbox (sandbox.ts): that one shows a command a tenant's whole world; this one runs
// one binary, without a shell, over one directory.

/** Where the search root is mounted inside the jail. */
export const JAILED_ROOT = '/search';
/** Where rg is mounted inside the jail. */
const JAILED_RG = '/engram-rg';
/** Read-only system directories (a dynamically linked rg needs its libraries). `-try`: absent ones skipped. */
const SYSTEM_DIRS = ['/usr', '/lib', '/lib64', '/lib32'];

/** The child's descriptors: 3 carries the seccomp program, 4 the judged root. */
export const JAIL_SECCOMP_FD = 3;
export const JAIL_ROOT_FD = 4;

export interface SearchJail {
  file: string;
  /** bwrap's arguments followed by rg's path inside the jail; append rg's own arguments. */
  args: string[];
  seccomp: Buffer;
}

let seccomp: Buffer | undefined;

/** The bwrap command line that runs `rg` over the directory or file open as the child's fd 4. */
export function searchJailInvocation(bwrapPath: string, rg: string): SearchJail {
  const args = ['--die-with-parent', '--new-session', '--unshare-all', '--cap-drop', 'ALL', '--clearenv'];
  for (const dir of SYSTEM_DIRS) args.push('--ro-bind-try', dir, dir);
  args.push(
    '--ro-bind',
    realpathSync(rg),
    JAILED_RG,
    '--ro-bind-fd',
    String(JAIL_ROOT_FD),
    JAILED_ROOT,
    '--chdir',
    '/',
    '--seccomp',
    String(JAIL_SECCOMP_FD),
    '--',
    JAILED_RG,
  );
  seccomp ??= buildSeccompFilter();
  return { file: bwrapPath, args, seccomp };
}
