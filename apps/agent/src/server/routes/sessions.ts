import { listMemories } from '@engram/memory-core/memdir/memory-files';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import { readCostLedger } from '@engram/queue/state/cost-ledger';
import { sessionLeaseKey } from '@engram/queue/state/session-lease';
import { SessionState } from '@engram/queue/state/session-state';
import type { Hono } from 'hono';
import { createSessionBody } from '../api-schemas.js';
import type { ServerContext } from '../context.js';
import { type Env, HttpError, readJson } from '../http.js';
import { createSessionRecord } from '../session-records.js';

// The tenant's sessions and what its memory holds: create and read a session, a session's extraction
// receipts and cursor, the memory list of a project, the tenant's token usage. (Turns: turn-runner.ts.)

export function mountSessionRoutes(app: Hono<Env>, ctx: ServerContext): void {
  app.post('/v1/sessions', async (c) => {
    if (ctx.isDraining())
      throw new HttpError(503, 'DRAINING', 'This replica is shutting down; retry on another.');
    const tenant = c.get('tenant');
    const body = await readJson(c, createSessionBody);
    const cwd = await ctx.tenantCwd(tenant, body.cwd);
    const record = await createSessionRecord(tenant, cwd);
    return c.json({ id: record.id, cwd: record.cwd, createdAt: record.createdAt }, 201);
  });

  app.get('/v1/sessions/:id', async (c) => {
    const record = await ctx.sessionOf(c);
    const lease = await ctx
      .stateStore()
      .getLease(sessionLeaseKey({ tenant: record.tenant, sessionId: record.id }))
      .catch(() => undefined);
    return c.json({ id: record.id, cwd: record.cwd, createdAt: record.createdAt, busy: lease !== undefined });
  });

  app.get('/v1/sessions/:id/memory', async (c) => {
    const record = await ctx.sessionOf(c);
    const state = new SessionState(ctx.stateStore(), {
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
    const cwd = await ctx.tenantCwd(tenant, cwdParam);
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
    return c.json({ tenant: tenant.id, kinds: await readCostLedger(ctx.stateStore(), tenant.id) });
  });
}
