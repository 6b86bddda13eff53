import type { IncomingMessage, ServerResponse } from 'node:http';
import type { MemoryQueue } from '@engram/memory-client/memory-queue';
import { DEFAULT_SESSION_LEASE_TTL_MS } from '@engram/queue/state/session-lease';
import { withHttpServerSpan } from '@engram/telemetry/http-server';
import { readOperatorToken } from '@engram/tenants/operator-token';
import { resolveTenantCwd, type Tenant, TenantStore } from '@engram/tenants/tenant-store';
import { createLogger, type Logger } from '@engram/worker-service/logger';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { type Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { AgentConfig } from '../config.js';
import { createAgentMetrics } from '../metrics.js';
import { type AgentRuntime, createAgentRuntime } from '../runtime.js';
import type { ServerContext } from './context.js';
import { type Env, errorBody, HttpError } from './http.js';
import { type MemoryStoresHandler, memoryStoresApp } from './routes/memory-stores.js';
import { createTenantMetrics, mountOperatorRoutes } from './routes/operator.js';
import { mountSessionRoutes } from './routes/sessions.js';
import { parseSessionId, readSessionRecord } from './session-records.js';
import { mountTurnRoute } from './turn-runner.js';

export { HttpError } from './http.js';
export { TenantRevokedError } from './turn-runner.js';

// The hosted Engram service (`engram serve`). Every /v1 route is authenticated with a tenant's API key
// (packages/tenants); the tenant — never the request body, a tool argument or the model — decides the
// workspace the session may run in, the ENGRAM_HOME area its memory and transcripts live in, the tools it may
// use, and the scope of every job its turns enqueue. Any replica serves any session: a turn first takes the
// session's lease in the queue engine, so there is one writer per transcript across all replicas.

// This file is the composition: the shared context (context.ts), the middleware every route passes (the HTTP
// server span, errors, authentication, the body limit), and the route modules — routes/operator.ts (health,
// readiness, OpenAPI, metrics), routes/memory-stores.ts (a sub-app), routes/sessions.ts, turn-runner.ts (turns),
// and the extra routes other modules mount (team memory, /mcp).

export type ExtraRouteMethod = 'GET' | 'PUT' | 'POST' | 'DELETE' | 'PATCH';

/**
 * An authenticated route mounted by another module (e.g. team-memory sync). The handler gets the raw Node
 * request/response (it reads its own body and must enforce its own size limit) and the tenant the request
 * authenticated as; requests without a valid key never reach it (401).
 */
export interface ExtraRoute {
  method: ExtraRouteMethod;
  /** A Hono path pattern, e.g. `/api/claude_code/team_memory`. */
  path: string;
  /** Also accept the tenant's team sync credential (TenantStore.teamSyncKey): the team memory routes only. */
  acceptsTeamSyncKey?: boolean;
  handler(
    req: IncomingMessage,
    res: ServerResponse,
    /** `memory`: the service's job producer, when memory work is on (the MCP route's recall selector). */
    ctx: { tenant: Tenant; url: URL; memory?: MemoryQueue },
  ): void | Promise<void>;
}

export interface HostedAppOptions {
  config: AgentConfig;
  /** Default: a TenantStore on config.engramHome. */
  tenants?: TenantStore;
  /** Default: createAgentRuntime(config). */
  runtime?: AgentRuntime;
  routes?: readonly ExtraRoute[];
  /** Largest request body accepted on /v1 routes (default 1 MiB). */
  maxBodyBytes?: number;
  /**
   * The Memory Stores API (`/v1/memory_stores…`, packages/team-memory/src/memory-stores): a web handler given
   * the tenant the SDK's `x-api-key` or `Authorization: Bearer` key authenticated as. Errors in Anthropic's shape.
   */
  memoryStores?: MemoryStoresHandler;
  /** Session lease TTL (default 30 s): how long a dead replica blocks its session. */
  leaseTtlMs?: number;
  /** Longest a request may ask to wait for a busy session (default 300 s). */
  maxWaitMs?: number;
  /** Turns one tenant may run at once, across every replica sharing the queue engine (default 8). */
  maxTurnsPerTenant?: number;
  /**
   * The operator's token: /metrics shows per-tenant series only to a scrape bearing it. Default: the token in
   * `$ENGRAM_HOME/.dashboard-token` (none there: no scrape sees them).
   */
  operatorToken?: () => Promise<string | undefined>;
  /** Default: JSON lines on stdout at config.logLevel, as `engram-serve`. */
  logger?: Logger;
}

export interface HostedApp {
  app: Hono<Env>;
  /** Stops accepting turns, lets in-flight ones finish until `deadlineMs`, then aborts them; leases are released. */
  drain(deadlineMs: number): Promise<{ finished: number; aborted: number }>;
  close(): Promise<void>;
  /** Resolves once the queue engine can take commands (the server calls it before listening). */
  ready(): Promise<void>;
  readonly inFlight: number;
}

export function createHostedApp(options: HostedAppOptions): HostedApp {
  const { config } = options;
  if (config.memoryDirOverride) {
    throw new Error(
      'ENGRAM_MEMORY_DIR is set: every tenant would share one memory directory. Unset it for `engram serve`.',
    );
  }
  const tenants = options.tenants ?? new TenantStore(config.engramHome);
  const runtime = options.runtime ?? createAgentRuntime(config);
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  let draining = false;

  const ctx: ServerContext = {
    config,
    tenants,
    runtime,
    metrics: createAgentMetrics(),
    logger: options.logger ?? createLogger(config.logLevel, { service: 'engram-serve' }),
    stateStore() {
      if (!runtime.memory)
        throw new HttpError(
          503,
          'QUEUE_DISABLED',
          'Memory is disabled; the server needs the queue engine for session leases.',
        );
      return runtime.memory.engine.state;
    },
    isDraining: () => draining,
    async sessionOf(c: Context<Env>) {
      const parsed = parseSessionId(c.req.param('id') ?? '');
      if (!parsed.ok) throw new HttpError(400, 'INVALID_SESSION_ID', parsed.message);
      const record = await readSessionRecord(c.get('tenant'), parsed.id);
      if (!record) throw new HttpError(404, 'SESSION_NOT_FOUND', `No session ${parsed.id} for this API key.`);
      return record;
    },
    async tenantCwd(tenant: Tenant, cwd: string) {
      const real = await resolveTenantCwd(tenant, cwd);
      if (!real) {
        throw new HttpError(
          403,
          'CWD_OUTSIDE_WORKSPACE',
          `cwd ${cwd} is not an existing directory inside this tenant's workspace ${tenant.workspace}.`,
        );
      }
      return real;
    },
  };
  const tenantMetrics = createTenantMetrics();

  const app = new Hono<Env>();
  app.use('*', (c, next) =>
    withHttpServerSpan(
      { method: c.req.method, path: c.req.path, header: (n) => c.req.header(n) },
      async () => {
        await next();
        // The route of the handler that answered (middleware match as ALL).
        const route = c.req.matchedRoutes.filter((r) => r.method !== 'ALL').at(-1)?.path;
        return { route, status: c.res.status };
      },
    ),
  );
  app.onError((error, c) => {
    if (error instanceof HttpError) {
      if (error.retryAfterSeconds !== undefined) c.header('retry-after', String(error.retryAfterSeconds));
      return c.json(errorBody(error.code, error.message, error.details), error.status);
    }
    const e = error as Error & { code?: string; retryable?: boolean };
    const unavailable = e.code === 'STATE_STORE_UNAVAILABLE' || e.retryable;
    // Inside the request's span: the line and its log record carry the trace of the failed request.
    ctx.logger[unavailable ? 'warn' : 'error'](
      { method: c.req.method, path: c.req.path, code: e.code, err: e.message },
      'request failed',
    );
    if (unavailable) return c.json(errorBody(e.code ?? 'UNAVAILABLE', e.message), 503);
    return c.json(errorBody(e.code ?? 'INTERNAL', e.message), 500);
  });
  app.notFound((c) => c.json(errorBody('NOT_FOUND', `No route ${c.req.method} ${c.req.path}.`), 404));

  mountOperatorRoutes(app, ctx, {
    tenantMetrics,
    operatorToken: options.operatorToken ?? (() => readOperatorToken(config.engramHome)),
  });

  // Everything below needs a tenant's key.
  const authenticateWith =
    (opts: { teamSync?: boolean }) => async (c: Context<Env>, next: () => Promise<void>) => {
      const tenant = await tenants.authenticate(c.req.header('authorization'), opts);
      if (!tenant) {
        c.header('www-authenticate', 'Bearer realm="engram"');
        return c.json(
          errorBody('UNAUTHORIZED', 'Send `Authorization: Bearer <API key>` (from `engram tenants add`).'),
          401,
        );
      }
      c.set('tenant', tenant);
      await next();
    };

  // Before the generic /v1 middleware: the Memory Stores sub-app authenticates in the SDK's own way.
  if (options.memoryStores) app.route('/v1/memory_stores', memoryStoresApp(tenants, options.memoryStores));

  const limit = bodyLimit({
    maxSize: maxBodyBytes,
    onError: (c) =>
      c.json(errorBody('BODY_TOO_LARGE', `The request body exceeds ${maxBodyBytes} bytes.`), 413),
  });
  app.use('/v1/*', authenticateWith({}), limit);

  // A URL's `.`/`..` segments are resolved before routing (so `/v1/sessions/./turns` would route as
  // `/v1/sessions/turns`): judge the session id as the client sent it, byte for byte.
  app.use('/v1/*', async (c, next) => {
    const raw = c.env?.incoming?.url ?? '';
    const m = /^\/v1\/sessions\/([^/?#]*)/.exec(raw);
    if (m) {
      let id = m[1]!;
      try {
        id = decodeURIComponent(id);
      } catch {
        // left encoded: the id check refuses the `%`
      }
      const parsed = parseSessionId(id);
      if (!parsed.ok) return c.json(errorBody('INVALID_SESSION_ID', parsed.message), 400);
    }
    await next();
  });

  mountSessionRoutes(app, ctx);
  const turns = mountTurnRoute(app, ctx, {
    leaseTtlMs: options.leaseTtlMs ?? DEFAULT_SESSION_LEASE_TTL_MS,
    maxWaitMs: options.maxWaitMs ?? 300_000,
    maxTurnsPerTenant: options.maxTurnsPerTenant ?? 8,
    tenantMetrics,
  });

  for (const route of options.routes ?? []) {
    app.on(
      route.method,
      route.path,
      authenticateWith({ teamSync: route.acceptsTeamSyncKey === true }),
      async (c) => {
        const { incoming, outgoing } = c.env;
        await route.handler(incoming, outgoing, {
          tenant: c.get('tenant'),
          url: new URL(c.req.url),
          ...(runtime.memory ? { memory: runtime.memory } : {}),
        });
        return RESPONSE_ALREADY_SENT;
      },
    );
  }

  return {
    app,
    get inFlight() {
      return turns.inFlight;
    },
    drain(deadlineMs: number) {
      draining = true;
      return turns.drain(deadlineMs);
    },
    close: () => runtime.close(),
    ready: async () => ctx.stateStore().ready(),
  };
}
