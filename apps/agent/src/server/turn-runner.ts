import { randomUUID } from 'node:crypto';
import { prepareUnattended } from '@engram/agent-runtime/sandbox/unattended';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { AgentSession, type TurnResult } from '@engram/agent-session/agent-session';
import { EngramError } from '@engram/errors/engram-error';
import { recordCost } from '@engram/queue/state/cost-ledger';
import {
  acquireSessionLease,
  SessionBusyError,
  type SessionLease,
  SessionLeaseLostError,
} from '@engram/queue/state/session-lease';
import type { StateStore } from '@engram/queue/state/state-store';
import { SERVED_TOOLS, type Tenant } from '@engram/tenants/tenant-store';
import type { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { Counter } from 'prom-client';
import type { z } from 'zod';
import { turnBody } from './api-schemas.js';
import type { ServerContext } from './context.js';
import { type Env, errorBody, HttpError, readJson } from './http.js';
import type { TenantMetrics } from './routes/operator.js';
import { effectiveTools, servedBoundary, servedTurnPolicy } from './served-policy.js';
import { type TurnStreamEvent, turnEventsOf } from './turn-events.js';

// `POST /v1/sessions/:id/turns`: one served turn. In order: the tenant's turn slot (a per-tenant limit across
// replicas), the session's lease (one writer per transcript), the session opened in the tenant's own area, the
// served tool policy and sandbox, the turn itself with a fence before every append (still the writer, the key
// still valid), then usage, cost and the answer — as JSON or as a live SSE stream.

/** A turn stopped because its tenant's key was revoked (or expired after a rotation) while it ran. */
export class TenantRevokedError extends EngramError {
  constructor(tenant: string) {
    super(
      'TENANT_REVOKED',
      `Tenant ${tenant}'s API key was revoked during this turn; the turn stopped at its next step.`,
      { retryable: false },
    );
  }
}

/** How long a turn waits for a lost state-store connection to come back before answering 503. */
const STATE_STORE_RECONNECT_WAIT_MS = 3_000;

export interface TurnRunnerOptions {
  /** Session lease TTL: how long a dead replica blocks its session. */
  leaseTtlMs: number;
  /** Longest a request may ask to wait for a busy session. */
  maxWaitMs: number;
  /** Turns one tenant may run at once, across every replica sharing the queue engine. */
  maxTurnsPerTenant: number;
  tenantMetrics: TenantMetrics;
}

export interface TurnRunner {
  readonly inFlight: number;
  /** Lets in-flight turns finish until `deadlineMs`, then aborts them; leases are released either way. */
  drain(deadlineMs: number): Promise<{ finished: number; aborted: number }>;
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

/** The answer of a finished turn: the stream's `done` event, and the head of the JSON response. */
function answerOf(result: TurnResult) {
  return {
    sessionId: result.sessionId,
    answer: result.answer,
    endReason: result.endReason,
    turns: result.turns,
    deniedCalls: result.deniedCalls,
    usage: result.usage,
  };
}

/** How a failed turn answers: its status, code and message (as JSON, or as the stream's `error` event). */
function describeError(error: unknown): { status: 409 | 403 | 503 | 500; code: string; message: string } {
  const e = error as Error & { code?: string };
  if (error instanceof SessionLeaseLostError) return { status: 409, code: error.code, message: e.message };
  if (error instanceof TenantRevokedError) return { status: 403, code: error.code, message: e.message };
  // An outage of the queue engine mid-turn is retryable, as it is before the turn starts (app.onError).
  if (e.code === 'STATE_STORE_UNAVAILABLE' || (error instanceof EngramError && error.retryable))
    return { status: 503, code: e.code ?? 'UNAVAILABLE', message: e.message };
  return { status: 500, code: e.code ?? 'TURN_FAILED', message: e.message };
}

export function mountTurnRoute(app: Hono<Env>, ctx: ServerContext, opts: TurnRunnerOptions): TurnRunner {
  const { config, tenants, metrics, logger } = ctx;
  const { leaseTtlMs, maxWaitMs, maxTurnsPerTenant } = opts;
  const tenantTokens = opts.tenantMetrics.turnTokens;
  const sessionConflicts = new Counter({
    name: 'engram_session_conflicts_total',
    help: 'Turns refused with 409 because another turn of the session was running',
    registers: [metrics.registry],
  });
  const running = new Map<Promise<unknown>, AbortController>();

  const deps = (tenant: Tenant) => ({
    ...ctx.runtime,
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

  app.post('/v1/sessions/:id/turns', async (c) => {
    if (ctx.isDraining())
      throw new HttpError(503, 'DRAINING', 'This replica is shutting down; retry on another.');
    const tenant = c.get('tenant');
    const record = await ctx.sessionOf(c);
    const body = await readJson(c, turnBody);
    const unknown = (body.allowedTools ?? []).filter((t) => !(SERVED_TOOLS as readonly string[]).includes(t));
    if (unknown.length > 0) {
      throw new HttpError(400, 'INVALID_REQUEST', `Unknown tool(s) in allowedTools: ${unknown.join(', ')}.`);
    }
    const cwd = await ctx.tenantCwd(tenant, record.cwd);
    const controller = new AbortController();
    const store = ctx.stateStore();
    // A queue engine restarted under this replica (`engram dev` again, a Redis failover) is back within the
    // producer connection's reconnect backoff (≤2 s): the turn waits that out instead of answering 503.
    await store.ready({ waitMs: STATE_STORE_RECONNECT_WAIT_MS });
    const slot = await acquireTurnSlot(store, tenant.id, maxTurnsPerTenant, leaseTtlMs);
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
        store,
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

    const started = performance.now();
    const turn = (async (): Promise<TurnResult> => {
      // The cost record is written alongside the lease release (neither needs the other), not before `done`.
      let costRecorded: Promise<unknown> = Promise.resolve();
      try {
        const session = await AgentSession.open(deps(tenant), {
          cwd,
          sessionId: record.id,
          tenant: tenant.id,
        });
        emit({ event: 'turn.started', data: { sessionId: record.id, resumed: session.resumed } });
        const allowedTools = effectiveTools(tenant.allowedTools, body.allowedTools);
        // The turn's boundary, stated here and prepared once (throws where ENGRAM_SANDBOX=require cannot hold).
        const boundary = await prepareUnattended(
          await servedBoundary({ tenant, allowedTools, memoryDir: session.paths.memoryDir }),
        );
        const result = await session.runTurn(body.prompt, {
          canUseTool: servedTurnPolicy({ tenant, paths: session.paths, allowedTools }),
          boundary,
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
        costRecorded = recordCost(store, tenant.id, 'turn', {
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
        emit({ event: 'done', data: answerOf(result) });
        // One line per turn, in the request's span (its trace and span ids): identifiers and counts only.
        logger.info(
          {
            tenant: tenant.id,
            sessionId: record.id,
            endReason: result.endReason,
            durationMs: Math.round(performance.now() - started),
            inputTokens: usage.inputTokens,
            outputTokens: usage.outputTokens,
          },
          'turn finished',
        );
        return result;
      } catch (error) {
        metrics.turns.inc({ outcome: 'error' });
        const { status, code, message } = describeError(error);
        logger[status >= 500 ? 'error' : 'warn'](
          { tenant: tenant.id, sessionId: record.id, status, code, err: message },
          'turn failed',
        );
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
        ...answerOf(result),
        memory: result.memory,
        events: events.filter((e) => e.event !== 'done'),
      });
    } catch (error) {
      const { status, code, message } = describeError(error);
      return c.json(errorBody(code, message), status);
    }
  });

  return {
    get inFlight() {
      return running.size;
    },
    async drain(deadlineMs: number) {
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
  };
}
