import { realpathSync } from 'node:fs';
import { type BwrapInvocation, bwrapInvocation, SECCOMP_FD } from './sandbox.js';

// Where a bounded Grep's ripgrep runs: a bubblewrap mount namespace that holds the judged search root and
// nothing else of the host's data. The root is handed over as the descriptor the read boundary judged
// (`--ro-bind-fd`), so what is mounted is that inode, whatever its name points at by now; inside there is
// no /proc, no /dev, no /etc, no ENGRAM_HOME, no other workspace, no $HOME — only the system directories a
// dynamically linked rg needs to start (read-only) and rg itself. A directory in the tree swapped for a
// link while rg walks it resolves inside this namespace, where no other tenant's file exists: Grep is
// confined by construction, not by judging rg's answers afterwards (which it still does).
//
// This is a narrower world for the one sandbox builder (sandbox.ts `bwrapInvocation`, `ProgramWorld`): the
// same namespaces, capabilities, system directories and seccomp filter as the Bash sandbox, but one binary,
// without a shell, over one directory.

/** Where the search root is mounted inside the jail. */
export const JAILED_ROOT = '/search';
/** Where rg is mounted inside the jail. */
const JAILED_RG = '/engram-rg';

/** The child's descriptors: 3 carries the seccomp program, 4 the judged root. */
export const JAIL_SECCOMP_FD = SECCOMP_FD;
export const JAIL_ROOT_FD = 4;

export type SearchJail = BwrapInvocation;

/** The bwrap command line that runs `rg` over the directory or file open as the child's fd 4. */
export function searchJailInvocation(bwrapPath: string, rg: string): SearchJail {
  return bwrapInvocation(bwrapPath, {
    kind: 'program',
    program: { path: realpathSync(rg), at: JAILED_RG },
    descriptors: [{ fd: JAIL_ROOT_FD, at: JAILED_ROOT }],
    cwd: '/',
  });
}
