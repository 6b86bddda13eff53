import { spawn } from 'node:child_process';

/**
 * Another process that races a test (flips a link, swaps a directory) in a shell loop, as fast as it can. It runs
 * in its own process group: `stop()` kills the shell and the `rm`/`ln`/`mkdir` it is running at that moment, and
 * resolves once the shell has exited — so a test's cleanup never races a loop still creating files (a plain
 * `kill` of the shell left its current command running: `ENOTEMPTY` removing the directory, seen under load).
 */
export function startRaceLoop(script: string, shell = '/bin/bash'): { stop(): Promise<void> } {
  const child = spawn(shell, ['-c', script], { stdio: 'ignore', detached: true });
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  return {
    async stop() {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
      await exited;
    },
  };
}
