import { timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { sandboxStatus } from '@engram/agent-runtime/sandbox/sandbox';
import { telemetryReport } from '@engram/telemetry/settings';
import { activeTelemetry } from '@engram/telemetry/setup';
import { type ServerType, serve } from '@hono/node-server';
import { serveStatic } from '@hono/node-server/serve-static';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import type { WorkersConfig } from '../config.js';
import { setOperationsGauges, type WorkerMetrics } from '../metrics.js';
import type { OperationsReport } from '../operations.js';
import { jobKindOfQueue } from './job-kinds.js';
import { createMemoryBrowser, type JobSource } from './memory-browser.js';

// Health, readiness, Prometheus metrics, the bull-board dashboard and the memory browser on one small HTTP server.

export interface HttpDeps {
  config: WorkersConfig;
  metrics: WorkerMetrics;
  /** Throws when the service is not ready (engine unreachable, workers not fetching). */
  checkReady(): Promise<{ ok: boolean; details: Record<string, unknown> }>;
  /** BullMQ queues for the dashboard. */
  dashboardQueues: ConstructorParameters<typeof BullMQAdapter>[0][];
  sampleQueueDepths(): Promise<void>;
  /** Is a consolidation of this project running (the memory browser's restores wait for it)? */
  consolidationRunning?: (projectDir: string) => Promise<boolean>;
  /** Outbox backlogs and the reconcile sweep's last run, for /metrics and the memory browser. */
  operations?: () => Promise<OperationsReport>;
}

export interface RunningHttpServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Does the request carry the operator's token (Bearer or `?token=`) or basic-auth credentials? */
export function isOperator(config: WorkersConfig['dashboard'], c: Context): boolean {
  const header = c.req.header('authorization') ?? '';
  const queryToken = c.req.query('token');
  if (
    config.token &&
    (safeEqual(header, `Bearer ${config.token}`) || (queryToken && safeEqual(queryToken, config.token)))
  ) {
    return true;
  }
  if (config.basicAuth && header.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
    if (safeEqual(decoded, `${config.basicAuth.user}:${config.basicAuth.password}`)) return true;
  }
  return false;
}

/**
 * Closed in every mode: with no token or credentials configured nothing passes (the service generates a
 * token into ENGRAM_HOME at start, see `ensureOperatorToken`, so this happens only to a bare `createHttpApp`).
 */
export function dashboardGuard(config: WorkersConfig['dashboard']): MiddlewareHandler {
  return async (c, next) => {
    if (isOperator(config, c)) return next();
    c.header('WWW-Authenticate', config.basicAuth ? 'Basic realm="engram-dashboard"' : 'Bearer');
    return c.text(
      'Unauthorized: the dashboard needs its token (Bearer or ?token=) — ENGRAM_DASHBOARD_TOKEN, or the one generated in $ENGRAM_HOME/.dashboard-token — or basic-auth credentials.',
      401,
    );
  };
}

export function createHttpApp(deps: HttpDeps): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/readyz', async (c) => {
    const ready = await deps
      .checkReady()
      .catch((error: Error) => ({ ok: false, details: { error: error.message } }));
    // Which sandbox mode forks run in; where it is required and cannot start, the service is not ready.
    const sandbox = await sandboxStatus();
    const ok = ready.ok && (sandbox.available || sandbox.mode !== 'require');
    const details = {
      ...ready.details,
      telemetry: telemetryReport(activeTelemetry().settings),
      sandbox: {
        mode: sandbox.mode,
        backend: sandbox.backend,
        bash: sandbox.available ? 'sandboxed' : 'denied',
        ...(sandbox.reason ? { reason: sandbox.reason } : {}),
      },
    };
    return c.json({ ok, details }, ok ? 200 : 503);
  });
  app.get('/metrics', async (c) => {
    await deps.sampleQueueDepths().catch(() => {});
    const operations = await deps.operations?.().catch(() => undefined);
    if (operations) setOperationsGauges(deps.metrics, operations);
    const sandbox = await sandboxStatus();
    deps.metrics.sandbox.reset();
    deps.metrics.sandbox.set(
      { mode: sandbox.mode, backend: sandbox.backend, bash: sandbox.available ? 'sandboxed' : 'denied' },
      1,
    );
    c.header('content-type', deps.metrics.registry.contentType);
    // Per-tenant series (they name tenants) only for the operator; everyone else gets the aggregate ones.
    const tenantSeries = isOperator(deps.config.dashboard, c)
      ? await deps.metrics.tenantRegistry.metrics()
      : '';
    return c.body(`${await deps.metrics.registry.metrics()}${tenantSeries}`);
  });
  if (deps.config.dashboard.enabled) {
    const basePath = '/dashboard';
    const adapter = new HonoAdapter(serveStatic);
    createBullBoard({
      queues: deps.dashboardQueues.map(
        (q) =>
          new BullMQAdapter(q, {
            readOnlyMode: deps.config.dashboard.readOnly,
            allowRetries: !deps.config.dashboard.readOnly,
            // The job kind (`session-memory`), as the CLI, metrics and ENGRAM_QUEUES name it, not the BullMQ queue.
            displayName: jobKindOfQueue(q.name) ?? q.name,
          }),
      ),
      serverAdapter: adapter,
      options: { uiConfig: { boardTitle: 'Engram queues' } },
    });
    adapter.setBasePath(basePath);
    app.use(`${basePath}/*`, dashboardGuard(deps.config.dashboard));
    app.use(basePath, dashboardGuard(deps.config.dashboard));
    app.route(basePath, adapter.registerPlugin());
    // The memory browser: same guard, same read-only switch as the dashboard.
    app.use('/memories', dashboardGuard(deps.config.dashboard));
    app.use('/memories/*', dashboardGuard(deps.config.dashboard));
    app.route(
      '/memories',
      createMemoryBrowser({
        config: deps.config,
        queues: deps.dashboardQueues as unknown as JobSource[],
        ...(deps.consolidationRunning ? { consolidationRunning: deps.consolidationRunning } : {}),
        ...(deps.operations ? { operations: deps.operations } : {}),
      }),
    );
  }
  return app;
}

export async function startHttpServer(deps: HttpDeps): Promise<RunningHttpServer> {
  const app = createHttpApp(deps);
  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: deps.config.http.host, port: deps.config.http.port }, () =>
      resolve(s),
    );
    s.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? Object.assign(
              new Error(
                `port ${deps.config.http.port} on ${deps.config.http.host} is already in use (another engram dev or ` +
                  'engram workers?); choose another with ENGRAM_WORKERS_PORT (0 picks a free one).',
              ),
              { code: 'PORT_IN_USE' },
            )
          : error,
      ),
    );
  });
  const { port } = server.address() as AddressInfo;
  const host = deps.config.http.host === '0.0.0.0' ? '127.0.0.1' : deps.config.http.host;
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
