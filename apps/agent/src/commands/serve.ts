import { existsSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { z } from 'zod';
import type { AgentConfig } from '../config.js';
import { createAgentMetrics } from '../metrics.js';
import { createAgentRuntime } from '../runtime.js';
import { AgentSession } from '../session/agent-session.js';
import { mainAgentPolicy } from '../session/permissions.js';
import { EXIT, type Output } from './output.js';
import { waitForSignal } from './workers.js';

// `engram serve`: the hosted HTTP API — one turn per request, memory work enqueued exactly as the CLI does.
// Replicas behind a load balancer share ENGRAM_HOME and the queue; turns of one session are serialised here.

const turnBody = z.object({
  prompt: z.string().min(1).max(200_000),
  cwd: z.string().refine(isAbsolute, 'must be an absolute path'),
  sessionId: z.string().optional(),
  allowedTools: z.array(z.string()).max(16).default([]),
});

export function createServeApp(config: AgentConfig) {
  const runtime = createAgentRuntime(config);
  const metrics = createAgentMetrics();
  const sessionLocks = new Map<string, Promise<unknown>>();
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/metrics', async (c) => {
    c.header('content-type', metrics.registry.contentType);
    return c.body(await metrics.registry.metrics());
  });
  app.post('/v1/turns', async (c) => {
    const parsed = turnBody.safeParse(await c.req.json().catch(() => undefined));
    if (!parsed.success)
      return c.json({ error: { type: 'invalid_request', message: parsed.error.message } }, 400);
    const body = parsed.data;
    if (!existsSync(body.cwd))
      return c.json({ error: { type: 'invalid_request', message: 'cwd does not exist' } }, 400);
    const run = async () => {
      const session = await AgentSession.open(runtime, {
        cwd: body.cwd,
        ...(body.sessionId ? { sessionId: body.sessionId } : {}),
      });
      if (!session.resumed) {
        for (const { overflow } of session.indexOverflows) metrics.indexOverflows.inc({ cap: overflow.cap });
      }
      try {
        const turn = await session.runTurn(body.prompt, {
          canUseTool: mainAgentPolicy({ paths: session.paths, allowedTools: new Set(body.allowedTools) }),
        });
        metrics.recordTurn(turn);
        return { ...turn, notices: session.notices };
      } catch (error) {
        metrics.turns.inc({ outcome: 'error' });
        throw error;
      }
    };
    const key = body.sessionId ?? '';
    const previous = (key && sessionLocks.get(key)) || Promise.resolve();
    const current = previous.catch(() => {}).then(run);
    if (key) sessionLocks.set(key, current);
    try {
      return c.json(await current);
    } catch (error) {
      const e = error as Error & { retryable?: boolean; code?: string };
      return c.json({ error: { type: e.code ?? 'error', message: e.message } }, e.retryable ? 503 : 500);
    } finally {
      if (key && sessionLocks.get(key) === current) sessionLocks.delete(key);
    }
  });
  return { app, close: () => runtime.close() };
}

export async function serveCommand(
  config: AgentConfig,
  opts: { port: number; host: string },
  io: Output,
): Promise<number> {
  const { app, close } = createServeApp(config);
  const server = serve({ fetch: app.fetch, port: opts.port, hostname: opts.host });
  io.err(`engram serve: listening on http://${opts.host}:${opts.port} (POST /v1/turns)`);
  await waitForSignal();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await close();
  return EXIT.ok;
}
