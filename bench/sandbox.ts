// Sandbox benchmark (issue 13). The cost of a memory fork's Bash call in the OS sandbox against the same call
// unsandboxed, same run: the Bash tool's `call` for `cat a.md` in a memory directory, once with the context a
// fork gets (`prepareUnattended`: bubblewrap, allowlisted environment, seccomp filter) and once without a
// sandbox (the foreground's path: plain bash with the scrubbed environment). The two alternate call by call so
// load from other processes falls on both alike. Target: p50 at most +15 ms.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { prepareUnattended } from '@engram/agent-runtime/sandbox/unattended';
import { bashTool } from '@engram/agent-runtime/tools/bash';
import { ReadFileState, type ToolContext } from '@engram/agent-runtime/tools/tool';
import { ms, percentile } from './lib/stats.js';

const SAMPLES = 300;
const WARMUP = 10;

const mem = mkdtempSync(join(tmpdir(), 'engram-bench-sandbox-'));
writeFileSync(join(mem, 'a.md'), '---\nname: a\n---\nhello\n');
try {
  // A CLI memory fork's boundary: the memory directory (read-only to Bash), its working directory as the world.
  const prepared = await prepareUnattended({
    kind: 'unattended',
    jail: { root: mem, bash: 'read-only' },
    read: { kind: 'local', ownHome: homedir() },
    world: [mem],
  });
  if (!prepared.sandbox.status.available) {
    throw new Error(`the sandbox is unavailable here: ${prepared.sandbox.status.reason}`);
  }
  const base: ToolContext = {
    cwd: mem,
    readFileState: new ReadFileState(),
    toolUseId: 'bench',
    boundary: ATTENDED,
  };
  const sandboxed: ToolContext = { ...base, boundary: prepared };
  const input = { command: 'cat a.md' };
  const call = async (ctx: ToolContext) => {
    const start = process.hrtime.bigint();
    const out = await bashTool.call(input, ctx);
    const elapsed = Number(process.hrtime.bigint() - start) / 1e6;
    if (out.isError || !String(out.content).includes('hello')) throw new Error(`bad result: ${out.content}`);
    return elapsed;
  };
  for (let i = 0; i < WARMUP; i++) {
    await call(base);
    await call(sandboxed);
  }
  const plain: number[] = [];
  const inSandbox: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    if (i % 2 === 0) {
      plain.push(await call(base));
      inSandbox.push(await call(sandboxed));
    } else {
      inSandbox.push(await call(sandboxed));
      plain.push(await call(base));
    }
  }
  const p50 = { plain: percentile(plain, 50), sandbox: percentile(inSandbox, 50) };
  const p99 = { plain: percentile(plain, 99), sandbox: percentile(inSandbox, 99) };
  const delta = p50.sandbox - p50.plain;
  const result = {
    bench: 'sandbox',
    date: new Date().toISOString(),
    machine: `${cpus().length}-core`,
    samples: SAMPLES,
    sandbox: prepared.sandbox.status.version,
    p50: { unsandboxed: p50.plain, sandboxed: p50.sandbox, deltaMs: delta, ratio: p50.sandbox / p50.plain },
    p99: { unsandboxed: p99.plain, sandboxed: p99.sandbox, deltaMs: p99.sandbox - p99.plain },
    target: 'p50 delta <= 15 ms',
    pass: delta <= 15,
  };
  console.log(
    `fork Bash call (cat a.md), ${SAMPLES} alternating samples each:\n` +
      `  unsandboxed  p50 ${ms(p50.plain)}  p99 ${ms(p99.plain)}\n` +
      `  sandboxed    p50 ${ms(p50.sandbox)}  p99 ${ms(p99.sandbox)}\n` +
      `  p50 +${ms(delta)} (${(p50.sandbox / p50.plain).toFixed(2)}×), p99 +${ms(p99.sandbox - p99.plain)}; ` +
      `target p50 ≤ +15 ms: ${result.pass ? 'pass' : 'FAIL'}`,
  );
  console.log(JSON.stringify(result));
} finally {
  rmSync(mem, { recursive: true, force: true });
}
