import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { localForkBoundary, sandboxContext, useTempDirs } from '../fixtures.test-helpers.js';
import { bashTool } from '../tools/bash.js';
import { allowAll, ReadFileState } from '../tools/tool.js';
import { DEFAULT_PATH, SANDBOX_HOME, sandboxEnvironment, sanitizePath } from './environment.js';
import { detectProcessLimit } from './process-limit.js';
import {
  bwrapInvocation,
  describeSandbox,
  parseSandboxMode,
  probeSandbox,
  SandboxUnavailableError,
  sandboxStatus,
} from './sandbox.js';
import { JAIL_ROOT_FD, JAIL_SECCOMP_FD, searchJailInvocation } from './search-jail.js';
import { buildSeccompFilter } from './seccomp.js';
import {
  createToolSandbox,
  gatedPolicy,
  prepareUnattended,
  SANDBOX_UNAVAILABLE_REASON,
} from './unattended.js';

const { tempDir, onCleanup } = useTempDirs();

describe('the sandbox probe', () => {
  it('finds bubblewrap here and reports the mode', async () => {
    const status = await probeSandbox({ env: {} });
    expect(status).toMatchObject({ mode: 'auto', available: true, backend: 'bubblewrap' });
    expect(status.version).toMatch(/^bubblewrap \d/);
    expect(describeSandbox(status)).toContain('unattended Bash runs sandboxed');
  });

  it('fails closed, with the reason: off, unsupported OS, no bwrap, a misspelt mode', async () => {
    expect(await probeSandbox({ env: { ENGRAM_SANDBOX: 'off' } })).toMatchObject({
      mode: 'off',
      available: false,
      backend: 'none',
      reason: 'disabled by ENGRAM_SANDBOX=off',
    });
    expect(await probeSandbox({ env: {}, platform: 'darwin' })).toMatchObject({
      available: false,
      reason: expect.stringContaining('unsupported OS (darwin)'),
    });
    expect(await probeSandbox({ env: {}, bwrapPath: '/nonexistent/bwrap' })).toMatchObject({
      available: false,
      reason: expect.stringContaining('bubblewrap is not installed'),
    });
    expect(await probeSandbox({ env: { ENGRAM_BWRAP: '/bin/false' } })).toMatchObject({
      available: false,
      reason: expect.stringContaining('bubblewrap cannot start a sandbox here'),
    });
    // A value that is not a mode is treated as "required": unavailable, and loudly so.
    expect(await probeSandbox({ env: { ENGRAM_SANDBOX: 'of' } })).toMatchObject({
      mode: 'require',
      available: false,
      reason: expect.stringContaining('ENGRAM_SANDBOX=of is not one of off, auto, require'),
    });
    expect(parseSandboxMode({ ENGRAM_SANDBOX: ' Require ' })).toEqual({ ok: true, mode: 'require' });
    expect(describeSandbox(await sandboxStatus({ env: { ENGRAM_SANDBOX: 'off' } }))).toContain(
      'unattended agents run without Bash, writes stay jailed',
    );
  });
});

describe('a required sandbox needs a process limit', () => {
  it('refuses `require` where the process count cannot be limited; `auto` runs and says so; a limit that holds passes', async () => {
    const none = { kind: 'none' as const, reason: 'no pids cgroup is writable (test)' };
    const required = await probeSandbox({ env: {}, mode: 'require', processLimit: none });
    expect(required).toMatchObject({
      mode: 'require',
      available: false,
      reason: expect.stringContaining('the process count of sandboxed commands cannot be limited here'),
    });
    expect(required.reason).toContain('no pids cgroup is writable (test)');
    // Positive controls: the same host in `auto` runs sandboxed (and says the count is not limited), and
    // `require` with a limit that holds is available.
    const auto = await probeSandbox({ env: {}, mode: 'auto', processLimit: none });
    expect(auto).toMatchObject({ mode: 'auto', available: true, backend: 'bubblewrap' });
    expect(describeSandbox(auto)).toContain('process count NOT limited');
    expect(await probeSandbox({ env: {}, mode: 'require', processLimit: { kind: 'rlimit' } })).toMatchObject({
      mode: 'require',
      available: true,
    });
  });
});

describe('how the process limit holds', () => {
  it('RLIMIT_NPROC for a non-root worker; for root a pids cgroup, or `none` with the reason, never a silent rlimit', async () => {
    expect(await detectProcessLimit(1000)).toEqual({ kind: 'rlimit' });
    let root = await detectProcessLimit(0);
    if (root.kind === 'cgroup') {
      expect(root.parent).toMatch(/^\/sys\/fs\/cgroup\/.*engram-sandbox$/);
      // A command cgroup left by a process that died before releasing it is removed at the next detection.
      const stale = join(root.parent, '99999999-0123456789ab');
      mkdirSync(stale);
      root = await detectProcessLimit(0);
      expect(existsSync(stale)).toBe(false);
    } else
      expect(root).toMatchObject({
        kind: 'none',
        reason: expect.stringContaining('RLIMIT_NPROC does not hold'),
      });
    const status = await probeSandbox({ env: {} });
    expect(status.processLimit).toEqual(await detectProcessLimit());
    expect(describeSandbox(status)).toMatch(/process count (limited by|NOT limited)/);
  });
});

describe('the sandbox environment', () => {
  it('passes only the locale, the time zone and an absolute PATH', () => {
    const env = sandboxEnvironment({
      PATH: '.:/usr/bin::relative/bin:/bin',
      LANG: 'en_US.UTF-8',
      LC_ALL: 'C',
      LC_EVIL: '$(touch x)',
      TZ: 'UTC',
      ANTHROPIC_API_KEY: 'sk-ant-x',
      GITHUB_TOKEN: 'x',
      PAGER: 'touch x',
      LESSOPEN: '|touch x',
      GIT_DIR: '/x',
      GIT_CONFIG_COUNT: '1',
      LD_PRELOAD: '/x.so',
      BASH_ENV: '/x',
      PROMPT_COMMAND: 'touch x',
      TEXTDOMAINDIR: '/x',
      HOME: '/root',
      REDIS_URL: 'redis://:pw@host',
    });
    expect(env).toEqual({
      PATH: '/usr/bin:/bin',
      LANG: 'en_US.UTF-8',
      LC_ALL: 'C',
      TZ: 'UTC',
      HOME: SANDBOX_HOME,
      TMPDIR: '/tmp',
      TERM: 'dumb',
      USER: 'engram',
      LOGNAME: 'engram',
      SHELL: '/bin/sh',
    });
    expect(sanitizePath(undefined)).toBe(DEFAULT_PATH);
  });
});

describe('the bubblewrap invocation', () => {
  it('shares nothing, drops capabilities, mounts only the system and the world, then applies the limits', () => {
    const limits = { maxProcesses: 32, memoryMb: 512, cpuSeconds: 10, fileMb: 8 };
    const { file, args, seccomp } = bwrapInvocation(
      '/usr/bin/bwrap',
      { cwd: '/tmp/project/sub', readable: ['/tmp/project', '/tmp/mem'], writable: ['/tmp/mem'] },
      { limits },
    );
    expect(file).toBe('/usr/bin/bwrap');
    expect(args).toEqual(
      expect.arrayContaining(['--unshare-all', '--die-with-parent', '--new-session', '--cap-drop', 'ALL']),
    );
    expect(args).not.toContain('--share-net');
    const joined = args.join(' ');
    // No read-only root: an allow-list of system directories and /etc entries.
    expect(joined).not.toContain('--ro-bind / /');
    expect(joined).toMatch(/--(ro-bind \/usr \/usr|symlink \S+ \/usr)/);
    expect(joined).toContain('--ro-bind /etc/ld.so.cache /etc/ld.so.cache');
    expect(joined).not.toMatch(/\/etc\/(passwd|shadow|gitconfig|ssl)\b/);
    expect(joined).toContain(
      `--dev /dev --proc /proc --size ${8 * 1024 * 1024} --tmpfs /tmp --dir /tmp/home`,
    );
    // A path listed both ways is writable; nothing else follows but the read-only root.
    expect(joined).toContain(
      '--dir /tmp/home --ro-bind /tmp/project /tmp/project --bind /tmp/mem /tmp/mem --remount-ro /',
    );
    expect(joined).toContain(
      '--chdir /tmp/project/sub --seccomp 3 -- /bin/bash -c ulimit -u 32 -v 524288 -t 11 -f 8192 -c 0 && ulimit -S -t 10 ',
    );
    expect(seccomp.length % 8).toBe(0);
    expect(buildSeccompFilter('x64').equals(seccomp)).toBe(process.arch === 'x64');
    // Root workers: the command enters its pids cgroup first, then execs bwrap.
    const inCgroup = bwrapInvocation(
      '/usr/bin/bwrap',
      { cwd: '/w', readable: ['/w'], writable: [] },
      { limits, cgroupProcs: '/sys/fs/cgroup/pids/x/cgroup.procs' },
    );
    expect(inCgroup.file).toBe('/bin/sh');
    expect(inCgroup.args.slice(0, 4)).toEqual([
      '-c',
      'echo $$ > "$0" || exit 125; exec "$@"',
      '/sys/fs/cgroup/pids/x/cgroup.procs',
      '/usr/bin/bwrap',
    ]);
  });

  it("binds an alias's directory at its visible path, after the directories it lies in, and never at its own", () => {
    const limits = { maxProcesses: 32, memoryMb: 512, cpuSeconds: 10, fileMb: 8 };
    const world = (writable: boolean) =>
      bwrapInvocation(
        '/usr/bin/bwrap',
        {
          cwd: '/h/mem',
          readable: ['/h'],
          writable: [],
          aliases: [{ visible: '/h/mem', actual: '/h/mem/.staging/j', writable }],
        },
        { limits },
      ).args.join(' ');
    expect(world(false)).toContain('--ro-bind /h /h --ro-bind /h/mem/.staging/j /h/mem --remount-ro /');
    expect(world(true)).toContain('--ro-bind /h /h --bind /h/mem/.staging/j /h/mem --remount-ro /');
    expect(world(false)).not.toMatch(/ \/h\/mem\/\.staging\/j \/h\/mem\/\.staging/);
  });

  it("builds Grep's search jail from the same builder: the system directories, rg and the held root, nothing else", () => {
    const { file, args, seccomp } = searchJailInvocation('/usr/bin/bwrap', process.execPath);
    expect(file).toBe('/usr/bin/bwrap');
    const joined = args.join(' ');
    expect(
      joined.startsWith('--die-with-parent --new-session --unshare-all --cap-drop ALL --clearenv '),
    ).toBe(true);
    expect(joined).toMatch(/--(ro-bind \/usr \/usr|symlink \S+ \/usr)/);
    expect(joined).toContain(`--ro-bind ${process.execPath} /engram-rg --ro-bind-fd ${JAIL_ROOT_FD} /search`);
    expect(joined.endsWith(`--remount-ro / --chdir / --seccomp ${JAIL_SECCOMP_FD} -- /engram-rg`)).toBe(true);
    // No shell's needs: no /etc, /dev, /proc, /tmp or HOME, no limits prefix.
    expect(joined).not.toMatch(/\/etc\/|--dev|--proc|--tmpfs|\/bin\/bash|ulimit/);
    expect(seccomp.equals(bwrapInvocation('/b', { cwd: '/w', readable: ['/w'], writable: [] }).seccomp)).toBe(
      true,
    );
  });

  it('refuses a world that is not absolute directories, or a cwd outside it', () => {
    const limits = { maxProcesses: 32, memoryMb: 512, cpuSeconds: 10, fileMb: 8 };
    expect(() => bwrapInvocation('/b', { cwd: '/w', readable: ['/'], writable: [] }, { limits })).toThrow(
      /not an absolute directory/,
    );
    expect(() => bwrapInvocation('/b', { cwd: '/w', readable: ['rel'], writable: [] }, { limits })).toThrow(
      /not an absolute directory/,
    );
    expect(() =>
      bwrapInvocation('/b', { cwd: '/elsewhere', readable: ['/w'], writable: [] }, { limits }),
    ).toThrow(/outside its directories/);
  });
});

describe('prepareUnattended', () => {
  it("denies Bash at permission time when the sandbox is unavailable; the tools stay the caller's own", async () => {
    const root = await tempDir();
    const off = await prepareUnattended(localForkBoundary(root), { env: { ENGRAM_SANDBOX: 'off' } });
    // Nothing wraps the tools (so their names and definitions, and the prompt cache, are the caller's): the
    // boundary is in every call's context instead.
    expect(off).toMatchObject({ kind: 'unattended', sandbox: { status: { available: false } } });
    const policy = gatedPolicy(allowAll, off);
    const decision = await policy(bashTool, { command: 'ls' });
    expect(decision).toMatchObject({ behavior: 'deny', reason: SANDBOX_UNAVAILABLE_REASON });
    expect(decision.behavior === 'deny' && decision.message).toContain('disabled by ENGRAM_SANDBOX=off');
    expect(await policy({ name: 'Read' }, { file_path: '/etc/hostname' })).toEqual({
      behavior: 'allow',
    });
    // Called anyway (a caller that skipped the gate): the tool itself refuses.
    await expect(
      bashTool.call(
        { command: 'ls' },
        { cwd: root, readFileState: new ReadFileState(), toolUseId: 't', boundary: off },
      ),
    ).rejects.toMatchObject({ code: 'SANDBOX_UNAVAILABLE' });
  });

  it('refuses to start where the sandbox is required and cannot start', async () => {
    const root = await tempDir();
    await expect(
      prepareUnattended(localForkBoundary(root), {
        env: { ENGRAM_SANDBOX: 'require' },
        bwrapPath: '/nonexistent/bwrap',
      }),
    ).rejects.toBeInstanceOf(SandboxUnavailableError);
  });

  it('takes the jail its boundary states (a policy declares nothing), with Bash read-only unless granted', async () => {
    const root = await tempDir();
    const jailRoot = join(root, 'jail');
    const prepared = await prepareUnattended({
      ...localForkBoundary(root),
      jail: { root: jailRoot, bash: 'read-only' },
    });
    expect(prepared.sandbox.writableRoot).toBe(jailRoot);
    expect(prepared.sandbox.bashWritesRoot).toBe(false);
    expect(prepared.writeRoots).toEqual([jailRoot]);
    expect(prepared.read).toEqual(localForkBoundary(root).read);
    const granted = await prepareUnattended({
      ...localForkBoundary(root),
      jail: { root: jailRoot, bash: 'write-root', alsoWritable: [join(root, 'also')] },
    });
    expect(granted.sandbox.bashWritesRoot).toBe(true);
    expect(granted.writeRoots).toEqual([jailRoot, join(root, 'also')]);
  });
});

describe('Bash in the sandbox', () => {
  it('sees the host read-only, its root read-only unless granted, a private /tmp and no network', async () => {
    const root = await tempDir();
    mkdirSync(join(root, 'mem'));
    writeFileSync(join(root, 'mem', 'a.md'), 'hello\n');
    const run = async (command: string, bash: 'read-only' | 'write-root' = 'read-only') => {
      const sandbox = await createToolSandbox({ root: join(root, 'mem'), bash });
      return bashTool.call({ command }, sandboxContext(sandbox, join(root, 'mem')));
    };
    expect((await run('cat a.md; echo $HOME; ls -A $HOME | wc -l')).content).toBe(
      `hello\n${SANDBOX_HOME}\n0`,
    );
    expect((await run('touch b.md')).content).toMatch(/Read-only file system/);
    expect((await run('touch b.md && echo done', 'write-root')).content).toBe('done');
    expect((await run('echo x > /tmp/inside && cat /tmp/inside')).content).toBe('x');
    expect((await run('touch /etc/engram-sandbox-test')).content).toMatch(/Read-only file system/);
    expect((await run('echo > /dev/tcp/127.0.0.1/9 && echo connected || echo refused')).content).toMatch(
      /refused/,
    );
    expect(
      (await run('grep -c . /proc/self/status >/dev/null; grep CapEff /proc/self/status')).content,
    ).toMatch(/CapEff:\s+0+$/);
  });
});

/**
 * A shared host as the sandbox sees it: the operator's HOME (a CLAUDE.md, a 0600 ssh key), an ENGRAM_HOME with
 * its secrets and two tenants' areas (memory, transcripts), and two tenants' workspaces (one a git repository).
 */
async function sharedHost() {
  const base = await tempDir();
  const put = (rel: string, content: string, mode = 0o644) => {
    mkdirSync(join(base, rel, '..'), { recursive: true });
    writeFileSync(join(base, rel), content, { mode });
  };
  put('operator/.claude/CLAUDE.md', 'OPERATOR-CLAUDE-MD\n');
  put('operator/.ssh/id_ed25519', 'OPERATOR-SSH-KEY\n', 0o600);
  put('engram/secrets/team.key', 'ENGRAM-SECRET\n', 0o600);
  put('engram/tenants/acme/home/projects/p/memory/own.md', 'ACME-MEMORY\n');
  put('engram/tenants/acme/home/projects/p/s1.jsonl', '{"ACME-TRANSCRIPT":1}\n');
  put('engram/tenants/rival/home/projects/p/memory/theirs.md', 'RIVAL-MEMORY\n');
  put('engram/tenants/rival/home/projects/p/s2.jsonl', '{"RIVAL-TRANSCRIPT":1}\n');
  put('ws/acme/notes.md', 'ACME-WORKSPACE\n');
  put('ws/rival/plans.md', 'RIVAL-WORKSPACE\n');
  const acmeWs = join(base, 'ws/acme');
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', acmeWs, '-c', 'user.email=a@b', '-c', 'user.name=a', ...args], {
      stdio: 'ignore',
    });
  git('init', '-q');
  git('add', '.');
  git('commit', '-qm', 'first');
  return {
    base,
    acmeWs,
    acmeHome: join(base, 'engram/tenants/acme/home'),
    acmeMem: join(base, 'engram/tenants/acme/home/projects/p/memory'),
  };
}

describe("Bash sees only its world: the system, the job's directories, nothing of the operator or other tenants", () => {
  it("cannot cat, grep -r or find the operator's files, ENGRAM_HOME's secrets or another tenant; its own succeed", async () => {
    const host = await sharedHost();
    process.env.ENGRAM_TEST_WORKER_SECRET = 'WORKER-ENV-SECRET';
    onCleanup(async () => void delete process.env.ENGRAM_TEST_WORKER_SECRET);
    // A tenant's memory fork: writes (Write/Edit) below its memory dir; Bash reads its workspace and its area.
    const sandbox = await createToolSandbox(
      { root: host.acmeMem, bash: 'read-only' },
      { readable: [host.acmeWs, host.acmeHome] },
    );
    const run = async (command: string, cwd = host.acmeWs) =>
      (await bashTool.call({ command }, sandboxContext(sandbox, cwd))).content;
    const b = host.base;
    for (const path of [
      'operator/.claude/CLAUDE.md',
      'operator/.ssh/id_ed25519',
      'engram/secrets/team.key',
      'engram/tenants/rival/home/projects/p/memory/theirs.md',
      'engram/tenants/rival/home/projects/p/s2.jsonl',
      'ws/rival/plans.md',
    ]) {
      expect(await run(`cat ${join(b, path)}`)).toMatch(/No such file or directory/);
    }
    const everything = await run(
      `grep -rh -e OPERATOR -e ENGRAM-SECRET -e RIVAL -e ACME ${b} /tmp /etc /dev 2>/dev/null | sort -u; ` +
        `find / -path /proc -prune -o -path /usr -prune -o -name '*.md' -print 2>/dev/null | sort`,
    );
    expect(everything).not.toMatch(/OPERATOR|ENGRAM-SECRET|RIVAL|theirs\.md|plans\.md|CLAUDE\.md/);
    // Positive controls: the same commands on the tenant's own files.
    expect(everything).toContain('ACME-MEMORY');
    expect(everything).toContain('ACME-TRANSCRIPT');
    expect(everything).toContain('ACME-WORKSPACE');
    expect(everything).toContain(join(host.acmeMem, 'own.md'));
    expect(await run(`cat ${join(host.acmeMem, 'own.md')}`)).toBe('ACME-MEMORY');
    expect(await run('ls /')).not.toMatch(/\b(root|home|work|opt|var|srv|mnt)\b/);
    expect(await run('ls -A /tmp/home | wc -l; echo $HOME')).toBe('0\n/tmp/home');
    // The tools a command needs still work.
    expect(
      await run('git log --oneline | wc -l; rg -l ACME .; grep -l ACME notes.md; sed -n 1p notes.md'),
    ).toBe('1\n./notes.md\nnotes.md\nACME-WORKSPACE');
    expect(await run("find . -name '*.md'; ls; cat notes.md | awk '{print tolower($0)}'")).toBe(
      './notes.md\nnotes.md\nacme-workspace',
    );
    expect(await run('bash -c "echo nested"')).toBe('nested');
    // No process of the host is visible: only the sandbox's own PID namespace, whose environment is the allowlist.
    const procs = await run(
      'ls /proc | grep -c "^[0-9]"; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n" | grep -c WORKER-ENV-SECRET',
    );
    const [count, leaked] = String(procs).split('\n');
    expect(Number(count)).toBeLessThan(10);
    expect(leaked).toBe('0');
    // Nothing is writable but what the world grants (the root itself is read-only; the memory dir is, to Bash).
    expect(await run('touch /x /etc/x own.md 2>&1 | grep -c "Read-only file system"', host.acmeMem)).toBe(
      '3',
    );
  }, 60_000);
});
