import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { declaredWriteJail, withWriteJail } from '@engram/write-jail/write-jail';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../fixtures.test-helpers.js';
import { bashTool } from '../tools/bash.js';
import { defaultTools } from '../tools/registry.js';
import { allowAll, ReadFileState } from '../tools/tool.js';
import { DEFAULT_PATH, SANDBOX_HOME, sandboxEnvironment, sanitizePath } from './environment.js';
import {
  bwrapInvocation,
  describeSandbox,
  parseSandboxMode,
  probeSandbox,
  SandboxUnavailableError,
  sandboxStatus,
} from './sandbox.js';
import { buildSeccompFilter } from './seccomp.js';
import { createToolSandbox, prepareUnattended, SANDBOX_UNAVAILABLE_REASON } from './unattended.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});
async function tempDir() {
  const t = await makeTempDir();
  cleanups.push(t.cleanup);
  return t.dir;
}

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
    expect(joined).toContain(`--dev /dev --proc /proc --size ${8 * 1024 * 1024} --tmpfs /tmp --dir /tmp/home`);
    // A path listed both ways is writable; nothing else follows but the read-only root.
    expect(joined).toContain(
      '--dir /tmp/home --ro-bind /tmp/project /tmp/project --bind /tmp/mem /tmp/mem --remount-ro /',
    );
    expect(joined).toContain('--chdir /tmp/project/sub --seccomp 3 -- /bin/bash -c ulimit -u 32 -v 524288 -t 10 -f 8192');
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

  it('refuses a world that is not absolute directories, or a cwd outside it', () => {
    const limits = { maxProcesses: 32, memoryMb: 512, cpuSeconds: 10, fileMb: 8 };
    expect(() => bwrapInvocation('/b', { cwd: '/w', readable: ['/'], writable: [] }, { limits })).toThrow(
      /not an absolute directory/,
    );
    expect(() => bwrapInvocation('/b', { cwd: '/w', readable: ['rel'], writable: [] }, { limits })).toThrow(
      /not an absolute directory/,
    );
    expect(() => bwrapInvocation('/b', { cwd: '/elsewhere', readable: ['/w'], writable: [] }, { limits })).toThrow(
      /outside its directories/,
    );
  });
});

describe('prepareUnattended', () => {
  it('keeps the tool list (names and definitions) and denies Bash at permission time when the sandbox is unavailable', async () => {
    const root = await tempDir();
    const tools = defaultTools();
    const off = await prepareUnattended({
      tools,
      canUseTool: allowAll,
      defaultRoot: root,
      probe: { env: { ENGRAM_SANDBOX: 'off' } },
    });
    expect(off.tools.map((t) => t.definition())).toEqual(tools.map((t) => t.definition()));
    const decision = await off.canUseTool(bashTool, { command: 'ls' });
    expect(decision).toMatchObject({ behavior: 'deny', reason: SANDBOX_UNAVAILABLE_REASON });
    expect(decision.behavior === 'deny' && decision.message).toContain('disabled by ENGRAM_SANDBOX=off');
    expect(await off.canUseTool({ name: 'Read' }, { file_path: '/etc/hostname' })).toEqual({
      behavior: 'allow',
    });
    // Called anyway (a caller that skipped the gate): the tool itself refuses.
    const bash = off.tools.find((t) => t.name === 'Bash')!;
    await expect(
      bash.call({ command: 'ls' }, { cwd: root, readFileState: new ReadFileState(), toolUseId: 't' }),
    ).rejects.toMatchObject({ code: 'sandbox_unavailable' });
  });

  it('refuses to start where the sandbox is required and cannot start', async () => {
    const root = await tempDir();
    await expect(
      prepareUnattended({
        tools: defaultTools(),
        canUseTool: allowAll,
        defaultRoot: root,
        probe: { env: { ENGRAM_SANDBOX: 'require' }, bwrapPath: '/nonexistent/bwrap' },
      }),
    ).rejects.toBeInstanceOf(SandboxUnavailableError);
  });

  it("takes the jail a policy declares, over the caller's default", async () => {
    const root = await tempDir();
    const jailRoot = join(root, 'jail');
    const policy = withWriteJail(async () => ({ behavior: 'allow' as const }), { root: jailRoot });
    expect(declaredWriteJail(policy)).toEqual({ root: jailRoot, bash: 'read-only' });
    expect(declaredWriteJail(allowAll)).toBeUndefined();
    const prepared = await prepareUnattended({ tools: [], canUseTool: policy, defaultRoot: root });
    expect(prepared.sandbox.writableRoot).toBe(jailRoot);
    expect(prepared.sandbox.bashWritesRoot).toBe(false);
  });
});

describe('Bash in the sandbox', () => {
  it('sees the host read-only, its root read-only unless granted, a private /tmp and no network', async () => {
    const root = await tempDir();
    mkdirSync(join(root, 'mem'));
    writeFileSync(join(root, 'mem', 'a.md'), 'hello\n');
    const run = async (command: string, bash?: 'write-root') => {
      const sandbox = await createToolSandbox({ root: join(root, 'mem'), ...(bash ? { bash } : {}) });
      return bashTool.call(
        { command },
        { cwd: join(root, 'mem'), readFileState: new ReadFileState(), toolUseId: 't', sandbox },
      );
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
