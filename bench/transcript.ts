// Rebuilding the live chain of a 10,000-entry transcript (read + parse + validate + buildChain) against the
// floor any reader pays: reading the file and JSON.parse of every line, in the same run.
// Run: npm run bench:transcript -w @engram/bench

import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildChain, createCompactBoundary } from '@engram/agent-runtime/transcript/chain';
import {
  type ChainEntry,
  createAssistantEntry,
  createUserEntry,
  type EntryStamp,
} from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import { median, ms, report } from './lib/stats.js';

const ENTRIES = 10_000;
const REPS = 15;
const WARMUP = 3;
const TARGET = 1.5;

/** A realistic mix: prompts, replies with text and tool calls, tool results of varied size, one boundary. */
function generate(): ChainEntry[] {
  const entries: ChainEntry[] = [];
  let parent: string | null = null;
  const stamp = (): EntryStamp => ({ sessionId: 'bench-session', cwd: '/work/repo', parentUuid: parent });
  const push = (e: ChainEntry) => {
    entries.push(e);
    parent = e.uuid;
  };
  let i = 0;
  while (entries.length < ENTRIES) {
    i++;
    if (entries.length === ENTRIES / 2) {
      const boundary = createCompactBoundary({
        sessionId: 'bench-session',
        cwd: '/work/repo',
        logicalParentUuid: parent!,
        trigger: 'auto',
        preTokens: 160_000,
      });
      entries.push(boundary);
      parent = boundary.uuid;
      push(
        createUserEntry(stamp(), `Summary of the conversation so far: ${'lorem ipsum '.repeat(80)}`, {
          isCompactSummary: true,
        }),
      );
      continue;
    }
    const phase = i % 3;
    if (phase === 1) {
      push(
        createUserEntry(
          stamp(),
          `Please look at module ${i} and explain the failing test ${'detail '.repeat(i % 20)}`,
        ),
      );
    } else if (phase === 2) {
      const id = `toolu_${randomUUID().replaceAll('-', '')}`;
      push(
        createAssistantEntry(stamp(), {
          id: `msg_${i}`,
          model: 'claude-sonnet-5-5',
          content: [
            { type: 'text', text: `I'll read the file for step ${i}.` },
            { type: 'tool_use', id, name: 'Read', input: { file_path: `/work/repo/src/module-${i}.ts` } },
          ],
          stop_reason: 'tool_use',
          usage: {
            input_tokens: 12,
            output_tokens: 80,
            cache_read_input_tokens: 40_000,
            cache_creation_input_tokens: 900,
          },
        }),
      );
      const body = Array.from(
        { length: 5 + (i % 40) },
        (_, n) => `${String(n + 1).padStart(6)}\texport const v${n} = ${n};`,
      ).join('\n');
      push(
        createUserEntry(stamp(), [{ type: 'tool_result', tool_use_id: id, content: body }], {
          toolUseResults: {
            [id]: { filePath: `/work/repo/src/module-${i}.ts`, mtimeMs: 1_700_000_000_000 + i },
          },
        }),
      );
    } else {
      push(
        createAssistantEntry(stamp(), {
          id: `msg_${i}`,
          model: 'claude-sonnet-5-5',
          content: [
            {
              type: 'text',
              text: `Module ${i} fails because ${'the fixture is stale; '.repeat(1 + (i % 15))}`,
            },
          ],
          stop_reason: 'end_turn',
          usage: {
            input_tokens: 10,
            output_tokens: 200,
            cache_read_input_tokens: 41_000,
            cache_creation_input_tokens: 300,
          },
        }),
      );
    }
  }
  return entries.slice(0, ENTRIES);
}

async function main() {
  const dir = await mkdtemp(join(tmpdir(), 'engram-bench-transcript-'));
  try {
    const path = join(dir, 'bench-session.jsonl');
    const entries = generate();
    await writeFile(path, `${entries.map((e) => JSON.stringify(e)).join('\n')}\n`);
    const bytes = Buffer.byteLength(await readFile(path, 'utf8'));

    const baseline = async () => {
      const text = await readFile(path, 'utf8');
      const out: unknown[] = [];
      for (const line of text.split('\n')) if (line) out.push(JSON.parse(line));
      return out.length;
    };
    const rebuild = async () => {
      const { entries: read } = await new TranscriptStore(path).readAll();
      return buildChain(read).live.length;
    };

    // Sanity: both see every line, and the chain is the post-boundary half.
    const [n, live] = [await baseline(), await rebuild()];
    if (n !== ENTRIES || live >= ENTRIES / 2 + 1 || live < ENTRIES / 2 - 2) {
      throw new Error(`bench setup is wrong: ${n} lines, ${live} live entries`);
    }

    for (let w = 0; w < WARMUP; w++) {
      await baseline();
      await rebuild();
    }
    // Alternate the two so drift on a shared machine hits both equally.
    const base: number[] = [];
    const measured: number[] = [];
    for (let r = 0; r < REPS; r++) {
      let t = process.hrtime.bigint();
      await baseline();
      base.push(Number(process.hrtime.bigint() - t) / 1e6);
      t = process.hrtime.bigint();
      await rebuild();
      measured.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    const ratios = base.map((b, k) => measured[k]! / b);
    console.log(
      `transcript: ${ENTRIES} entries, ${(bytes / 1024 / 1024).toFixed(1)} MiB, ${REPS} reps; ` +
        `node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model.trim() ?? 'unknown'})`,
    );
    console.log(
      `per-rep ratio median ${median(ratios).toFixed(2)}× (min ${Math.min(...ratios).toFixed(2)}×)`,
    );
    const line = report({
      name: 'rebuild chain (read + parse + validate + buildChain)',
      baseline: median(base),
      measured: median(measured),
      target: `≤${TARGET}×`,
      pass: median(measured) / median(base) <= TARGET,
    });
    console.log(`baseline = readFile + JSON.parse of every line: ${ms(line.baseline)}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
