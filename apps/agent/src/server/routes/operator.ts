import { readCostLedger } from '@engram/queue/state/cost-ledger';
import { telemetryReport } from '@engram/telemetry/settings';
import { activeTelemetry } from '@engram/telemetry/setup';
import { sameSecret } from '@engram/tenants/operator-token';
import type { Hono } from 'hono';
import { Counter, Gauge, Registry } from 'prom-client';
import type { ServerContext } from '../context.js';
import type { Env } from '../http.js';
import { openApiDocument } from '../openapi.js';

// The routes that need no tenant key: liveness, readiness, the OpenAPI document, and /metrics — whose
// per-tenant series (tenant ids, their usage) are served only to a scrape bearing the operator's token.

/** Series labelled with tenant ids, in their own registry so the public scrape never carries them. */
export interface TenantMetrics {
  readonly registry: Registry;
  readonly turnTokens: Counter<'tenant' | 'type'>;
  readonly ledger: Gauge<'tenant' | 'kind' | 'type'>;
}

export function createTenantMetrics(): TenantMetrics {
  const registry = new Registry();
  return {
    registry,
    turnTokens: new Counter({
      name: 'engram_tenant_turn_tokens_total',
      help: 'Tokens of served foreground turns, per tenant and token type',
      labelNames: ['tenant', 'type'] as const,
      registers: [registry],
    }),
    ledger: new Gauge({
      name: 'engram_tenant_tokens',
      help: 'Per-tenant cost ledger from the queue engine: tokens per job kind (turn, extract, recall, session_memory, dream) and type',
      labelNames: ['tenant', 'kind', 'type'] as const,
      registers: [registry],
    }),
  };
}

export function mountOperatorRoutes(
  app: Hono<Env>,
  ctx: ServerContext,
  opts: { tenantMetrics: TenantMetrics; operatorToken: () => Promise<string | undefined> },
): void {
  const { metrics, tenants } = ctx;
  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/readyz', async (c) => {
    if (ctx.isDraining()) return c.json({ ready: false, reason: 'draining' }, 503);
    try {
      await ctx.stateStore().ready();
      await ctx.stateStore().ping();
      return c.json({ ready: true, telemetry: telemetryReport(activeTelemetry().settings) });
    } catch (error) {
      return c.json({ ready: false, reason: (error as Error).message }, 503);
    }
  });
  app.get('/openapi.json', (c) => c.json(openApiDocument()));
  app.get('/metrics', async (c) => {
    c.header('content-type', metrics.registry.contentType);
    const expected = await opts.operatorToken().catch(() => undefined);
    const given = /^Bearer[ ]+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1];
    if (!expected || !given || !sameSecret(given, expected)) return c.body(await metrics.registry.metrics());
    try {
      for (const t of await tenants.list()) {
        for (const [kind, tokens] of Object.entries(await readCostLedger(ctx.stateStore(), t.id))) {
          for (const [type, n] of Object.entries(tokens))
            opts.tenantMetrics.ledger.set({ tenant: t.id, kind, type }, n);
        }
      }
    } catch {
      // The ledger is best effort on a scrape; the process metrics still answer.
    }
    return c.body(`${await metrics.registry.metrics()}${await opts.tenantMetrics.registry.metrics()}`);
  });
}
