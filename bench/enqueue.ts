// What a turn pays to hand its memory work to the queue, against a raw BullMQ `queue.add` on the same Redis in
// the same run. Series, interleaved sample by sample (the order rotates every round) so drift hits all alike:
//   raw    — `queue.add(name, data)` on a plain BullMQ Queue (default options), the same payload;
//   typed  — `JobProducer.enqueue('extract', payload)`: zod parse, size check, newest-request record
//            (`setIfNewer`) and `queue.add` with per-session deduplication sent back to back on the queue's
//            connection (one round trip), under the enqueue timeout;
//   turn   — `MemoryQueue.afterTurn(ref, turnEntries, leaf)` with a 50-entry turn and a fresh session (its
//            first turn): `hasMemoryWritesSince` over the turn's entries (no cursor read), then the typed
//            enqueue (the agent's code, config from `loadAgentConfig`); the session's record is written after;
//   turn, record awaited (old) — the path before the session record moved off the turn: the session's record
//            written (mkdir + fsync + rename) and awaited, then `afterTurn` (told the record exists, so it does
//            not write it a second time in the background): every fresh session's first turn paid this;
//   typed/turn (dedup) — the same calls for one session over and over (the job is still waiting, so BullMQ
//            deduplicates it; leafSeq grows as in a real session);
//   ping   — one PING on the state store's connection: the cost of a single round trip, for context.
// A fresh session id per sample keeps deduplication out of the distinct-session series. No worker runs: jobs
// pile up in `wait`, which costs an add nothing. A breakdown of the typed path's parts follows, in isolation.
// Run: npm run bench:enqueue -w @engram/bench

import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAgentConfig } from '@engram/agent/config';
import {
  type ChainEntry,
  createAssistantEntry,
  createUserEntry,
  type EntryStamp,
} from '@engram/agent-runtime/transcript/entry';
import { MemoryQueue, type SessionRef } from '@engram/memory-client/memory-queue';
import { hasMemoryWritesSince, isMemoryPathSync } from '@engram/memory-core/extraction/memory-writes';
import { writeSessionRecord } from '@engram/memory-core/extraction/session-record';
import { engramPathsFor } from '@engram/memory-core/paths/memory-paths';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import { payloadBytes } from '@engram/queue/jobs/common';
import { type ExtractPayload, extractPayload } from '@engram/queue/jobs/extract';
import { startLocalRedis } from '@engram/queue/local-redis';
import { jobOptionsFor } from '@engram/queue/producer';
import { extractQueueConfig } from '@engram/queue/queues/extract.config';
import { SessionState } from '@engram/queue/state/session-state';
import { percentile } from './lib/stats.js';

const SAMPLES = 3_000;
const WARMUP = 300;
const CHAIN_ENTRIES = 50;
const TARGET_P99 = 1.5;
const PROFILE_SAMPLES = 2_000;

/** A 50-entry chain as a turn leaves it: prompts, replies, Read/Bash/Edit calls (none into memory), results. */
function buildTurnChain(sessionId: string, cwd: string): ChainEntry[] {
  const chain: ChainEntry[] = [];
  const stamp = (): EntryStamp => ({ sessionId, cwd, parentUuid: chain.at(-1)?.uuid ?? null });
  const usage = { input_tokens: 12, output_tokens: 90, cache_read_input_tokens: 30_000 };
  for (let i = 0; chain.length < CHAIN_ENTRIES; i++) {
    if (i % 4 === 0) {
      chain.push(createUserEntry(stamp(), `Step ${i}: look at src/module-${i}.ts and fix the failing test.`));
      continue;
    }
    const tool = ['Read', 'Bash', 'Edit'][i % 3]!;
    const input =
      tool === 'Bash'
        ? { command: `npm test -- module-${i}` }
        : tool === 'Edit'
          ? { file_path: `${cwd}/src/module-${i}.ts`, old_string: 'a', new_string: 'b' }
          : { file_path: `${cwd}/src/module-${i}.ts` };
    const id = `toolu_${i.toString().padStart(6, '0')}`;
    chain.push(
      createAssistantEntry(stamp(), {
        id: `msg_${i}`,
        model: 'claude-sonnet-5-5',
        content: [
          { type: 'text', text: `Checking module ${i}.` },
          { type: 'tool_use', id, name: tool, input },
        ],
        stop_reason: 'tool_use',
        usage,
      }),
    );
    chain.push(
      createUserEntry(stamp(), [
        { type: 'tool_result', tool_use_id: id, content: `${'result line\n'.repeat(10 + (i % 30))}` },
      ]),
    );
  }
  chain.length = CHAIN_ENTRIES;
  return chain;
}

function summary(samples: number[]) {
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'engram-bench-enqueue-'));
  const redis = await startLocalRedis({ dir: join(dir, 'redis'), persist: false });
  const namespace = `bench-enqueue-${Date.now().toString(36)}`;
  const engramHome = join(dir, 'home');
  const cwd = join(dir, 'repo');
  mkdirSync(cwd, { recursive: true });
  const config = loadAgentConfig({
    HOME: dir,
    ENGRAM_HOME: engramHome,
    REDIS_URL: redis.url,
    ENGRAM_NAMESPACE: namespace,
    LOG_LEVEL: 'silent',
  });
  const memory = new MemoryQueue(config);
  const paths = engramPathsFor({ engramHome, cwd, projectRoot: cwd });
  const { projectDir, transcriptDir } = memory.projectRef({ sessionId: 'x', paths });
  const chain = buildTurnChain('bench', cwd);
  const leaf = (seq: number) => ({ leafUuid: chain.at(-1)!.uuid, leafSeq: seq });
  const payloadFor = (sessionId: string, seq: number): ExtractPayload => ({
    sessionId,
    projectDir,
    transcriptDir,
    ...leaf(seq),
    requestedAt: new Date().toISOString(),
  });
  const ref = (sessionId: string): SessionRef => ({ sessionId, paths });

  const producer = memory.producer;
  // The baseline: a plain BullMQ queue on the same Redis, same producer connection profile and prefix.
  const rawQueue = memory.engine.createQueue('bench-raw');
  rawQueue.on('error', () => {});
  await Promise.all([memory.engine.state.ready(), rawQueue.waitUntilReady()]);
  await producer.queue('extract').waitUntilReady();

  let n = 0;
  const expectQueued = (status: { status: string; reason?: string }) => {
    if (status.status !== 'queued')
      throw new Error(`bench: afterTurn did not enqueue: ${JSON.stringify(status)}`);
  };
  const series: Record<string, (i: number) => Promise<unknown>> = {
    raw: (i) => rawQueue.add('extract', payloadFor(`raw${n}x${i}`, 50 + i)),
    typed: (i) => producer.enqueue('extract', payloadFor(`typed${n}x${i}`, 50 + i)),
    turn: async (i) => expectQueued(await memory.afterTurn(ref(`turn${n}x${i}`), chain, leaf(50 + i))),
    'turn, record awaited (old)': async (i) => {
      const r = ref(`old${n}x${i}`);
      const dir = paths.sessionDir(r.sessionId);
      await writeSessionRecord(dir, { version: 1, sessionId: r.sessionId, projectDir, transcriptDir });
      // The record is on disk: mark it written so afterTurn does exactly what the old path did after it.
      (memory as unknown as { recorded: Map<string, Promise<void>> }).recorded.set(dir, Promise.resolve());
      expectQueued(await memory.afterTurn(r, chain, leaf(50 + i)));
    },
    'typed (dedup)': (i) => producer.enqueue('extract', payloadFor('dedup-typed', 50 + i)),
    'turn (dedup)': async (i) => expectQueued(await memory.afterTurn(ref('dedup-turn'), chain, leaf(50 + i))),
    ping: () => memory.engine.state.ping(),
  };
  const names = Object.keys(series);
  const samples = new Map<string, number[]>(names.map((k) => [k, []]));
  for (let i = 0; i < WARMUP + SAMPLES; i++) {
    n = i;
    for (let k = 0; k < names.length; k++) {
      const name = names[(i + k) % names.length]!;
      const t0 = performance.now();
      await series[name]!(i);
      const elapsed = performance.now() - t0;
      if (i >= WARMUP) samples.get(name)!.push(elapsed);
      // A fresh session's record is written in the background after its turn: let it land before the next
      // sample (untimed), so its file I/O is charged to no series.
      await memory.sessionRecordsWritten();
    }
  }
  // Sanity: every distinct-session call added a job; the dedup series added one each.
  const waiting = await producer.queue('extract').getWaitingCount();
  const expected = 3 * (WARMUP + SAMPLES) + 2;
  if (waiting !== expected) throw new Error(`bench: ${waiting} extract jobs waiting, expected ${expected}`);
  if (memory.failures) throw new Error(`bench: ${memory.failures} enqueue failures`);

  // Breakdown of the typed path, each part alone, interleaved (same connections, after the main series).
  const payload = payloadFor('profile', 60);
  const isMemoryPath = (p: string) => isMemoryPathSync(p, paths.memoryDir);
  const extractQueue = producer.queue('extract');
  const optionedQueue = memory.engine.createQueue('bench-raw-options', {
    defaultJobOptions: jobOptionsFor(extractQueueConfig),
  });
  optionedQueue.on('error', () => {});
  await optionedQueue.waitUntilReady();
  const partFns: Array<[string, (i: number) => unknown]> = [
    ['zod parse of the payload', () => extractPayload.safeParse(payload)],
    ['payload size check (JSON.stringify)', () => payloadBytes(payload)],
    [
      `hasMemoryWritesSince over ${CHAIN_ENTRIES} entries`,
      () => hasMemoryWritesSince(chain, undefined, isMemoryPath),
    ],
    ['sanitizePath ×2 (projectRef)', () => [sanitizePath(paths.projectRoot), sanitizePath(paths.cwd)]],
    [
      'cursor read (HMGET)',
      (i) => new SessionState(memory.engine.state, { transcriptDir, sessionId: `p${i}` }).extractCursor(),
    ],
    [
      'newest-request record (setIfNewer, EVAL)',
      (i) =>
        new SessionState(memory.engine.state, { transcriptDir, sessionId: `p${i}` }).noteExtractRequested(
          leaf(60),
        ),
    ],
    ['raw add with the extract job options', (i) => optionedQueue.add('extract', payloadFor(`o${i}`, 60))],
    [
      'record + deduplicated add, one connection',
      (i) => {
        const ordered = memory.engine.orderedState(extractQueue)!;
        return Promise.all([
          new SessionState(ordered, { transcriptDir, sessionId: `r${i}` }).noteExtractRequested(leaf(60)),
          extractQueue.add('extract', payloadFor(`r${i}`, 60), {
            deduplication: { id: `extract:${transcriptDir}:r${i}`, keepLastIfActive: true },
          }),
        ]);
      },
    ],
    [
      'extract-queue add with options + deduplication',
      (i) =>
        extractQueue.add('extract', payloadFor(`d${i}`, 60), {
          deduplication: { id: `extract:${transcriptDir}:d${i}`, keepLastIfActive: true },
        }),
    ],
  ];
  const parts = partFns.map(([name]) => [name, [] as number[]] as const);
  for (let i = 0; i < PROFILE_SAMPLES; i++) {
    for (let k = 0; k < partFns.length; k++) {
      const at = (i + k) % partFns.length;
      const t0 = performance.now();
      await partFns[at]![1](i);
      parts[at]![1].push(performance.now() - t0);
    }
  }

  await Promise.allSettled([rawQueue.close(), optionedQueue.close()]);
  await memory.close();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });

  const raw = summary(samples.get('raw')!);
  console.log(
    `bench/enqueue — ${SAMPLES} interleaved samples per series after ${WARMUP} warm-up rounds, ${CHAIN_ENTRIES}-entry chain, ` +
      `local redis-server (no AOF); ${new Date().toISOString().slice(0, 10)}, nproc ${cpus().length}, ` +
      `${cpus()[0]?.model.trim()}, Node ${process.versions.node}`,
  );
  for (const name of names) {
    const s = summary(samples.get(name)!);
    const ratios =
      name === 'raw' ? '' : ` → ${(s.p50 / raw.p50).toFixed(2)}× / ${(s.p99 / raw.p99).toFixed(2)}× of raw`;
    console.log(`${name.padEnd(27)} p50 ${s.p50.toFixed(3)} ms, p99 ${s.p99.toFixed(3)} ms${ratios}`);
  }
  for (const name of ['typed', 'turn', 'turn, record awaited (old)']) {
    const ratio = summary(samples.get(name)!).p99 / raw.p99;
    console.log(
      `${name} p99 ratio ${ratio.toFixed(2)}× (target ≤${TARGET_P99}×) ${ratio <= TARGET_P99 ? 'PASS' : 'MISS'}`,
    );
  }
  console.log('breakdown (each part alone, interleaved, p50 / p99):');
  for (const [name, s] of parts) {
    const { p50, p99 } = summary(s);
    console.log(`  ${name.padEnd(48)} ${p50.toFixed(4)} ms / ${p99.toFixed(4)} ms`);
  }
}

await main();
