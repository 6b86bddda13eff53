// Read-boundary benchmark (issue 25). What judging every read on the opened inode costs, measured side by
// side in one run, the series alternating call by call so load from other processes falls on both alike:
//
// 1. A served turn's non-model time: the query loop of a turn against the scripted model answering at once
//    (so the time is all non-model), whose first reply asks for six tool calls — two Read, two Grep, two
//    Glob over a 60-file workspace — and whose second reply ends the turn; every entry appended to a
//    transcript as a served turn does. "bounded": the tools under a served turn's boundary (`servedBoundary`,
//    prepared as turn-runner prepares it: the tenant's read boundary, Grep's rg in the search jail when
//    bubblewrap is available, writes through the jail); "unbounded": the same tools attended (no boundary:
//    the baseline only this bench uses). Target: bounded ≤ 1.10× unbounded (p50).
// 2. A fork's tool call: Read, Grep and Glob called directly, with the job's boundary (a tenant's roots) and
//    without. Target: p50 at most +15 ms per call.
//
// The baseline still opens files by descriptor (Read has no other path any more): what differs is the
// boundary's judgment, the held search roots, the descriptor walk and the search jail.
// Run: npm run bench:read-boundary -w @engram/bench
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { servedBoundary } from '@engram/agent/server/served-policy';
import { runQueryLoop } from '@engram/agent-runtime/loop/query-loop';
import { createModelClient } from '@engram/agent-runtime/model/client';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { sandboxStatus } from '@engram/agent-runtime/sandbox/sandbox';
import { prepareUnattended, type ToolBoundary } from '@engram/agent-runtime/sandbox/unattended';
import { defaultTools } from '@engram/agent-runtime/tools/registry';
import { type AnyTool, allowAll, ReadFileState, type ToolContext } from '@engram/agent-runtime/tools/tool';
import { createUserEntry } from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import { startModelServer } from '@engram/testkit/model-server';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { ms, percentile } from './lib/stats.js';

const TURNS = Number(process.env.BENCH_TURNS ?? 120);
const CALLS = Number(process.env.BENCH_CALLS ?? 200);
const WARMUP = 10;

const dir = mkdtempSync(join(tmpdir(), 'engram-bench-read-boundary-'));
const workspace = join(dir, 'workspace');
const home = join(dir, 'home');
for (let d = 0; d < 6; d++) {
  mkdirSync(join(workspace, `src${d}`, 'nested'), { recursive: true });
  for (let f = 0; f < 10; f++) {
    const body = Array.from({ length: 80 }, (_, i) => `line ${i} of file ${f} in src${d} TOKEN${i % 7}`).join(
      '\n',
    );
    writeFileSync(join(workspace, `src${d}`, f < 5 ? '' : 'nested', `file${f}.ts`), `${body}\n`);
  }
}
mkdirSync(home, { recursive: true });

const model = await startModelServer();
try {
  const status = await sandboxStatus();
  const client = createModelClient({ apiKey: 'bench', baseURL: model.url, maxRetries: 0 });
  const calls = [
    toolUse('Read', { file_path: join(workspace, 'src0', 'file1.ts') }),
    toolUse('Read', { file_path: join(workspace, 'src3', 'nested', 'file7.ts') }),
    toolUse('Grep', { pattern: 'TOKEN3', path: workspace }),
    toolUse('Grep', { pattern: 'file 4 in', path: join(workspace, 'src2'), output_mode: 'content' }),
    toolUse('Glob', { pattern: '**/*.ts', path: workspace }),
    toolUse('Glob', { pattern: 'nested/*.ts', path: join(workspace, 'src5') }),
  ];
  model.respond((r) => {
    const last = r.body.messages.at(-1)?.content;
    const answered = Array.isArray(last) && last.some((b) => b?.type === 'tool_result');
    return answered ? textReply('Done.') : reply(text('Looking.'), ...calls);
  });

  const base = defaultTools().filter((t) => ['Read', 'Grep', 'Glob', 'Write', 'Edit'].includes(t.name));
  const bounded = await prepareUnattended(
    await servedBoundary({
      tenant: { workspace, home },
      allowedTools: new Set(['Read', 'Grep', 'Glob']),
      memoryDir: join(home, 'memory'),
    }),
  );

  let turnNo = 0;
  const turn = async (tools: readonly AnyTool[], boundary: ToolBoundary) => {
    const sessionId = `s${turnNo++}`;
    const store = new TranscriptStore(join(home, 'transcripts', `${sessionId}.jsonl`));
    const first = createUserEntry({ sessionId, cwd: workspace, parentUuid: null }, 'Look around.');
    const start = process.hrtime.bigint();
    await store.append([first]);
    const result = await runQueryLoop({
      client,
      model: 'bench-model',
      system: [{ type: 'text', text: 'You are a bench.' }],
      tools,
      maxTokens: 1024,
      messages: [first],
      canUseTool: allowAll,
      cwd: workspace,
      sessionId,
      boundary,
      onMessage: async (e) => void (await store.append([e])),
    });
    const elapsed = Number(process.hrtime.bigint() - start) / 1e6;
    const errors = result.newMessages.filter((m) => JSON.stringify(m).includes('"is_error":true'));
    if (result.turns !== 2 || errors.length > 0) {
      throw new Error(`bad turn: ${result.turns} model calls, ${errors.length} tool errors`);
    }
    return elapsed;
  };

  const alternate = async (a: () => Promise<number>, b: () => Promise<number>, n: number) => {
    for (let i = 0; i < WARMUP; i++) {
      await a();
      await b();
    }
    const as: number[] = [];
    const bs: number[] = [];
    for (let i = 0; i < n; i++) {
      if (i % 2 === 0) {
        as.push(await a());
        bs.push(await b());
      } else {
        bs.push(await b());
        as.push(await a());
      }
    }
    return { a: as, b: bs };
  };

  const turns = await alternate(
    () => turn(base, ATTENDED),
    () => turn(base, bounded),
    TURNS,
  );
  const turnP50 = { unbounded: percentile(turns.a, 50), bounded: percentile(turns.b, 50) };
  const turnRatio = turnP50.bounded / turnP50.unbounded;

  // A fork's single tool calls, with the job's read boundary (a tenant's workspace and area) and without.
  const byName = new Map(base.map((t) => [t.name, t]));
  const inputs: Array<[string, Record<string, unknown>]> = [
    ['Read', { file_path: join(workspace, 'src1', 'file2.ts') }],
    ['Grep', { pattern: 'TOKEN5', path: workspace }],
    ['Glob', { pattern: '**/*.ts', path: workspace }],
  ];
  const forkCall = async (name: string, input: Record<string, unknown>, withBoundary: boolean) => {
    const tool = byName.get(name)!;
    const ctx: ToolContext = {
      cwd: workspace,
      readFileState: new ReadFileState(),
      toolUseId: 'bench',
      boundary: withBoundary ? bounded : ATTENDED,
    };
    const start = process.hrtime.bigint();
    const out = await tool.call(tool.inputSchema.parse(input), ctx);
    const elapsed = Number(process.hrtime.bigint() - start) / 1e6;
    if (out.isError) throw new Error(`${name} failed: ${String(out.content)}`);
    return elapsed;
  };
  const perTool: Record<string, { unbounded: number; bounded: number; deltaMs: number }> = {};
  for (const [name, input] of inputs) {
    const r = await alternate(
      () => forkCall(name, input, false),
      () => forkCall(name, input, true),
      CALLS,
    );
    const p50 = { unbounded: percentile(r.a, 50), bounded: percentile(r.b, 50) };
    perTool[name] = { ...p50, deltaMs: p50.bounded - p50.unbounded };
  }
  const worstDelta = Math.max(...Object.values(perTool).map((t) => t.deltaMs));

  const result = {
    bench: 'read-boundary',
    date: new Date().toISOString(),
    machine: `${cpus().length}-core`,
    searchJail: status.available ? (status.version ?? 'bubblewrap') : `unavailable: ${status.reason}`,
    turn: { samples: TURNS, p50: turnP50, ratio: turnRatio, target: '<= 1.10x', pass: turnRatio <= 1.1 },
    forkToolCall: { samples: CALLS, p50: perTool, target: 'p50 delta <= 15 ms', pass: worstDelta <= 15 },
  };
  console.log(
    `served turn (6 tool calls, scripted model at 0 ms), ${TURNS} alternating turns each:\n` +
      `  unbounded p50 ${ms(turnP50.unbounded)}  bounded p50 ${ms(turnP50.bounded)}  ` +
      `${turnRatio.toFixed(3)}× (target ≤ 1.10×: ${turnRatio <= 1.1 ? 'pass' : 'MISS'})\n` +
      `fork tool call, ${CALLS} alternating calls each (search jail: ${result.searchJail}):\n` +
      Object.entries(perTool)
        .map(
          ([name, t]) =>
            `  ${name.padEnd(5)} unbounded p50 ${ms(t.unbounded)}  bounded p50 ${ms(t.bounded)}  +${ms(t.deltaMs)}`,
        )
        .join('\n') +
      `\n  worst p50 delta +${ms(worstDelta)} (target ≤ +15 ms: ${worstDelta <= 15 ? 'pass' : 'MISS'})`,
  );
  console.log(JSON.stringify(result));
} finally {
  await model.close();
  rmSync(dir, { recursive: true, force: true });
}
