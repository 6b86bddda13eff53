import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { listMemories } from '@engram/memory-core/memdir/memory-files';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import { readCostLedger, recordCost } from '@engram/queue/state/cost-ledger';
import {
  acquireSessionLease,
  DEFAULT_SESSION_LEASE_TTL_MS,
  SessionBusyError,
  type SessionLease,
  SessionLeaseLostError,
  sessionLeaseKey,
} from '@engram/queue/state/session-lease';
import { SessionState } from '@engram/queue/state/session-state';
import type { StateStore } from '@engram/queue/state/state-store';
import { withHttpServerSpan } from '@engram/telemetry/http-server';
import { telemetryReport } from '@engram/telemetry/settings';
import { activeTelemetry } from '@engram/telemetry/setup';
import { readOperatorToken, sameSecret } from '@engram/tenants/operator-token';
import { resolveTenantCwd, SERVED_TOOLS, type Tenant, TenantStore } from '@engram/tenants/tenant-store';
import type { HttpBindings } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { type Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { streamSSE } from 'hono/streaming';
import { Counter, Gauge, Registry } from 'prom-client';
import type { z } from 'zod';
import type { AgentConfig } from '../config.js';
import { createAgentMetrics } from '../metrics.js';
import { type AgentRuntime, createAgentRuntime } from '../runtime.js';
import { AgentSession, type TurnResult } from '../session/agent-session.js';
import { createSessionBody, turnBody } from './api-schemas.js';
import { openApiDocument } from './openapi.js';
import { effectiveTools, sandboxServedBash, servedTurnPolicy } from './served-policy.js';
import {
  createSessionRecord,
  parseSessionId,
  readSessionRecord,
  type SessionRecord,
} from './session-records.js';
import { type TurnStreamEvent, turnEventsOf } from './turn-events.js';

// The hosted Engram service (`engram serve`). Every /v1 route is authenticated with a tenant's API key
// (packages/tenants); the tenant — never the request body, a tool argument or the model — decides the
// workspace the session may run in, the ENGRAM_HOME area its memory and transcripts live in, the tools it may
// use, and the scope of every job its turns enqueue. Any replica serves any session: a turn first takes the
// session's lease in the queue engine, so there is one writer per transcript across all replicas.

/** How long a turn waits for a lost state-store connection to come back before answering 503. */
const STATE_STORE_RECONNECT_WAIT_MS = 3_000;
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
  handler(req: IncomingMessage, res: ServerResponse, ctx: { tenant: Tenant; url: URL }): void | Promise<void>;
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
  memoryStores?: (
    req: Request,
    ctx: { tenant: string; actor: { type: 'api_actor'; api_key_id: string } },
  ) => Promise<Response>;
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
}

type Env = { Bindings: HttpBindings; Variables: { tenant: Tenant } };

export class HttpError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 415 | 429 | 503,
    readonly code: string,
    message: string,
    /** Extra fields of the error body (e.g. the limit that refused the request). */
    readonly details: Record<string, unknown> = {},
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** A turn stopped because its tenant's key was revoked (or expired after a rotation) while it ran. */
export class TenantRevokedError extends Error {
  readonly code = 'TENANT_REVOKED';
  constructor(tenant: string) {
    super(`Tenant ${tenant}'s API key was revoked during this turn; the turn stopped at its next step.`);
    this.name = 'TenantRevokedError';
  }
}

/**
 * Takes one of the tenant's `limit` turn slots (`turns:<tenant>:<i>` leases in the state store, so the bound
 * holds across replicas; a dead replica's slot expires with its TTL). Undefined when all are held.
 */
async function acquireTurnSlot(
  store: StateStore,
  tenant: string,
  limit: number,
  ttlMs: number,
): Promise<{ release(): Promise<void> } | undefined> {
  const holder = randomUUID();
  const start = Math.floor(Math.random() * limit);
  for (let n = 0; n < limit; n++) {
    const key = `turns:${tenant}:${(start + n) % limit}`;
    const lease = await store.acquireLease(key, holder, ttlMs);
    if (!lease) continue;
    const renew = setInterval(
      () => void store.renewLease(key, holder, lease.token, ttlMs).catch(() => {}),
      Math.max(250, Math.floor(ttlMs / 3)),
    );
    renew.unref();
    return {
      async release() {
        clearInterval(renew);
        await store.releaseLease(key, holder, lease.token).catch(() => {});
      },
    };
  }
  return undefined;
}

function errorBody(code: string, message: string, details: Record<string, unknown> = {}) {
  return { error: { code, message, ...details } };
}

async function readJson<T>(c: Context<Env>, schema: z.ZodType<T>): Promise<T> {
  const text = await c.req.text();
  let value: unknown;
  try {
    value = text.trim() === '' ? undefined : JSON.parse(text);
  } catch (error) {
    throw new HttpError(
      400,
      'INVALID_JSON',
      `The request body is not valid JSON: ${(error as Error).message}`,
    );
  }
  if (value === undefined)
    throw new HttpError(400, 'INVALID_JSON', 'The request body is empty; send a JSON object.');
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ');
    throw new HttpError(400, 'INVALID_REQUEST', `Invalid request body — ${issues}`);
  }
  return parsed.data;
}

function waitMsOf(body: z.infer<typeof turnBody>, prefer: string | undefined, maxWaitMs: number): number {
  let seconds = 0;
  if (body.wait === true) seconds = maxWaitMs / 1000;
  else if (typeof body.wait === 'number') seconds = body.wait;
  else {
    const m = /(?:^|[,;\s])wait=(\d+)/.exec(prefer ?? '');
    if (m) seconds = Number(m[1]);
  }
  return Math.min(seconds * 1000, maxWaitMs);
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
  const leaseTtlMs = options.leaseTtlMs ?? DEFAULT_SESSION_LEASE_TTL_MS;
  const maxWaitMs = options.maxWaitMs ?? 300_000;
  const maxTurnsPerTenant = options.maxTurnsPerTenant ?? 8;
  const metrics = createAgentMetrics();
  const operatorToken = options.operatorToken ?? (() => readOperatorToken(config.engramHome));
  // Series labelled with tenant ids live in their own registry, served only to the operator's token.
  const tenantRegistry = new Registry();
  const tenantTokens = new Counter({
    name: 'engram_tenant_turn_tokens_total',
    help: 'Tokens of served foreground turns, per tenant and token type',
    labelNames: ['tenant', 'type'] as const,
    registers: [tenantRegistry],
  });
  const ledgerGauge = new Gauge({
    name: 'engram_tenant_tokens',
    help: 'Per-tenant cost ledger from the queue engine: tokens per job kind (turn, extract, recall, session_memory, dream) and type',
    labelNames: ['tenant', 'kind', 'type'] as const,
    registers: [tenantRegistry],
  });
  const sessionConflicts = new Counter({
    name: 'engram_session_conflicts_total',
    help: 'Turns refused with 409 because another turn of the session was running',
    registers: [metrics.registry],
  });
  const running = new Map<Promise<unknown>, AbortController>();
  let draining = false;

  const stateStore = () => {
    if (!runtime.memory)
      throw new HttpError(
        503,
        'QUEUE_DISABLED',
        'Memory is disabled; the server needs the queue engine for session leases.',
      );
    return runtime.memory.engine.state;
  };

  const deps = (tenant: Tenant) => ({
    ...runtime,
    // The tenant's own ENGRAM_HOME area: memory, transcripts, session memory, tool results. Its $HOME is the
    // same area, so the operator's ~/.claude/CLAUDE.md never enters a tenant's context.
    config: {
      ...config,
      engramHome: tenant.home,
      homeDir: tenant.home,
      memoryDirOverride: undefined,
      workspaceRoot: tenant.workspace,
    },
  });

  async function sessionOf(c: Context<Env>): Promise<SessionRecord> {
    const parsed = parseSessionId(c.req.param('id') ?? '');
    if (!parsed.ok) throw new HttpError(400, 'INVALID_SESSION_ID', parsed.message);
    const record = await readSessionRecord(c.get('tenant'), parsed.id);
    if (!record) throw new HttpError(404, 'SESSION_NOT_FOUND', `No session ${parsed.id} for this API key.`);
    return record;
  }

  async function tenantCwd(tenant: Tenant, cwd: string): Promise<string> {
    const real = await resolveTenantCwd(tenant, cwd);
    if (!real) {
      throw new HttpError(
        403,
        'CWD_OUTSIDE_WORKSPACE',
        `cwd ${cwd} is not an existing directory inside this tenant's workspace ${tenant.workspace}.`,
      );
    }
    return real;
  }

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
    if (e.code === 'STATE_STORE_UNAVAILABLE' || e.retryable) {
      return c.json(errorBody(e.code ?? 'UNAVAILABLE', e.message), 503);
    }
    return c.json(errorBody(e.code ?? 'INTERNAL', e.message), 500);
  });
  app.notFound((c) => c.json(errorBody('NOT_FOUND', `No route ${c.req.method} ${c.req.path}.`), 404));

  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/readyz', async (c) => {
    if (draining) return c.json({ ready: false, reason: 'draining' }, 503);
    try {
      await stateStore().ready();
      await stateStore().ping();
      return c.json({ ready: true, telemetry: telemetryReport(activeTelemetry().settings) });
    } catch (error) {
      return c.json({ ready: false, reason: (error as Error).message }, 503);
    }
  });
  app.get('/openapi.json', (c) => c.json(openApiDocument()));
  app.get('/metrics', async (c) => {
    c.header('content-type', metrics.registry.contentType);
    const expected = await operatorToken().catch(() => undefined);
    const given = /^Bearer[ ]+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1];
    if (!expected || !given || !sameSecret(given, expected)) return c.body(await metrics.registry.metrics());
    try {
      for (const t of await tenants.list()) {
        for (const [kind, tokens] of Object.entries(await readCostLedger(stateStore(), t.id))) {
          for (const [type, n] of Object.entries(tokens)) ledgerGauge.set({ tenant: t.id, kind, type }, n);
        }
      }
    } catch {
      // The ledger is best effort on a scrape; the process metrics still answer.
    }
    return c.body(`${await metrics.registry.metrics()}${await tenantRegistry.metrics()}`);
  });

  // Everything below needs a tenant's key.
  const authenticateWith =
    (options: { teamSync?: boolean }) => async (c: Context<Env>, next: () => Promise<void>) => {
      const tenant = await tenants.authenticate(c.req.header('authorization'), options);
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
  const authenticate = authenticateWith({});

  // Memory Stores: before the generic /v1 middleware, since the SDK authenticates with `x-api-key` and reads
  // errors in Anthropic's envelope; the handler enforces its own body limits.
  const memoryStores = options.memoryStores;
  if (memoryStores) {
    const serveStores = async (c: Context<Env>) => {
      const apiKey = c.req.header('x-api-key');
      const bearer = c.req.header('authorization');
      const tenant = bearer
        ? await tenants.authenticate(bearer)
        : apiKey
          ? await tenants.authenticateKey(apiKey)
          : null;
      if (!tenant)
        return c.json(
          {
            type: 'error',
            error: {
              type: 'authentication_error',
              message:
                'Send a tenant API key as `x-api-key` or `Authorization: Bearer` (from `engram tenants add`).',
            },
          },
          401,
        );
      // Stores are kept under the tenant's team scope, like its team repositories: a revoked name added again
      // as a new tenant does not see the old tenant's stores unless it took over its memory.
      return memoryStores(c.req.raw, {
        tenant: tenant.teamScope,
        actor: { type: 'api_actor', api_key_id: `apikey_${tenant.id}` },
      });
    };
    app.all('/v1/memory_stores', serveStores);
    app.all('/v1/memory_stores/*', serveStores);
  }
  const limit = bodyLimit({
    maxSize: maxBodyBytes,
    onError: (c) =>
      c.json(errorBody('BODY_TOO_LARGE', `The request body exceeds ${maxBodyBytes} bytes.`), 413),
  });
  app.use('/v1/*', authenticate, limit);

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

  app.post('/v1/sessions', async (c) => {
    if (draining) throw new HttpError(503, 'DRAINING', 'This replica is shutting down; retry on another.');
    const tenant = c.get('tenant');
    const body = await readJson(c, createSessionBody);
    const cwd = await tenantCwd(tenant, body.cwd);
    const record = await createSessionRecord(tenant, cwd);
    return c.json({ id: record.id, cwd: record.cwd, createdAt: record.createdAt }, 201);
  });

  app.get('/v1/sessions/:id', async (c) => {
    const record = await sessionOf(c);
    const lease = await stateStore()
      .getLease(sessionLeaseKey({ tenant: record.tenant, sessionId: record.id }))
      .catch(() => undefined);
    return c.json({ id: record.id, cwd: record.cwd, createdAt: record.createdAt, busy: lease !== undefined });
  });

  app.get('/v1/sessions/:id/memory', async (c) => {
    const record = await sessionOf(c);
    const state = new SessionState(stateStore(), {
      tenant: record.tenant,
      transcriptDir: sanitizePath(record.cwd),
      sessionId: record.id,
    });
    const [receipts, cursor] = await Promise.all([state.extractReceipts(), state.extractCursor()]);
    return c.json({ id: record.id, receipts, extractCursor: cursor ?? null });
  });

  app.get('/v1/memory', async (c) => {
    const tenant = c.get('tenant');
    const cwdParam = c.req.query('cwd');
    if (!cwdParam)
      throw new HttpError(400, 'INVALID_REQUEST', 'Pass the project directory as ?cwd=/abs/path.');
    const cwd = await tenantCwd(tenant, cwdParam);
    const paths = await resolveEngramPaths({ engramHome: tenant.home, cwd });
    const { memories, problems } = await listMemories(paths.memoryDir);
    return c.json({
      memories: memories.map(({ path: _abs, ...m }) => m),
      // The same list `engram memory list --json` prints, without the absolute paths of the tenant's area.
      problems: problems.map(({ filePath: _abs, ...p }) => p),
    });
  });

  app.get('/v1/usage', async (c) => {
    const tenant = c.get('tenant');
    return c.json({ tenant: tenant.id, kinds: await readCostLedger(stateStore(), tenant.id) });
  });

  app.post('/v1/sessions/:id/turns', async (c) => {
    if (draining) throw new HttpError(503, 'DRAINING', 'This replica is shutting down; retry on another.');
    const tenant = c.get('tenant');
    const record = await sessionOf(c);
    const body = await readJson(c, turnBody);
    const unknown = (body.allowedTools ?? []).filter((t) => !(SERVED_TOOLS as readonly string[]).includes(t));
    if (unknown.length > 0) {
      throw new HttpError(400, 'INVALID_REQUEST', `Unknown tool(s) in allowedTools: ${unknown.join(', ')}.`);
    }
    const cwd = await tenantCwd(tenant, record.cwd);
    const controller = new AbortController();
    // A queue engine restarted under this replica (`engram dev` again, a Redis failover) is back within the
    // producer connection's reconnect backoff (≤2 s): the turn waits that out instead of answering 503.
    await stateStore().ready({ waitMs: STATE_STORE_RECONNECT_WAIT_MS });
    const slot = await acquireTurnSlot(stateStore(), tenant.id, maxTurnsPerTenant, leaseTtlMs);
    if (!slot) {
      throw new HttpError(
        429,
        'TENANT_TURN_LIMIT',
        `Tenant ${tenant.id} already runs ${maxTurnsPerTenant} turns at once (ENGRAM_SERVE_MAX_TURNS_PER_TENANT); retry when one ends.`,
        { limit: maxTurnsPerTenant, setting: 'ENGRAM_SERVE_MAX_TURNS_PER_TENANT' },
        1,
      );
    }
    let lease: SessionLease;
    try {
      lease = await acquireSessionLease(
        stateStore(),
        { tenant: tenant.id, sessionId: record.id },
        {
          ttlMs: leaseTtlMs,
          waitMs: waitMsOf(body, c.req.header('prefer'), maxWaitMs),
          signal: controller.signal,
        },
      );
    } catch (error) {
      await slot.release();
      if (error instanceof SessionBusyError) {
        sessionConflicts.inc();
        throw new HttpError(409, error.code, error.message);
      }
      throw error;
    }
    const authorization = c.req.header('authorization');
    const signal = AbortSignal.any([controller.signal, lease.signal]);
    const events: TurnStreamEvent[] = [];
    let push: ((e: TurnStreamEvent) => void) | undefined;
    const emit = (e: TurnStreamEvent) => (push ? push(e) : events.push(e));
    const streaming = (c.req.header('accept') ?? '').includes('text/event-stream');

    const turn = (async (): Promise<TurnResult> => {
      // The cost record is written alongside the lease release (neither needs the other), not before `done`.
      let costRecorded: Promise<unknown> = Promise.resolve();
      try {
        const [session, workspaces] = await Promise.all([
          AgentSession.open(deps(tenant), { cwd, sessionId: record.id, tenant: tenant.id }),
          tenants.workspaces(),
        ]);
        emit({ event: 'turn.started', data: { sessionId: record.id, resumed: session.resumed } });
        const allowedTools = effectiveTools(tenant.allowedTools, body.allowedTools);
        const others = workspaces.filter((t) => t.id !== tenant.id).map((t) => t.workspace);
        const served = await sandboxServedBash({
          tenant,
          allowedTools,
          hidden: [config.engramHome, ...others],
          canUseTool: servedTurnPolicy({ tenant, paths: session.paths, allowedTools }),
        });
        const result = await session.runTurn(body.prompt, {
          canUseTool: served.canUseTool,
          wrapTools: served.wrapTools,
          signal,
          // Before every append (each model reply, each tool result): still this session's writer, and the
          // tenant's key still valid — a revocation stops a running turn at its next step. One stat once warm.
          fence: async () => {
            await lease.assertHeld();
            if (!(await tenants.authenticate(authorization))) {
              const revoked = new TenantRevokedError(tenant.id);
              controller.abort(revoked);
              throw revoked;
            }
          },
          // Token deltas are for the live stream only; the JSON answer keeps its per-block events.
          ...(streaming
            ? {
                onTextDelta: (d: { turn: number; index: number; text: string }) =>
                  emit({ event: 'text_delta', data: d }),
              }
            : {}),
          onEntry: (entry: ChainEntry) => {
            for (const e of turnEventsOf(entry)) emit(e);
          },
        });
        metrics.recordTurn(result);
        const usage = result.usage;
        tenantTokens.inc({ tenant: tenant.id, type: 'input' }, usage.inputTokens);
        tenantTokens.inc({ tenant: tenant.id, type: 'output' }, usage.outputTokens);
        tenantTokens.inc({ tenant: tenant.id, type: 'cache_read' }, usage.cacheReadInputTokens);
        tenantTokens.inc({ tenant: tenant.id, type: 'cache_write' }, usage.cacheCreationInputTokens);
        costRecorded = recordCost(stateStore(), tenant.id, 'turn', {
          inputTokens: usage.inputTokens,
          outputTokens: usage.outputTokens,
          cacheReadInputTokens: usage.cacheReadInputTokens,
          cacheCreationInputTokens: usage.cacheCreationInputTokens,
        }).catch(() => undefined);
        emit({ event: 'recall', data: result.memory.recall });
        emit({
          event: 'memory',
          data: {
            extract: result.memory.extract,
            dream: result.memory.dream,
            sessionMemoryUpdates: result.memory.sessionMemoryUpdates,
          },
        });
        emit({
          event: 'done',
          data: {
            sessionId: result.sessionId,
            answer: result.answer,
            endReason: result.endReason,
            turns: result.turns,
            deniedCalls: result.deniedCalls,
            usage: result.usage,
          },
        });
        return result;
      } catch (error) {
        metrics.turns.inc({ outcome: 'error' });
        throw error;
      } finally {
        await Promise.all([costRecorded, lease.release(), slot.release()]);
      }
    })();
    running.set(turn, controller);
    turn.then(
      () => running.delete(turn),
      () => running.delete(turn),
    );

    const describeError = (error: unknown) => {
      const e = error as Error & { code?: string };
      if (error instanceof SessionLeaseLostError)
        return { status: 409 as const, code: e.code!, message: e.message };
      if (error instanceof TenantRevokedError)
        return { status: 403 as const, code: e.code!, message: e.message };
      // An outage of the queue engine mid-turn is retryable, as it is before the turn starts (app.onError).
      if (e.code === 'STATE_STORE_UNAVAILABLE' || (e as { retryable?: boolean }).retryable === true)
        return { status: 503 as const, code: e.code ?? 'UNAVAILABLE', message: e.message };
      return { status: 500 as const, code: e.code ?? 'TURN_FAILED', message: e.message };
    };

    if (streaming) {
      return streamSSE(c, async (stream) => {
        let id = 0;
        let chain = Promise.resolve();
        const write = (e: TurnStreamEvent) => {
          chain = chain.then(() =>
            stream
              .writeSSE({ event: e.event, data: JSON.stringify(e.data), id: String(++id) })
              .catch(() => {}),
          );
        };
        for (const e of events.splice(0)) write(e);
        push = write;
        try {
          await turn;
        } catch (error) {
          const { code, message } = describeError(error);
          write({ event: 'error', data: { code, message } });
        }
        await chain;
      });
    }
    try {
      const result = await turn;
      return c.json({
        sessionId: result.sessionId,
        answer: result.answer,
        endReason: result.endReason,
        turns: result.turns,
        deniedCalls: result.deniedCalls,
        usage: result.usage,
        memory: result.memory,
        events: events.filter((e) => e.event !== 'done'),
      });
    } catch (error) {
      const { status, code, message } = describeError(error);
      return c.json(errorBody(code, message), status);
    }
  });

  for (const route of options.routes ?? []) {
    app.on(
      route.method,
      route.path,
      authenticateWith({ teamSync: route.acceptsTeamSyncKey === true }),
      async (c) => {
        const { incoming, outgoing } = c.env;
        await route.handler(incoming, outgoing, { tenant: c.get('tenant'), url: new URL(c.req.url) });
        return RESPONSE_ALREADY_SENT;
      },
    );
  }

  return {
    app,
    get inFlight() {
      return running.size;
    },
    async drain(deadlineMs: number) {
      draining = true;
      const turns = [...running.keys()];
      const settled = Promise.allSettled(turns);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        settled.then(() => false),
        new Promise<boolean>((r) => {
          timer = setTimeout(() => r(true), deadlineMs);
        }),
      ]);
      clearTimeout(timer);
      const aborted = timedOut ? running.size : 0;
      if (timedOut) for (const controller of running.values()) controller.abort(new Error('server draining'));
      await settled;
      return { finished: turns.length - aborted, aborted };
    },
    close: () => runtime.close(),
    ready: async () => stateStore().ready(),
  };
}
