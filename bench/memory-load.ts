// Memory work under load: turn end → memory on disk, with SESSIONS concurrent sessions over PROJECTS projects
// and W worker processes (the built `engram-workers`, real child processes), a scripted model answering in
// 200–500 ms (the testkit server in this process, on loopback), and the agent's real enqueue path
// (`MemoryQueue.afterTurn`). Each turn states one fact ("fact S-T"); the extraction fork writes one memory per
// fact among the messages it was asked to cover, unless the manifest already lists that fact's file — a model
// that checks what is saved, as the extraction prompt asks. Measured:
//   turn end → memory on disk: from `afterTurn` returning to the first poll (every 50 ms) that sees the fact's
//     file with its MEMORY.md pointer; p50/p95/max;
//   baseline, same run: one session alone on the same workers, the same turns — the unloaded latency (the
//     model's own two fork calls plus the queue) that the loaded p95 is divided by;
//   events per completed extraction: entries of the extract queue's BullMQ event stream / completed jobs;
//   lost (a fact with no file at the end) and doubled (a fact in more than one file): both must be 0.
// Bounded: every phase has a deadline; the model server, Redis and the workers listen on loopback only.
// Run: npm run build && npm run bench:memory-load -w @engram/bench   (env: W, SESSIONS, PROJECTS, TURNS)
//
// CASE=one-project: SESSIONS (default 12) sessions in ONE project, W worker processes of one extraction slot
// each (ENGRAM_CONCURRENCY_EXTRACT=1: W is the number of forks that can run at once), staged extraction (auto,
// the default). Two parts:
//   latency, at the normal pace (as above: TURNS turns per session, 0.5–1.5 s apart, model 200–500 ms): turn
//     end → memory on disk p50/p95 at W=2 and W=4;
//   capacity, saturated: every session produces a turn every CAP_GAP_MS (a standing backlog — each session
//     always has a job waiting), the extraction fork's model calls take MODEL_MS (1,000–1,500 ms, so the
//     workers wait on the model, not on the two cores); after a warm-up, completed extractions per second
//     over a CAP_WINDOW_MS window, W=2 and W=4 in ABBA order (W2, W4, W4, W2), each on a fresh project with
//     the same offered load. Printed with the backlog seen (jobs waiting, sampled) and the extraction model
//     calls in flight, so a phase that was not saturated shows it. SERIAL=1 adds serial (=0) capacity phases.

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, promises as fs, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAgentConfig } from '@engram/agent/config';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import { parseIndexEntries } from '@engram/memory-core/memdir/index-file';
import { startLocalRedis } from '@engram/queue/local-redis';
import { startModelServer } from '@engram/testkit/model-server';
import { reply, type ScriptStep, text, textReply, toolUse } from '@engram/testkit/replies';
import {
  createForeground,
  type ForegroundSession,
  isExtractionRequest,
  lastUserText,
} from '@engram/worker-service/testing/foreground.test-helpers';
import { Redis } from 'ioredis';
import { percentile } from './lib/stats.js';

const W = Number(process.env.W ?? 2);
const SESSIONS = Number(process.env.SESSIONS ?? 30);
const PROJECTS = Number(process.env.PROJECTS ?? 5);
const TURNS = Number(process.env.TURNS ?? 4);
const ONE_PROJECT = process.env.CASE === 'one-project';
/** CASE=one-project: which parts run (latency, capacity) and the capacity phases' worker counts, in order. */
const PARTS = (process.env.PARTS ?? 'latency,capacity').split(',');
const CAP_ROUNDS = (process.env.CAP_ROUNDS ?? '2,4,4,2').split(',').map(Number);
const CAP_GAP_MS = Number(process.env.CAP_GAP_MS ?? 4000);
const CAP_WARMUP_MS = Number(process.env.CAP_WARMUP_MS ?? 10_000);
const CAP_WINDOW_MS = Number(process.env.CAP_WINDOW_MS ?? 30_000);
const [MODEL_MIN_MS, MODEL_MAX_MS] = (process.env.MODEL_MS ?? '1000-1500').split('-').map(Number) as [
  number,
  number,
];
const PHASE_DEADLINE_MS = 180_000;
const MARK = 'You are now the memory extraction subagent';
const WORKER_BIN = fileURLToPath(new URL('../apps/workers/dist/bin/engram-workers.js', import.meta.url));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const between = (min: number, max: number) => () => min + Math.floor(Math.random() * (max - min));
/** The model's latency per call, by phase: the normal pace, or the capacity phases' realistic fork calls. */
const NORMAL = between(200, 500);
let parentLatency = NORMAL;
let extractLatency = NORMAL;

interface Fact {
  session: number;
  turn: number;
  endedAt: number;
  seenAt?: number;
  dir: string;
}

/** WORKER_LOG=<file>: the workers' log lines (LOG_LEVEL, default warn) are appended there, for diagnosis. */
const workerLog = process.env.WORKER_LOG ? openSync(process.env.WORKER_LOG, 'a') : 'ignore';

function spawnWorker(env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [WORKER_BIN], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', workerLog, 'inherit'],
  });
  return child;
}

async function main() {
  if (!existsSync(WORKER_BIN)) throw new Error(`${WORKER_BIN} is missing: run \`npm run build\` first.`);
  const dir = mkdtempSync(join(tmpdir(), 'engram-bench-load-'));
  const redis = await startLocalRedis({ dir: join(dir, 'redis'), persist: false });
  const server = await startModelServer();
  const engramHome = join(dir, 'home');
  const namespace = `bench-load-${Date.now().toString(36)}`;
  const children: ChildProcess[] = [];
  let forks = 0;
  try {
    // Extraction model calls, as [start, end] times: how many were in flight during a capacity window.
    const extractCalls: Array<[number, number]> = [];
    const extractStep = (step: ScriptStep): ScriptStep => {
      const latencyMs = extractLatency();
      extractCalls.push([Date.now(), Date.now() + latencyMs]);
      return { ...step, latencyMs };
    };
    server.route(
      'parent',
      (r) => !isExtractionRequest(r.body),
      () => textReply('Noted.', { latencyMs: parentLatency() }),
      {
        sticky: true,
      },
    );
    server.route(
      'extract',
      (r) => isExtractionRequest(r.body),
      (r): ScriptStep => {
        const instruction = lastUserText(r.body);
        if (!instruction.includes(MARK)) return extractStep(textReply('Saved.'));
        const fork = ++forks;
        const memoryDir = /the memory directory `([^`]+)`/.exec(instruction)?.[1];
        const n = Number(/most recent ~(\d+) messages/.exec(instruction)?.[1] ?? 1);
        if (!memoryDir) throw new Error('no memory directory in the extraction instruction');
        const covered = r.body.messages.slice(0, -1).slice(-n);
        const facts = new Set<string>();
        for (const m of covered) {
          if (m.role !== 'user') continue;
          for (const hit of JSON.stringify(m.content).matchAll(/fact (\d+)-(\d+)/g))
            facts.add(`${hit[1]}_${hit[2]}`);
        }
        const writes = [...facts]
          .filter((f) => !instruction.includes(`project_fact_${f}_`))
          .map((f) =>
            toolUse('Write', {
              file_path: join(memoryDir, `project_fact_${f}_${fork}.md`),
              content: `---\nname: Fact ${f}\ndescription: fact ${f.replace('_', '-')} of the load bench\ntype: project\n---\nfact ${f.replace('_', '-')}\n`,
            }),
          );
        if (writes.length === 0) return extractStep(textReply('Already saved.'));
        return extractStep(reply(text('Saving.'), ...writes));
      },
      { sticky: true },
    );

    const env = {
      REDIS_URL: redis.url,
      ENGRAM_HOME: engramHome,
      ENGRAM_NAMESPACE: namespace,
      ENGRAM_QUEUES: 'extract,reconcile',
      ENGRAM_WORKERS_PORT: '0',
      ENGRAM_DASHBOARD: 'false',
      ANTHROPIC_API_KEY: 'bench',
      ANTHROPIC_BASE_URL: server.url,
      ENGRAM_MODEL_MAX_RETRIES: '0',
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    };
    const startWorkers = async (w: number, extra: Record<string, string>) => {
      for (let i = 0; i < w; i++) children.push(spawnWorker({ ...env, ...extra }));
      const queue = memory.producer.queue('extract');
      const until = Date.now() + 30_000;
      while ((await queue.getWorkers()).length < w && Date.now() < until) await sleep(100);
    };
    const stopWorkers = async () => {
      for (const c of children) c.kill('SIGTERM');
      const until = Date.now() + 10_000;
      while (children.some((c) => c.exitCode === null && c.signalCode === null) && Date.now() < until)
        await sleep(100);
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      children.length = 0;
    };
    const memory = new MemoryQueue(
      loadAgentConfig({
        HOME: dir,
        ENGRAM_HOME: engramHome,
        ENGRAM_NAMESPACE: namespace,
        REDIS_URL: redis.url,
        LOG_LEVEL: 'silent',
      }),
    );
    const raw = new Redis(redis.url);
    /** Session `s` states fact `t` and its turn is enqueued for extraction, as the agent does after a turn. */
    const typeFact = async (fg: ForegroundSession, s: number, t: number) => {
      const leaf = await fg.turn(`fact ${s}-${t}: remember this about the repository`);
      const status = await memory.afterTurn(
        { sessionId: fg.sessionId, paths: fg.paths },
        leaf.newEntries,
        leaf,
      );
      if (status.status !== 'queued') throw new Error(`not queued: ${JSON.stringify(status)}`);
    };

    const run = async (label: string, sessions: number, projects: number) => {
      const roots = Array.from({ length: projects }, (_, p) => {
        const cwd = join(dir, `${label}-repo-${p}`);
        mkdirSync(cwd, { recursive: true });
        return cwd;
      });
      const fgs: ForegroundSession[] = Array.from({ length: sessions }, (_, s) =>
        createForeground(server, { engramHome, cwd: roots[s % projects]! }),
      );
      const facts: Fact[] = [];
      const deadline = Date.now() + PHASE_DEADLINE_MS;
      const completedBefore =
        (await memory.producer.queue('extract').getJobCounts('completed')).completed ?? 0;
      const eventsKey = `${namespace}:memory-extract:events`;
      const eventsBefore = await raw.xlen(eventsKey);
      let polling = true;
      const poller = (async () => {
        while (polling) {
          const byDir = new Map<string, Fact[]>();
          for (const f of facts) if (!f.seenAt) byDir.set(f.dir, [...(byDir.get(f.dir) ?? []), f]);
          for (const [memoryDir, waiting] of byDir) {
            const index = await fs.readFile(join(memoryDir, 'MEMORY.md'), 'utf8').catch(() => '');
            const pointed = new Set(parseIndexEntries(index).map((e) => e.file));
            const now = Date.now();
            for (const f of waiting) {
              const prefix = `project_fact_${f.session}_${f.turn}_`;
              if ([...pointed].some((p) => p.startsWith(prefix))) f.seenAt = now;
            }
          }
          await sleep(50);
        }
      })();
      await Promise.all(
        fgs.map(async (fg, s) => {
          for (let t = 1; t <= TURNS; t++) {
            if (Date.now() > deadline) return;
            await typeFact(fg, s, t);
            facts.push({ session: s, turn: t, endedAt: Date.now(), dir: fg.paths.memoryDir });
            await sleep(500 + Math.floor(Math.random() * 1000));
          }
        }),
      );
      while (facts.some((f) => !f.seenAt) && Date.now() < deadline) await sleep(100);
      polling = false;
      await poller;
      // Lost and doubled, from the files: one file per fact, exactly.
      let lost = 0;
      let doubled = 0;
      for (const f of facts) {
        const files = readdirSync(f.dir).filter((n) => n.startsWith(`project_fact_${f.session}_${f.turn}_`));
        if (files.length === 0) lost++;
        if (files.length > 1) doubled++;
      }
      const latencies = facts.filter((f) => f.seenAt).map((f) => f.seenAt! - f.endedAt);
      // Facts on disk per second, from the first turn's end to the last fact seen.
      const seen = facts.filter((f) => f.seenAt);
      const span = Math.max(...seen.map((f) => f.seenAt!)) - Math.min(...facts.map((f) => f.endedAt));
      const throughput = seen.length / Math.max(span / 1000, 0.001);
      const completed =
        ((await memory.producer.queue('extract').getJobCounts('completed')).completed ?? 0) - completedBefore;
      const events = (await raw.xlen(eventsKey)) - eventsBefore;
      return {
        facts: facts.length,
        lost,
        doubled,
        p50: percentile(latencies, 50),
        p95: percentile(latencies, 95),
        max: Math.max(...latencies),
        completed,
        throughput,
        eventsPerExtraction: completed ? events / completed : Number.NaN,
      };
    };

    // Capacity: a standing backlog (every session a turn each CAP_GAP_MS), completed extractions per second
    // over a window after a warm-up. Fresh project per phase; what is left queued at the end is dropped.
    const capacity = async (label: string, sessions: number) => {
      const cwd = join(dir, `${label}-repo`);
      mkdirSync(cwd, { recursive: true });
      const fgs = Array.from({ length: sessions }, () => createForeground(server, { engramHome, cwd }));
      const queue = memory.producer.queue('extract');
      const events = memory.engine.createQueueEvents('memory-extract');
      const done: Array<{ at: number; sessionId: string; outcome: string; memories: number }> = [];
      events.on('completed', ({ returnvalue }) => {
        const result = (typeof returnvalue === 'string' ? JSON.parse(returnvalue) : returnvalue) as {
          sessionId: string;
          outcome: string;
          memories: unknown[];
        };
        done.push({
          at: Date.now(),
          sessionId: result.sessionId,
          outcome: result.outcome,
          memories: result.memories.length,
        });
      });
      await events.waitUntilReady();
      let producing = true;
      const producers = fgs.map(async (fg, s) => {
        for (let t = 1; producing; t++) {
          await typeFact(fg, s, t);
          await sleep(CAP_GAP_MS);
        }
      });
      await sleep(CAP_WARMUP_MS);
      const from = Date.now();
      const waiting: number[] = [];
      while (Date.now() < from + CAP_WINDOW_MS) {
        const counts = await queue.getJobCounts('wait', 'delayed');
        waiting.push((counts.wait ?? 0) + (counts.delayed ?? 0));
        await sleep(500);
      }
      const to = Date.now();
      producing = false;
      const ours = new Set(fgs.map((fg) => fg.sessionId));
      await Promise.all(producers);
      await events.close();
      await stopWorkers();
      await queue.obliterate({ force: true });
      const inWindow = done.filter((d) => d.at >= from && d.at < to && ours.has(d.sessionId));
      const extracted = inWindow.filter((d) => d.outcome === 'extracted');
      // Mean extraction model calls in flight over the window (sampled every 50 ms).
      let inFlight = 0;
      let samples = 0;
      for (let t = from; t < to; t += 50, samples++)
        inFlight += extractCalls.filter(([a, b]) => a <= t && t < b).length;
      return {
        perSecond: extracted.length / ((to - from) / 1000),
        extractions: extracted.length,
        other: inWindow.length - extracted.length,
        memories: extracted.reduce((n, d) => n + d.memories, 0),
        waitingMin: Math.min(...waiting),
        waitingMean: waiting.reduce((a, b) => a + b, 0) / waiting.length,
        inFlight: inFlight / samples,
      };
    };

    if (ONE_PROJECT) {
      const sessions = Number(process.env.SESSIONS ?? 12);
      const ms = (v: number) => `${Math.round(v)} ms`;
      const slots = (staged: boolean) => ({
        // One extraction slot per worker process: W is the number of forks that can run at once. No sweep:
        // every turn here is enqueued, and an earlier phase's idle sessions would add their jobs to this one's.
        ENGRAM_QUEUES: 'extract',
        ENGRAM_CONCURRENCY_EXTRACT: '1',
        ENGRAM_EXTRACT_STAGED: staged ? (process.env.STAGED_MODE ?? 'auto') : '0',
      });
      console.log(`one project: ${sessions} sessions, 1 extraction slot per worker process, staged = auto`);
      const latencies: Array<{ w: number; r: Awaited<ReturnType<typeof run>> }> = [];
      for (const w of PARTS.includes('latency') ? [2, 4] : []) {
        await startWorkers(w, slots(true));
        const r = await run(`one-latency-${w}`, sessions, 1);
        latencies.push({ w, r });
        await stopWorkers();
        console.log(
          `latency W=${w} (normal pace: ${TURNS} turns 0.5–1.5 s apart, model 200–500 ms): ${r.facts} facts, ` +
            `${r.completed} extractions; turn end → memory on disk p50 ${ms(r.p50)}, p95 ${ms(r.p95)}, ` +
            `max ${ms(r.max)}; lost ${r.lost}, doubled ${r.doubled}`,
        );
      }
      parentLatency = between(20, 60);
      extractLatency = between(MODEL_MIN_MS, MODEL_MAX_MS);
      const modes: Array<[string, boolean]> = [
        ['staged', true],
        ...(process.env.SERIAL === '1' ? [['serial', false] as [string, boolean]] : []),
      ];
      const caps: Array<{ mode: string; w: number; c: Awaited<ReturnType<typeof capacity>> }> = [];
      for (const [mode, staged] of modes) {
        for (const [round, w] of (PARTS.includes('capacity') ? CAP_ROUNDS : []).entries()) {
          await startWorkers(w, slots(staged));
          const c = await capacity(`one-cap-${mode}-${w}-${round}`, sessions);
          caps.push({ mode, w, c });
          console.log(
            `capacity ${mode} W=${w} (turn every ${CAP_GAP_MS} ms per session, fork model calls ${MODEL_MIN_MS}–` +
              `${MODEL_MAX_MS} ms, ${CAP_WINDOW_MS / 1000} s window): ${c.perSecond.toFixed(2)} extractions/s ` +
              `(${c.extractions}, ${c.memories} memories; ${c.other} skipped); jobs waiting min ${c.waitingMin}, ` +
              `mean ${c.waitingMean.toFixed(1)}; extraction model calls in flight ${c.inFlight.toFixed(2)}`,
          );
        }
      }
      const mean = (mode: string, w: number) => {
        const xs = caps.filter((x) => x.mode === mode && x.w === w).map((x) => x.c.perSecond);
        return xs.reduce((a, b) => a + b, 0) / xs.length;
      };
      const ratio = mean('staged', 4) / mean('staged', 2);
      const saturated = caps.every((x) => x.c.waitingMin > 0);
      const w4 = latencies.find((x) => x.w === 4)?.r;
      console.log(
        `${w4 ? `staged W4 p95 ${ms(w4.p95)} ≤ 10 s: ${w4.p95 <= 10_000 ? 'PASS' : 'MISS'}; ` : ''}capacity W4/W2 ${ratio.toFixed(2)}× ` +
          `(${mean('staged', 4).toFixed(2)} / ${mean('staged', 2).toFixed(2)} extractions/s) ≥ 1.7×: ` +
          `${ratio >= 1.7 ? 'PASS' : 'MISS'}${saturated ? '' : ' (a phase ran without a backlog: not a capacity figure)'}` +
          `${process.env.SERIAL === '1' ? `; serial W4/W2 ${(mean('serial', 4) / mean('serial', 2)).toFixed(2)}×` : ''}; ` +
          `0 lost / 0 doubled: ${latencies.every(({ r }) => r.lost === 0 && r.doubled === 0) ? 'PASS' : 'MISS'}`,
      );
      raw.disconnect();
      await memory.close();
      return;
    }
    await startWorkers(W, {});
    const baseline = await run('alone', 1, 1);
    const loaded = await run('load', SESSIONS, PROJECTS);
    const ms = (v: number) => `${Math.round(v)} ms`;
    console.log(`workers ${W}, sessions ${SESSIONS}, projects ${PROJECTS}, turns ${TURNS}, model 200–500 ms`);
    console.log(
      `baseline (1 session): p50 ${ms(baseline.p50)}, p95 ${ms(baseline.p95)}; ${baseline.completed} extractions, ` +
        `${baseline.eventsPerExtraction.toFixed(1)} events each`,
    );
    console.log(
      `load: ${loaded.facts} facts, ${loaded.completed} extractions; turn end → memory on disk p50 ${ms(loaded.p50)}, ` +
        `p95 ${ms(loaded.p95)}, max ${ms(loaded.max)}; events per extraction ${loaded.eventsPerExtraction.toFixed(1)}; ` +
        `lost ${loaded.lost}, doubled ${loaded.doubled}`,
    );
    console.log(
      `ratio p95(load) / p50(baseline): ${(loaded.p95 / baseline.p50).toFixed(2)}×; ` +
        `p95 ≤ 10 s: ${loaded.p95 <= 10_000 ? 'PASS' : 'MISS'}; events ≤ 10: ${loaded.eventsPerExtraction <= 10 ? 'PASS' : 'MISS'}; ` +
        `0 lost / 0 doubled: ${loaded.lost === 0 && loaded.doubled === 0 ? 'PASS' : 'MISS'}`,
    );
    raw.disconnect();
    await memory.close();
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await sleep(500);
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await server.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
