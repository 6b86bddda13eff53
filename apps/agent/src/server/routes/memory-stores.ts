import { JOB_AUTHOR_HEADER, memoryStoreActor } from '@engram/team-memory/memory-stores/job-author';
import type { TenantStore } from '@engram/tenants/tenant-store';
import { Hono } from 'hono';
import type { Env } from '../http.js';

// The Memory Stores API (`/v1/memory_stores…`, packages/team-memory/src/memory-stores) as a sub-app, mounted
// before the generic /v1 middleware: the SDK authenticates with `x-api-key` (or `Authorization: Bearer`) and
// reads errors in Anthropic's envelope; the handler enforces its own body limits.

export type MemoryStoresHandler = (
  req: Request,
  ctx: { tenant: string; actor: { type: 'api_actor'; api_key_id: string; job?: string } },
) => Promise<Response>;

export function memoryStoresApp(tenants: TenantStore, handler: MemoryStoresHandler): Hono<Env> {
  const app = new Hono<Env>();
  app.all('*', async (c) => {
    const apiKey = c.req.header('x-api-key');
    const bearer = c.req.header('authorization');
    // The tenant's team sync credential (the workers' key for its team memory) is accepted too: a store can
    // back the tenant's team directory, and the workers sync it.
    const tenant = bearer
      ? await tenants.authenticate(bearer, { teamSync: true })
      : apiKey
        ? await tenants.authenticateKey(apiKey, { teamSync: true })
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
    // Stores are kept under the tenant's team scope, like its team repositories: a revoked name added again as
    // a new tenant does not see the old tenant's stores unless it took over its memory.
    // `x-engram-job` names the worker job a write is made for (extraction, consolidation): it can only annotate
    // the authenticated tenant's own actor, never name another key or tenant.
    const actor = memoryStoreActor(tenant.id, c.req.header(JOB_AUTHOR_HEADER));
    if (!actor.ok)
      return c.json({ type: 'error', error: { type: 'invalid_request_error', message: actor.message } }, 400);
    return handler(c.req.raw, { tenant: tenant.teamScope, actor: actor.actor });
  });
  return app;
}
