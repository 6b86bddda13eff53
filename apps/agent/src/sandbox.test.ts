import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { UnattendedBoundary } from '@engram/agent-runtime/sandbox/boundary';
import {
  type CorpusLine,
  READ_ONLY_CORPUS,
  WRITING_CORPUS,
} from '@engram/agent-runtime/sandbox/corpus.test-helpers';
import { gatedPolicy, prepareUnattended } from '@engram/agent-runtime/sandbox/unattended';
import { defaultTools } from '@engram/agent-runtime/tools/registry';
import {
  type AnyTool,
  type CanUseTool,
  ReadFileState,
  type ToolContext,
} from '@engram/agent-runtime/tools/tool';
import { memoryWritePolicy } from '@engram/memory-core/policy/memory-permissions';
import { startRaceLoop } from '@engram/testkit/race-loop';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, engram } from './cli.test-helpers.js';
import { checkSandbox } from './commands/doctor.js';
import { REFUSED_EXIT, sandboxCommand } from './commands/sandbox.js';

// The jail's acceptance tests: command lines that write, execute or connect, run through a memory fork's
// real Bash tool (the tools and policy exactly as runForkedAgent prepares them) and through `engram
// sandbox`, with the classifier in front and with it bypassed, so the OS sandbox alone is the boundary.
// Outside the memory directory a canary tree must not change, no marker may appear, and a loopback TCP
// listener and a Unix socket must see no connection. Everything lives under /var/tmp: the sandbox gives
// commands a private /tmp, and the canary must be visible to them to be a real target.

const CONCURRENCY = 4;
const COMMAND_TIMEOUT_MS = 5_000;

let base: string;
let mem: string;
let canary: string;
let tcp: Server;
let unix: Server;
let port: number;
let tcpConnections = 0;
let unixConnections = 0;
let lineNo = 0;
const HOST_TMP_MARKER = `/tmp/engram-corpus-marker-${process.pid}`;
const OTHER_MARKERS = [
  join(homedir(), 'engram-corpus-home-marker'),
  '/root/engram-corpus-root-marker',
  '/etc/engram-corpus-marker',
  '/var/tmp/engram-corpus-marker',
];

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {
    cwd,
    stdio: 'ignore',
  });

function plantHostileGit(dir: string): void {
  // What a Write that got through would have planted: a repository whose config runs programs.
  git(dir, 'init', '-q');
  const marker = join(canary, 'planted-marker');
  const hostile =
    `[core]\n\tfsmonitor = touch ${marker}\n\tpager = touch ${marker}\n` +
    `[diff]\n\texternal = touch ${marker}\n[alias]\n\tst = !touch ${marker}\n`;
  writeFileSync(
    join(dir, '.git', 'config'),
    `${readFileSync(join(dir, '.git', 'config'), 'utf8')}${hostile}`,
  );
  writeFileSync(join(dir, '.gitconfig'), hostile);
}

beforeAll(async () => {
  base = mkdtempSync('/var/tmp/engram-corpus-');
  mem = join(base, 'memory');
  canary = join(base, 'canary');
  mkdirSync(join(mem, 'team'), { recursive: true });
  writeFileSync(join(mem, 'a.md'), 'hello\nworld\n');
  writeFileSync(join(mem, 'MEMORY.md'), '# Index\n- [a](a.md) — hello\n');
  mkdirSync(join(canary, 'empty'), { recursive: true });
  mkdirSync(join(canary, 'repo'));
  writeFileSync(join(canary, 'f.txt'), 'a canary file\n');
  writeFileSync(join(canary, 'cfg'), '[core]\n\tbare = false\n');
  writeFileSync(join(canary, 'repo', 'file.txt'), 'one\n');
  git(join(canary, 'repo'), 'init', '-q', '-b', 'main');
  git(join(canary, 'repo'), 'add', 'file.txt');
  git(join(canary, 'repo'), 'commit', '-q', '-m', 'first');
  git(join(canary, 'repo'), 'branch', 'side');
  git(join(canary, 'repo'), 'tag', 'v1');
  writeFileSync(join(canary, 'repo', 'file.txt'), 'one\ntwo\n');
  plantHostileGit(mem);
  tcp = createServer((socket) => {
    tcpConnections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  port = (tcp.address() as { port: number }).port;
  unix = createServer((socket) => {
    unixConnections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => unix.listen(join(canary, 'sock'), resolve));
});

afterAll(async () => {
  await new Promise((r) => tcp?.close(r));
  await new Promise((r) => unix?.close(r));
  if (base) rmSync(base, { recursive: true, force: true });
});

/** Every entry below `dir`: type, mode, size, content hash or link target. */
function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = lstatSync(p);
      let what = `${st.mode.toString(8)}:${st.size}:${st.nlink}`;
      if (st.isSymbolicLink()) what += `:->${readlinkSync(p)}`;
      else if (st.isFile()) what += `:${createHash('sha256').update(readFileSync(p)).digest('hex')}`;
      else if (st.isDirectory()) walk(p);
      out.set(p, what);
    }
  };
  walk(dir);
  return out;
}

function fill(line: string): string {
  lineNo++;
  return line
    .replaceAll('{MEM}', mem)
    .replaceAll('{CANARY}', canary)
    .replaceAll('{M}', join(canary, `marker-${lineNo}`))
    .replaceAll('{TM}', `${HOST_TMP_MARKER}-${lineNo}`)
    .replaceAll('{PORT}', String(port))
    .replaceAll('{SOCK}', join(canary, 'sock'));
}

async function pool<T, R>(items: readonly T[], run: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await run(items[i]!);
      }
    }),
  );
  return results;
}

/** A CLI memory fork's boundary, as its job states it: the memory directory (read-only to Bash), `cwd` as Bash's world. */
const cliFork = (cwd: string = mem): UnattendedBoundary => ({
  kind: 'unattended',
  jail: { root: mem, bash: 'read-only' },
  read: { kind: 'local', ownHome: homedir() },
  world: [cwd],
});

/** A memory fork's Bash: the boundary and policy as runForkedAgent prepares them, then the call as the loop makes it. */
async function forkBash(policy: CanUseTool) {
  return async (command: string, cwd: string = mem) => {
    const boundary = await prepareUnattended(cliFork(cwd));
    const bash = defaultTools().find((t) => t.name === 'Bash') as AnyTool;
    const input = { command, timeout: COMMAND_TIMEOUT_MS };
    const decision = await gatedPolicy(policy, boundary)(bash, input, { toolUseId: 't', cwd });
    if (decision.behavior === 'deny') return { ran: false, reason: decision.reason, output: '' };
    const ctx: ToolContext = { cwd, readFileState: new ReadFileState(), toolUseId: 't', boundary };
    const result = await bash.call(input, ctx).catch((e: Error) => ({ content: e.message, isError: true }));
    return { ran: true, isError: result.isError === true, output: String(result.content) };
  };
}

async function viaEngramSandbox(command: string, skipReadOnlyCheck: boolean, cwd?: string) {
  let out = '';
  let err = '';
  const code = await sandboxCommand(
    {
      memoryDir: mem,
      command,
      ...(cwd ? { cwd } : {}),
      timeoutMs: COMMAND_TIMEOUT_MS,
      ...(skipReadOnlyCheck ? { skipReadOnlyCheck } : {}),
    },
    {
      out: (t) => {
        out += t;
      },
      err: (t) => {
        err += t;
      },
    },
  );
  return { code, out, err };
}

function expectNothingEscaped(before: { canary: Map<string, string>; mem: Map<string, string> }) {
  const after = snapshot(canary);
  const changed = [...new Set([...before.canary.keys(), ...after.keys()])].filter(
    (p) => before.canary.get(p) !== after.get(p),
  );
  expect(changed).toEqual([]);
  const memAfter = snapshot(mem);
  expect([...memAfter].filter(([p, v]) => before.mem.get(p) !== v)).toEqual([]);
  expect(readdirSync('/tmp').filter((n) => n.startsWith('engram-corpus-marker-'))).toEqual([]);
  for (const marker of OTHER_MARKERS) expect(existsSync(marker)).toBe(false);
  expect(tcpConnections).toBe(0);
  expect(unixConnections).toBe(0);
}

describe('the writing corpus', () => {
  it('has at least 300 distinct lines, each citing its source', () => {
    expect(new Set(WRITING_CORPUS.map((l) => l.line)).size).toBeGreaterThanOrEqual(300);
    expect(READ_ONLY_CORPUS.length).toBeGreaterThanOrEqual(100);
    for (const l of [...WRITING_CORPUS, ...READ_ONLY_CORPUS]) expect(l.source.length).toBeGreaterThan(10);
  });

  const modes: Array<[string, () => Promise<(line: CorpusLine) => Promise<boolean>>]> = [
    [
      "the fork's Bash tool with the memory policy",
      async () => {
        const run = await forkBash(memoryWritePolicy(mem));
        return async (l) => (await run(fill(l.line))).ran;
      },
    ],
    [
      "the fork's Bash tool with the classifier bypassed (the sandbox alone)",
      async () => {
        const run = await forkBash(async () => ({ behavior: 'allow' as const }));
        return async (l) => (await run(fill(l.line))).ran;
      },
    ],
    [
      '`engram sandbox` with its read-only check',
      async () => async (l) => (await viaEngramSandbox(fill(l.line), false)).code !== REFUSED_EXIT,
    ],
    [
      '`engram sandbox --skip-read-only-check` (the sandbox alone)',
      async () => async (l) => (await viaEngramSandbox(fill(l.line), true)).code !== REFUSED_EXIT,
    ],
  ];

  it.each(modes)(
    'through %s: nothing changes outside the memory directory',
    async (name, make) => {
      const before = { canary: snapshot(canary), mem: snapshot(mem) };
      const run = await make();
      const ran = await pool(WRITING_CORPUS, run);
      const executed = ran.filter(Boolean).length;
      if (name.includes('sandbox alone')) expect(executed).toBe(WRITING_CORPUS.length);
      else expect(executed).toBeLessThan(WRITING_CORPUS.length);
      expectNothingEscaped(before);
    },
    240_000,
  );
});

describe('the read-only corpus', () => {
  it("runs and prints through the fork's Bash tool and through `engram sandbox`", async () => {
    const fork = await forkBash(memoryWritePolicy(mem));
    const failures: string[] = [];
    await pool(READ_ONLY_CORPUS, async (l) => {
      const command = fill(l.line);
      const cwd = l.cwd === undefined ? undefined : fill(l.cwd);
      const viaFork = await fork(command, cwd);
      if (!viaFork.ran || viaFork.isError || viaFork.output.trim() === '') {
        failures.push(`fork: ${command}: ${viaFork.reason ?? viaFork.output}`);
      }
      const viaCli = await viaEngramSandbox(command, false, cwd);
      if (viaCli.code !== 0 || viaCli.out.trim() === '')
        failures.push(`cli: ${command}: ${viaCli.code} ${viaCli.err}`);
    });
    expect(failures).toEqual([]);
  }, 240_000);
});

describe('path tests through the fork tools and the memory policy', () => {
  async function forkWriter() {
    const boundary = await prepareUnattended(cliFork());
    const policy = gatedPolicy(memoryWritePolicy(mem), boundary);
    const readFileState = new ReadFileState();
    return async (name: 'Write' | 'Edit', input: Record<string, unknown>) => {
      const tool = defaultTools().find((t) => t.name === name)!;
      const decision = await policy(tool, input, { toolUseId: 't', cwd: mem });
      if (decision.behavior === 'deny') return { denied: decision.reason, message: decision.message };
      readFileState.set(String(input.file_path), { mtimeMs: Number.MAX_SAFE_INTEGER });
      try {
        await tool.call(tool.inputSchema.parse(input), { cwd: mem, readFileState, toolUseId: 't', boundary });
        return { written: true };
      } catch (error) {
        return { failed: (error as Error).message };
      }
    };
  }

  it('refuses .history, the lock file, .git and dotfiles, naming each reason, and writes visible memories', async () => {
    const write = await forkWriter();
    const before = snapshot(canary);
    const cases: Array<[string, string]> = [
      ['.history/snap/.snapshot.json', 'hidden_path'],
      ['.history/snap/a.md', 'hidden_path'],
      ['.consolidate-lock', 'hidden_path'],
      ['.git/config', 'hidden_path'],
      ['.git/hooks/post-checkout', 'hidden_path'],
      ['.gitconfig', 'hidden_path'],
      ['team/.env', 'hidden_path'],
      ['notes.sh', 'not_markdown'],
      ['sub/MEMORY.md', 'entrypoint_not_allowed'],
    ];
    for (const [rel, reason] of cases) {
      const result = await write('Write', { file_path: join(mem, rel), content: 'x' });
      expect(result, rel).toMatchObject({ denied: reason });
      expect(result.message, rel).toMatch(/refused: /);
    }
    expect(await write('Write', { file_path: join(mem, 'topic.md'), content: '# t\n' })).toEqual({
      written: true,
    });
    expect(readFileSync(join(mem, 'topic.md'), 'utf8')).toBe('# t\n');
    rmSync(join(mem, 'topic.md'));
    expect(snapshot(canary)).toEqual(before);
  });

  it('refuses hard links and symlinks into the canary, and a symlink flipped during 400 writes lands nothing outside', async () => {
    const write = await forkWriter();
    const before = snapshot(canary);
    linkSync(join(canary, 'f.txt'), join(mem, 'hard.md'));
    symlinkSync(join(canary, 'f.txt'), join(mem, 'soft.md'));
    expect(await write('Write', { file_path: join(mem, 'hard.md'), content: 'x' })).toMatchObject({
      denied: 'hard_link',
    });
    expect(await write('Write', { file_path: join(mem, 'soft.md'), content: 'x' })).toMatchObject({
      denied: 'path_outside_memory',
    });
    rmSync(join(mem, 'hard.md'));
    rmSync(join(mem, 'soft.md'));
    const loop = startRaceLoop(
      `cd '${mem}'; while :; do rm -rf sub; ln -s '${canary}' sub; rm -f sub; mkdir sub; ` +
        `rm -f flip.md; ln -s '${canary}/f.txt' flip.md; rm -f flip.md; echo x > flip.md; done`,
    );
    const outcomes = { written: 0, denied: 0, failed: 0 };
    try {
      for (let i = 0; i < 400; i++) {
        const file_path = i % 2 ? join(mem, 'flip.md') : join(mem, 'sub', 'f.txt.md');
        const r = await write('Write', { file_path, content: `pwned ${i}\n` });
        if ('written' in r) outcomes.written++;
        else if ('denied' in r) outcomes.denied++;
        else outcomes.failed++;
      }
    } finally {
      await loop.stop();
    }
    expect(outcomes.written + outcomes.denied + outcomes.failed).toBe(400);
    expect(snapshot(canary)).toEqual(before);
    rmSync(join(mem, 'sub'), { recursive: true, force: true });
    rmSync(join(mem, 'flip.md'), { force: true });
  }, 120_000);
});

describe('with the sandbox unavailable', () => {
  it('forks get no Bash (denied with the reason), `engram sandbox` refuses with 126, and doctor says so', async () => {
    const prepared = await prepareUnattended(cliFork(), { env: { ENGRAM_SANDBOX: 'off' } });
    expect(prepared.sandbox.status).toMatchObject({ available: false, mode: 'off' });
    const policy = gatedPolicy(memoryWritePolicy(mem), prepared);
    const bash = defaultTools().find((t) => t.name === 'Bash')!;
    for (const l of READ_ONLY_CORPUS.slice(0, 10)) {
      expect(await policy(bash, { command: fill(l.line) })).toMatchObject({
        behavior: 'deny',
        reason: 'sandbox_unavailable',
      });
    }
    const doctor = await checkSandbox({ ENGRAM_SANDBOX: 'off' });
    expect(doctor).toMatchObject({ ok: true, name: 'sandbox' });
    expect(doctor.detail).toContain('unavailable (ENGRAM_SANDBOX=off)');
    expect(doctor.detail).toContain('unattended agents run without Bash');
    const required = await checkSandbox({ ENGRAM_SANDBOX: 'require', ENGRAM_BWRAP: '/nonexistent/bwrap' });
    expect(required).toMatchObject({ ok: false, name: 'sandbox' });
    expect(required.fix).toContain('apt-get install bubblewrap');
    expect(await checkSandbox({})).toMatchObject({
      ok: true,
      detail: expect.stringContaining('runs sandboxed'),
    });
  });
});

describe('the engram binary', () => {
  beforeAll(() => assertBuilt());
  const env = (extra: Record<string, string> = {}) => ({
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ...extra,
  });

  it('`engram sandbox` prints output and exits with the status, 126 with the reason when refused', async () => {
    const ok = await engram(['sandbox', '--memory-dir', mem, '-c', 'cat a.md'], { env: env() });
    expect(ok).toMatchObject({ code: 0, stdout: 'hello\nworld\n' });
    const status = await engram(['sandbox', '--memory-dir', mem, '-c', 'grep -q nothing-here a.md'], {
      env: env(),
    });
    expect(status.code).toBe(1);
    const refused = await engram(['sandbox', '--memory-dir', mem, '-c', `touch ${join(canary, 'm')}`], {
      env: env(),
    });
    expect(refused.code).toBe(126);
    expect(refused.stderr).toContain('refused (bash_not_read_only)');
    const off = await engram(['sandbox', '--memory-dir', mem, '-c', 'ls'], {
      env: env({ ENGRAM_SANDBOX: 'off' }),
    });
    expect(off.code).toBe(126);
    expect(off.stderr).toContain('refused (sandbox_unavailable)');
    expect(off.stderr).toContain('disabled by ENGRAM_SANDBOX=off');
  });

  it('runs a sample of the writing corpus with the classifier bypassed, and nothing escapes', async () => {
    const before = { canary: snapshot(canary), mem: snapshot(mem) };
    const sample = WRITING_CORPUS.filter((_, i) => i % 25 === 0);
    await pool(sample, async (l) => {
      const result = await engram(
        ['sandbox', '--memory-dir', mem, '--skip-read-only-check', '--timeout', '5000', '-c', fill(l.line)],
        { env: env() },
      );
      expect(result.code, l.line).not.toBe(REFUSED_EXIT);
    });
    expectNothingEscaped(before);
  }, 120_000);
});
