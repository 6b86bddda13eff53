import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { activeTelemetry, startTelemetry } from '@engram/telemetry/setup';
import { TenantStore } from '@engram/tenants/tenant-store';
import { Closer, uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '@engram/testkit/otlp-receiver';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';
import { waitUntil } from '@engram/testkit/wait';
import { WORKER_TEST_BACKENDS } from '@engram/worker-service/testing/backends.test-helpers';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isFork } from './cli.test-helpers.js';
import { startServer } from './commands/serve.js';
import { loadAgentConfig } from './config.js';

// One trace from a served turn to the memory file: the real Node SDK exporting OTLP/HTTP (JSON) to a receiver
// in this process, a real served turn, real workers, the scripted model — on Redis and on BullMQ's PostgreSQL
// backend (the run's embedded server), where the trace context travels with the job the same way. This test
// file runs in its own process (Vitest forks), so the SDK it starts is registered for this file only.

const MEMORY =
  '---\nname: Deploys\ndescription: Deploys go through the blue/green script\ntype: project\n---\nUse deploy.sh.\n';
const SDK_SCOPE = 'com.anthropic.sdk.typescript';
const closer = new Closer();
let receiver: OtlpReceiver;
let model: ModelServer;
let base: string;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  model = await startModelServer();
  base = mkdtempSync(join(tmpdir(), 'engram-otel-'));
  // The SDK's exporters read these from the process environment, as in production.
  Object.assign(process.env, {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_METRICS_EXPORTER: 'none',
    OTEL_LOGS_EXPORTER: 'none',
    OTEL_BSP_SCHEDULE_DELAY: '100',
  });
  await startTelemetry('serve');
  model.respond((r) => {
    if (isFork(r)) {
      const memoryDir = /persistent, file-based memory at `([^`]+)`/.exec(JSON.stringify(r.body.system))?.[1];
      if (!JSON.stringify(r.body.messages).includes('blue/green')) return textReply('Nothing to save.');
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
  await activeTelemetry().shutdown();
  await model.close();
  await receiver.close();
});

function ancestorsOf(span: ReceivedSpan, all: ReceivedSpan[]): ReceivedSpan[] {
  const byId = new Map(all.map((s) => [s.spanId, s]));
  const chain: ReceivedSpan[] = [];
  for (let p = byId.get(span.parentSpanId); p; p = byId.get(p.parentSpanId)) chain.push(p);
  return chain;
}

describe.each(WORKER_TEST_BACKENDS)(
  'telemetry on (%s): one trace from a served turn to the memory file',
  (kind, backend) => {
    it('holds the HTTP request, the turn, the enqueue, the extract job, the fork’s SDK model call and the commit, with the tenant on the job’s spans', async () => {
      // Both backends' runs export to the one receiver: this run's spans are those after this point.
      const before = receiver.spans().length;
      const namespace = uniquePrefix('otel');
      backend.cleanUpAfter(namespace, closer);
      const engramHome = join(base, kind, 'home');
      const workspaceDir = join(base, kind, 'workspaces', 'acme');
      mkdirSync(workspaceDir, { recursive: true });
      const acme = await new TenantStore(engramHome).add('acme', workspaceDir);
      const env = {
        PATH: process.env.PATH,
        HOME: join(base, kind, 'operator-home'),
        ENGRAM_HOME: engramHome,
        ENGRAM_NAMESPACE: namespace,
        ...backend.env(),
        ANTHROPIC_API_KEY: 'test',
        ANTHROPIC_BASE_URL: model.url,
        ENGRAM_SMALL_MODEL: 'small-test-model',
        ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
      };
      const service = await startTestWorkerService({
        modelUrl: model.url,
        engramHome,
        namespace,
        queues: 'extract',
        backendEnv: backend.env(),
        // The default model thread: the SDK's span is made there and joins the job's trace.
        env: { ENGRAM_MODEL_THREADS: '1' },
      });
      closer.defer(() => service.stop('test'));
      const config = loadAgentConfig(env);
      expect(config.backend.kind).toBe(kind);
      expect(service.engine.config.kind).toBe(kind);
      const server = await startServer(config, { port: 0, host: '127.0.0.1' }, env);
      closer.defer(() => server.stop());

      const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { telemetry: unknown };
      expect(ready.telemetry).toEqual({
        enabled: true,
        serviceName: 'engram-serve',
        endpoint: receiver.url,
        protocol: 'http/json',
      });
      const post = (path: string, body: unknown) =>
        fetch(`${server.url}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${acme.key}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
          // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API under test
        }).then((r) => r.json() as Promise<any>);
      const session = await post('/v1/sessions', { cwd: workspaceDir });
      const turn = await post(`/v1/sessions/${session.id}/turns`, {
        prompt: 'Deploys go through the blue/green script.',
      });
      expect(turn.memory.extract.status).toBe('queued');

      const paths = await resolveEngramPaths({ engramHome: acme.tenant.home, cwd: workspaceDir });
      const memoryFile = join(paths.memoryDir, 'project_deploys.md');
      // Deadlines, not counts: on a loaded machine (CI runs this beside other suites) each step takes longer.
      await waitUntil(() => existsSync(memoryFile), 'the memory file', { timeoutMs: 30_000, intervalMs: 50 });

      // The receipt span ends just after the file lands, and BullMQ's consumer span when the handler has
      // returned, a little later: wait until both of this turn's trace are exported (the other backend's run
      // may still be exporting into the same receiver). A timeout falls through: the assertions below name
      // what is missing.
      let spans: ReceivedSpan[] = [];
      let trace: ReceivedSpan[] = [];
      let turnSpan: ReceivedSpan | undefined;
      await waitUntil(
        async () => {
          await activeTelemetry().flush();
          spans = receiver.spans().slice(before);
          turnSpan = spans.find(
            (s) => s.name === 'engram.turn' && s.attributes['gen_ai.conversation.id'] === session.id,
          );
          trace = turnSpan ? spans.filter((s) => s.traceId === turnSpan!.traceId) : [];
          const consumer = trace.some((s) => s.scope === 'bullmq' && s.kind === 5 && /extract/.test(s.name));
          return consumer && trace.some((s) => s.name === 'engram.receipt');
        },
        'the extract job and receipt spans of this turn’s trace',
        { timeoutMs: 30_000, intervalMs: 100 },
      ).catch(() => undefined);
      expect(turnSpan, spans.map((s) => s.name).join(', ')).toBeDefined();
      const http = trace.find((s) => s.name === 'POST /v1/sessions/:id/turns');
      expect(http).toMatchObject({ kind: 2, attributes: { 'http.response.status_code': 200 } });
      expect(turnSpan!.parentSpanId).toBe(http!.spanId);

      // BullMQ's add-on: the enqueue (producer) under the turn, the job (consumer) under the enqueue.
      const enqueue = trace.find((s) => s.scope === 'bullmq' && s.kind === 4 && /extract/.test(s.name));
      expect(enqueue, trace.map((s) => `${s.scope}:${s.name}:${s.kind}`).join(', ')).toBeDefined();
      expect(ancestorsOf(enqueue!, trace)).toContain(turnSpan);
      const job = trace.find((s) => s.scope === 'bullmq' && s.kind === 5 && /extract/.test(s.name));
      expect(job).toBeDefined();
      expect(job!.parentSpanId).toBe(enqueue!.spanId);
      expect(job!.attributes['engram.tenant']).toBe('acme');

      // Inside the job: the fork, the SDK's own model-call span, the commit and the receipt.
      const fork = trace.find((s) => s.name === 'engram.fork extract');
      expect(ancestorsOf(fork!, trace)).toContain(job);
      const modelCall = trace.find((s) => s.scope === SDK_SCOPE && ancestorsOf(s, trace).includes(fork!));
      expect(modelCall).toMatchObject({ kind: 3 });
      expect(modelCall!.attributes['gen_ai.provider.name']).toBe('anthropic');
      // The fork's Write call, a gen_ai tool-execution span under the fork.
      const tool = trace.find((s) => s.name === 'execute_tool Write');
      expect(tool).toMatchObject({
        kind: 1,
        attributes: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': 'Write',
          'engram.tenant': 'acme',
        },
      });
      expect(ancestorsOf(tool!, trace)).toContain(fork);
      const commit = trace.find((s) => s.name === 'engram.commit');
      expect(ancestorsOf(commit!, trace)).toContain(fork);
      const receipt = trace.find((s) => s.name === 'engram.receipt');
      // The memory file and the MEMORY.md index that now points at it.
      expect(receipt!.attributes['engram.receipt.created']).toBe(2);
      for (const s of [fork!, modelCall!, commit!, receipt!]) {
        expect(s.attributes['engram.tenant'], s.name).toBe('acme');
        expect(s.attributes['engram.project'], s.name).toBe(job!.attributes['engram.project']);
      }
      expect(job!.attributes['engram.project']).toEqual(expect.any(String));
      // The served turn's own model call is in the same trace, under the turn.
      expect(trace.some((s) => s.scope === SDK_SCOPE && s.parentSpanId === turnSpan!.spanId)).toBe(true);
      // Two 30 s deadlines above, and the served turn before them: on a loaded machine the default 20 s is short.
    }, 90_000);
  },
);
