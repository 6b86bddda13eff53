import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { TenantStore } from '@engram/tenants/tenant-store';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '@engram/testkit/otlp-receiver';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { assertBuilt, ENGRAM_BIN, engram, isFork } from './cli.test-helpers.js';

// One trace across processes: `engram serve` and `engram workers` run as separate processes from the built
// CLI, each with its own Node SDK configured only by OTEL_* in its environment, exporting OTLP/HTTP (JSON) to a
// receiver in this test process. A real served turn (the scripted model) enqueues an extraction on the run's
// Redis; the worker process runs it. The trace context crosses the process boundary only through BullMQ's
// telemetry metadata on the job (bullmq-otel), and the model thread's SDK span joins it through carry.ts.
// The same stack without OTEL_* exports nothing.

const MEMORY =
  '---\nname: Deploys\ndescription: Deploys go through the blue/green script\ntype: project\n---\nUse deploy.sh.\n';
const SDK_SCOPE = 'com.anthropic.sdk.typescript';
const closer = new Closer();
let receiver: OtlpReceiver;
let model: ModelServer;
let base: string;

beforeAll(async () => {
  assertBuilt();
  receiver = await startOtlpReceiver();
  model = await startModelServer();
  base = mkdtempSync(join(tmpdir(), 'engram-otel-proc-'));
  model.respond((r) => {
    if (isFork(r)) {
      const memoryDir = /persistent, file-based memory at `([^`]+)`/.exec(JSON.stringify(r.body.system))?.[1];
      if (!JSON.stringify(r.body.messages).includes('blue/green')) return textReply('Nothing to save.');
      if (JSON.stringify(r.body.messages).includes('tool_result')) return textReply('Saved.');
      return reply(
        text('Saving.'),
        toolUse('Write', { file_path: `${memoryDir}/project_deploys.md`, content: MEMORY }),
      );
    }
    if (r.body.model === 'small-test-model') return textReply('{"selected_memories": []}');
    return textReply('Noted.');
  });
});
afterAll(async () => {
  await closer.closeAll();
  await model?.close();
  await receiver?.close();
});

interface Proc {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
}

function start(args: string[], env: Record<string, string | undefined>): Proc {
  const child = spawn(process.execPath, [ENGRAM_BIN, ...args], {
    env: { TMPDIR: process.env.TMPDIR, ...env } as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr!.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  closer.defer(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  });
  return { child, stdout: () => stdout, stderr: () => stderr };
}

/** Graceful stop (SIGTERM): the process's SDK exports what it holds before it exits. */
async function stop(proc: Proc): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  const exited = new Promise((r) => proc.child.once('exit', r));
  proc.child.kill('SIGTERM');
  await exited;
}

async function waitFor<T>(
  what: string,
  probe: () => T | undefined,
  proc: Proc[],
  ms = 60_000,
  seen: () => string = () => '',
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${what}\nseen: ${seen()}\n${proc.map((p) => p.stderr()).join('\n---\n')}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface StackRun {
  serveReady: { telemetry: { enabled: boolean; serviceName?: string } };
  /** The workers' `/readyz` puts it under `details`. */
  workersReady: { details: { telemetry: { enabled: boolean; serviceName?: string } } };
  workerLines: Array<Record<string, unknown>>;
  /** `engram doctor --json`'s telemetry check, in the same environment. */
  doctor: { ok: boolean; detail: string } | undefined;
  serve: Proc;
  workers: Proc;
}

/** A tenant, `engram serve` and `engram workers` on one ENGRAM_HOME, and one served turn that writes a memory. */
async function servedTurn(
  label: string,
  otel: Record<string, string>,
): Promise<StackRun & { traceparent: string }> {
  const engramHome = join(base, label, 'home');
  const workspaceDir = join(base, label, 'workspaces', 'acme');
  mkdirSync(workspaceDir, { recursive: true });
  const acme = await new TenantStore(engramHome).add('acme', workspaceDir);
  const env = {
    PATH: process.env.PATH,
    HOME: join(base, label, 'operator-home'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: uniquePrefix(`otelp${label}`),
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: model.url,
    ENGRAM_SMALL_MODEL: 'small-test-model',
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    ENGRAM_MODEL_MAX_RETRIES: '0',
    ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
    ENGRAM_TEAM_MEMORY_SCHEMA: `otelp_${randomBytes(5).toString('hex')}`,
    ...otel,
  };
  const serve = start(['serve', '--port', '0'], env);
  const workers = start(['workers'], {
    ...env,
    ENGRAM_QUEUES: 'extract',
    ENGRAM_WORKERS_PORT: '0',
    LOG_LEVEL: 'info',
    // At the test's priority: at nice 10 (production's default) the other suites `npm test` runs beside this one
    // leave the workers a tenth of a core (apps/workers' worker-process.test-helpers.ts says more).
    ENGRAM_WORKERS_NICE: '0',
  });
  const serveUrl = await waitFor(
    'engram serve to listen',
    () => /listening on (http:\/\/\S+)/.exec(serve.stderr())?.[1],
    [serve],
  );
  const workersUrl = await waitFor(
    'engram workers to start',
    () => /health (http:\/\/\S+)\/readyz/.exec(workers.stderr())?.[1],
    [workers],
  );
  const serveReady = (await (await fetch(`${serveUrl}/readyz`)).json()) as StackRun['serveReady'];
  const workersReady = (await (await fetch(`${workersUrl}/readyz`)).json()) as StackRun['workersReady'];

  const doctorRun = await engram(['doctor', '--json'], { env, timeoutMs: 60_000 });
  const doctor = (
    JSON.parse(doctorRun.stdout).checks as Array<{ name: string; ok: boolean; detail: string }>
  ).find((c) => c.name === 'telemetry');

  const post = (path: string, body: unknown) =>
    fetch(`${serveUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API under test
    }).then((r) => r.json() as Promise<any>);
  const session = await post('/v1/sessions', { cwd: workspaceDir });
  // The client's own trace context: the served turn continues it, so the test knows the trace id up front.
  const traceparent = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
  const turn = await fetch(`${serveUrl}/v1/sessions/${session.id}/turns`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acme.key}`, 'content-type': 'application/json', traceparent },
    body: JSON.stringify({ prompt: 'Deploys go through the blue/green script.' }),
    // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API under test
  }).then((r) => r.json() as Promise<any>);
  expect(turn.memory.extract.status).toBe('queued');

  const paths = await resolveEngramPaths({ engramHome: acme.tenant.home, cwd: workspaceDir });
  const memoryFile = join(paths.memoryDir, 'project_deploys.md');
  await waitFor('the memory file', () => (existsSync(memoryFile) ? true : undefined), [serve, workers]);
  const lines = () =>
    workers
      .stdout()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  await waitFor(
    'the worker’s "job completed" line',
    () => (lines().some((l) => l.msg === 'job completed') ? true : undefined),
    [workers],
  );
  return { serveReady, workersReady, workerLines: lines(), doctor, serve, workers, traceparent };
}

function ancestorsOf(span: ReceivedSpan, all: ReceivedSpan[]): ReceivedSpan[] {
  const byId = new Map(all.map((s) => [s.spanId, s]));
  const chain: ReceivedSpan[] = [];
  for (let p = byId.get(span.parentSpanId); p; p = byId.get(p.parentSpanId)) chain.push(p);
  return chain;
}

describe('telemetry across processes: engram serve and engram workers', () => {
  it('exports nothing when no OTEL_* variable is set (the same stack, the same turn)', async () => {
    const run = await servedTurn('off', {});
    expect(run.serveReady.telemetry).toMatchObject({ enabled: false });
    expect(run.workersReady.details.telemetry).toMatchObject({ enabled: false });
    expect(run.doctor?.detail).toMatch(/^off \(/);
    const completed = run.workerLines.find((l) => l.msg === 'job completed');
    expect(completed).toBeDefined();
    expect(completed).not.toHaveProperty('trace_id');
    await Promise.all([stop(run.serve), stop(run.workers)]);
    expect(receiver.requests().size).toBe(0);
    expect(receiver.spans()).toEqual([]);
  }, 180_000);

  it('one trace: serve’s turn → the enqueue → the worker process’s job, fork, tool call, SDK model call, commit; logs with its ids', async () => {
    const run = await servedTurn('on', {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_METRICS_EXPORTER: 'none',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_BLRP_SCHEDULE_DELAY: '100',
    });
    expect(run.serveReady.telemetry).toMatchObject({ enabled: true, serviceName: 'engram-serve' });
    expect(run.workersReady.details.telemetry).toMatchObject({
      enabled: true,
      serviceName: 'engram-workers',
      endpoint: receiver.url,
      protocol: 'http/json',
    });
    expect(run.doctor).toMatchObject({ ok: true });
    expect(run.doctor?.detail).toContain(`on as engram-serve → ${receiver.url} (http/json; traces: otlp`);
    // Each process exports on its batch processors' schedule (100 ms here), the model thread too.
    let spans: ReceivedSpan[] = [];
    await waitFor(
      `the worker's consumer span, its SDK span and its "job completed" record`,
      () => {
        spans = receiver.spans();
        const consumer = spans.some((s) => s.service === 'engram-workers' && s.kind === 5);
        const sdk = spans.some((s) => s.service === 'engram-workers' && s.scope === SDK_SCOPE);
        const log = receiver.logs().some((l) => l.body === 'job completed');
        return consumer && sdk && log ? true : undefined;
      },
      [run.serve, run.workers],
      30_000,
      () =>
        receiver
          .spans()
          .map((s) => `${s.service}:${s.scope}:${s.name}:${s.kind}`)
          .join(', '),
    );
    await Promise.all([stop(run.serve), stop(run.workers)]);

    const turnSpan = spans.find((s) => s.name === 'engram.turn');
    expect(turnSpan, spans.map((s) => `${s.service}:${s.name}`).join(', ')).toMatchObject({
      service: 'engram-serve',
    });
    const trace = spans.filter((s) => s.traceId === turnSpan!.traceId);
    const describeTrace = trace.map((s) => `${s.service}:${s.scope}:${s.name}:${s.kind}`).join(', ');
    const http = trace.find((s) => s.name === 'POST /v1/sessions/:id/turns');
    expect(http).toMatchObject({ kind: 2, service: 'engram-serve' });
    expect(turnSpan!.parentSpanId).toBe(http!.spanId);

    // The enqueue in the serve process; the job in the worker process, its child across the boundary.
    const enqueue = trace.find((s) => s.scope === 'bullmq' && s.kind === 4 && /extract/.test(s.name));
    expect(enqueue, describeTrace).toMatchObject({ service: 'engram-serve' });
    expect(ancestorsOf(enqueue!, trace)).toContain(turnSpan);
    const job = trace.find((s) => s.scope === 'bullmq' && s.kind === 5 && /extract/.test(s.name));
    expect(job, describeTrace).toMatchObject({ service: 'engram-workers' });
    expect(job!.parentSpanId).toBe(enqueue!.spanId);
    expect(job!.attributes['engram.tenant']).toBe('acme');
    expect(job!.attributes['engram.project']).toEqual(expect.any(String));

    // Inside the job: the fork, its Write tool call, the SDK's own model-call span, the commit, the receipt.
    const fork = trace.find((s) => s.name === 'engram.fork extract');
    expect(fork, describeTrace).toMatchObject({ service: 'engram-workers' });
    expect(ancestorsOf(fork!, trace)).toContain(job);
    const tool = trace.find((s) => s.name === 'execute_tool Write');
    expect(tool, describeTrace).toMatchObject({
      kind: 1,
      attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'Write' },
    });
    expect(ancestorsOf(tool!, trace)).toContain(fork);
    const modelCall = trace.find((s) => s.scope === SDK_SCOPE && ancestorsOf(s, trace).includes(fork!));
    expect(modelCall, describeTrace).toMatchObject({ kind: 3, service: 'engram-workers' });
    expect(modelCall!.attributes['gen_ai.provider.name']).toBe('anthropic');
    const commit = trace.find((s) => s.name === 'engram.commit');
    expect(ancestorsOf(commit!, trace)).toContain(fork);
    const receipt = trace.find((s) => s.name === 'engram.receipt');
    expect(receipt!.attributes['engram.receipt.created']).toBe(2);
    for (const s of [fork!, tool!, modelCall!, commit!, receipt!]) {
      expect(s.attributes['engram.tenant'], s.name).toBe('acme');
      expect(s.attributes['engram.project'], s.name).toBe(job!.attributes['engram.project']);
    }
    // The served turn's own model call is in the same trace, under the turn, in the serve process.
    expect(
      trace.some(
        (s) => s.scope === SDK_SCOPE && s.parentSpanId === turnSpan!.spanId && s.service === 'engram-serve',
      ),
    ).toBe(true);

    // Logs: the worker's "job completed" line carries the job span's ids, and the same record reached the
    // receiver over OTLP with them.
    const line = run.workerLines.find((l) => l.msg === 'job completed');
    expect(line).toMatchObject({ trace_id: turnSpan!.traceId, span_id: job!.spanId });
    const record = receiver.logs().find((l) => l.body === 'job completed');
    expect(record, JSON.stringify(receiver.logs().map((l) => l.body))).toMatchObject({
      traceId: turnSpan!.traceId,
      spanId: job!.spanId,
      severityText: 'INFO',
      service: 'engram-workers',
      attributes: { queue: 'extract' },
    });
  }, 180_000);

  it('at stop every process exports what it still holds: serve’s turn and its log record, the worker’s job and its model thread’s SDK span', async () => {
    // Schedules far longer than the run: nothing is exported on a timer, so what arrives was flushed at stop.
    const late = await startOtlpReceiver();
    closer.defer(() => late.close());
    const run = await servedTurn('late', {
      OTEL_EXPORTER_OTLP_ENDPOINT: late.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_METRICS_EXPORTER: 'none',
      OTEL_BSP_SCHEDULE_DELAY: '600000',
      OTEL_BLRP_SCHEDULE_DELAY: '600000',
    });
    const traceId = run.traceparent.split('-')[1]!;
    // The control: the run is over (memory written, job completed) and nothing has been exported yet.
    expect(late.spans().filter((s) => s.traceId === traceId)).toEqual([]);
    expect(late.logs()).toEqual([]);
    await Promise.all([stop(run.serve), stop(run.workers)]);

    const trace = late.spans().filter((s) => s.traceId === traceId);
    const describeTrace = trace.map((s) => `${s.service}:${s.scope}:${s.name}:${s.kind}`).join(', ');
    const turnSpan = trace.find((s) => s.name === 'engram.turn');
    expect(turnSpan, describeTrace).toMatchObject({ service: 'engram-serve' });
    const http = trace.find((s) => s.name === 'POST /v1/sessions/:id/turns');
    expect(http, describeTrace).toMatchObject({ kind: 2, service: 'engram-serve' });
    // The served turn's log record (engram serve's logger), with the ids of the request's span.
    const served = late.logs().find((l) => l.body === 'turn finished');
    expect(served, JSON.stringify(late.logs().map((l) => `${l.service}:${String(l.body)}`))).toMatchObject({
      service: 'engram-serve',
      traceId,
      spanId: http!.spanId,
      severityText: 'INFO',
      attributes: { tenant: 'acme', endReason: expect.any(String) },
    });
    // The worker's job, and the SDK span its model thread ended moments before the process was stopped.
    const job = trace.find((s) => s.scope === 'bullmq' && s.kind === 5 && /extract/.test(s.name));
    expect(job, describeTrace).toMatchObject({ service: 'engram-workers' });
    const fork = trace.find((s) => s.name === 'engram.fork extract');
    expect(fork, describeTrace).toBeDefined();
    const threadCall = trace.find((s) => s.scope === SDK_SCOPE && ancestorsOf(s, trace).includes(fork!));
    expect(threadCall, describeTrace).toMatchObject({ kind: 3, service: 'engram-workers' });
    expect(late.logs().find((l) => l.body === 'job completed')).toMatchObject({
      service: 'engram-workers',
      traceId,
      spanId: job!.spanId,
    });
  }, 180_000);
});
