import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { type Authenticate, type RunningRouteServer, startRouteServer } from '../server/http-server.js';
import { quoteIdent } from '../server/migrations.js';
import { type TeamMemoryEvent, type TeamMemoryLimits, teamMemoryRoutes } from '../server/routes.js';
import { TeamMemoryStore } from '../server/store.js';

// A real team memory service for tests: the routes on a node:http server, entries in a fresh PostgreSQL
// schema, and bearer keys checked against a real table of hashed keys (the stand-in for the hosted API's
// tenants; the authenticate function is the seam).

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  ifMatch: string | undefined;
  ifNoneMatch: string | undefined;
  /** PUT only: the entry keys sent and the body's size. */
  keys?: string[];
  bodyBytes?: number;
  status?: number;
}

export interface TeamMemoryTestServer {
  url: string;
  store: TeamMemoryStore;
  pool: pg.Pool;
  schema: string;
  /** Creates an API key for `tenantId` and returns it (only its hash is stored). */
  issueKey(tenantId: string): Promise<string>;
  authenticate: Authenticate;
  requests: RecordedRequest[];
  events: TeamMemoryEvent[];
  close(): Promise<void>;
}

export async function startTeamMemoryTestServer(opts: {
  postgresUrl: string;
  limits?: Partial<TeamMemoryLimits>;
}): Promise<TeamMemoryTestServer> {
  const schema = `tm_${randomBytes(5).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: opts.postgresUrl, max: 10 });
  pool.on('error', () => {});
  const store = await TeamMemoryStore.open({ pool, schema });
  const s = quoteIdent(schema);
  await pool.query(`CREATE TABLE ${s}.api_keys (key_sha256 text PRIMARY KEY, tenant_id text NOT NULL)`);
  const sha = (key: string) => createHash('sha256').update(key, 'utf8').digest('hex');
  const authenticate: Authenticate = async (header) => {
    const match = /^Bearer ([A-Za-z0-9_-]{16,200})$/.exec(header ?? '');
    if (!match) return null;
    const { rows } = await pool.query<{ tenant_id: string }>(
      `SELECT tenant_id FROM ${s}.api_keys WHERE key_sha256 = $1`,
      [sha(match[1]!)],
    );
    return rows[0] ? { id: rows[0].tenant_id } : null;
  };
  const events: TeamMemoryEvent[] = [];
  const requests: RecordedRequest[] = [];
  const routes = teamMemoryRoutes({
    store,
    ...(opts.limits ? { limits: opts.limits } : {}),
    onEvent: (e) => events.push(e),
  }).map((route) => ({
    ...route,
    handler: async (
      req: Parameters<typeof route.handler>[0],
      res: Parameters<typeof route.handler>[1],
      ctx: Parameters<typeof route.handler>[2],
    ) => {
      const record: RecordedRequest = {
        method: route.method,
        path: ctx.url.pathname,
        query: Object.fromEntries(ctx.url.searchParams),
        ifMatch: req.headers['if-match'] as string | undefined,
        ifNoneMatch: req.headers['if-none-match'] as string | undefined,
      };
      requests.push(record);
      if (route.method === 'PUT') {
        // Tee the body: record what was sent, then hand the same bytes to the real handler.
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        const body = Buffer.concat(chunks);
        record.bodyBytes = body.length;
        try {
          record.keys = Object.keys((JSON.parse(body.toString('utf8')) as { entries: object }).entries ?? {});
        } catch {
          record.keys = [];
        }
        const { Readable } = await import('node:stream');
        const replay = Object.assign(Readable.from([body]), { headers: req.headers, method: req.method });
        await route.handler(replay as unknown as typeof req, res, ctx);
      } else {
        await route.handler(req, res, ctx);
      }
      record.status = res.statusCode;
    },
  }));
  const server: RunningRouteServer = await startRouteServer({ routes, authenticate });
  return {
    url: server.url,
    store,
    pool,
    schema,
    authenticate,
    requests,
    events,
    issueKey: async (tenantId) => {
      const key = `tmk_${randomBytes(24).toString('base64url')}`;
      await pool.query(`INSERT INTO ${s}.api_keys (key_sha256, tenant_id) VALUES ($1, $2)`, [
        sha(key),
        tenantId,
      ]);
      return key;
    },
    close: async () => {
      await server.close();
      await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`).catch(() => {});
      await store.close();
      await pool.end();
    },
  };
}
