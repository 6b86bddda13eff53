import { describe, expect, it } from 'vitest';
import { sandboxContext, useTempDirs } from '../fixtures.test-helpers.js';
import { bashTool } from '../tools/bash.js';
import { createToolSandbox } from './unattended.js';

// The sandbox's resource limits, each run into by a command that would exhaust the machine without them: a fork
// bomb, a CPU hog, a file and an allocation over the limit (an end-to-end suite: `END_TO_END_SUITES`, soak). How
// the limits are set is unit-tested in sandbox.test.ts.

const { tempDir } = useTempDirs();

describe('limits on sandboxed commands', () => {
  const limits = { maxProcesses: 64, memoryMb: 256, cpuSeconds: 2, fileMb: 1 };
  async function limited() {
    const root = await tempDir();
    const sandbox = await createToolSandbox({ root, bash: 'write-root' }, { readable: [root], limits });
    return (command: string, timeout?: number) =>
      bashTool.call({ command, ...(timeout ? { timeout } : {}) }, sandboxContext(sandbox, root));
  }

  it('a fork bomb ends at the command timeout, bounded by the process limit, and the next call runs at once', async () => {
    const run = await limited();
    // The classic line: the shell returns at once and its PID namespace (with every copy) ends with it.
    const quick = await run(':(){ :|:& };:', 4_000);
    expect(quick.content).not.toContain('timed out');
    // One that keeps its shell waiting runs into the timeout, never past the process limit.
    const bomb = await run(':(){ :|:& };:; sleep 60', 4_000);
    expect(bomb.isError).toBe(true);
    expect(bomb.content).toContain('Command timed out after 4s and was killed.');
    expect(bomb.content).toContain("the sandbox's process limit (64 per command, ENGRAM_SANDBOX_MAX_PROCS)");
    const started = Date.now();
    expect((await run('echo ok')).content).toBe('ok');
    expect(Date.now() - started).toBeLessThan(10_000);
    // The count holds inside: at most the limit, whatever the command asks for.
    // The count holds inside: forks beyond the limit fail, whatever the command asks for (perl-base is in every
    // Debian; it reports how many of 200 children it could start, instead of dying at the first failure).
    const many = await run(
      `perl -e 'my $n = 0; for (1..200) { my $p = fork(); last unless defined $p; if (!$p) { sleep 3; exit 0 } $n++ } print "$n\\n"'`,
      30_000,
    );
    const started2 = Number(String(many.content).trim());
    expect(started2).toBeGreaterThan(10);
    expect(started2).toBeLessThan(64);
  }, 60_000);

  it('CPU time, file size and memory: each stops the command and the result names the limit', async () => {
    const run = await limited();
    const cpu = await run('while :; do :; done', 30_000);
    expect(cpu).toMatchObject({ isError: true });
    expect(cpu.content).toContain(
      "the sandbox's CPU time limit (2 s per process, ENGRAM_SANDBOX_CPU_SECONDS)",
    );
    const file = await run('head -c 2000000 /dev/zero > big; ls -l big');
    expect(file.content).toContain("the sandbox's file size limit (1 MiB, ENGRAM_SANDBOX_FILE_MB)");
    // One 400 MiB allocation, refused at once: a hog that grows its memory a piece at a time (a shell string of
    // 400 MB) spends more CPU time getting there than the 2 s CPU limit allows on a loaded machine, and then the
    // CPU limit, not the memory limit, is what stops it.
    const memory = await run('dd if=/dev/zero of=/dev/null bs=400M count=1');
    expect(memory).toMatchObject({ isError: true });
    expect(memory.content).toContain(
      "the sandbox's memory limit (256 MiB per process, ENGRAM_SANDBOX_MEMORY_MB)",
    );
    // Positive control: within the limits the same commands succeed.
    expect((await run('head -c 1000 /dev/zero > small && wc -c < small')).content).toBe('1000');
    expect((await run('dd if=/dev/zero of=/dev/null bs=16M count=1 2>/dev/null && echo ok')).content).toBe(
      'ok',
    );
  }, 60_000);
});
