import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { LOG_LEVELS } from '@engram/config/env';
import { QueueNotConfiguredError } from '@engram/memory-client/memory-queue';
import {
  type EmbeddedPostgres,
  findRunningEmbeddedPostgres,
  startEmbeddedPostgres,
} from '@engram/queue/embedded-postgres';
import { createMemoryStoresHandler } from '@engram/team-memory/memory-stores/api';
import { MemoryStoresRepo } from '@engram/team-memory/memory-stores/repo';
import { openTeamMemoryService } from '@engram/team-memory/server/service';
import { ensureOperatorToken } from '@engram/tenants/operator-token';
import { TenantStore } from '@engram/tenants/tenant-store';
import { createLogger } from '@engram/worker-service/logger';
import { serve } from '@hono/node-server';
import { z } from 'zod';
import type { AgentConfig } from '../config.js';
import { createHostedApp, type ExtraRoute, type HostedApp } from '../server/hosted-app.js';
import { MCP_ROUTES } from '../server/mcp-route.js';
import { EXIT, type Output } from './output.js';
import { waitForSignal } from './workers.js';

// `engram serve`: the hosted HTTP API (apps/agent/src/server/hosted-app.ts; docs/hosted-api.md). Replicas
// behind a load balancer share ENGRAM_HOME (tenants, their memory and transcripts) and the queue engine (the
// per-session lease that lets any replica serve any session, one at a time).

const serveEnv = z.object({
  ENGRAM_SERVE_MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(1024 * 1024),
  ENGRAM_SESSION_LEASE_TTL_MS: z.coerce.number().int().min(1_000).default(30_000),
  ENGRAM_SERVE_DRAIN_TIMEOUT_MS: z.coerce.number().int().min(0).default(30_000),
  ENGRAM_DASHBOARD_TOKEN: z.string().min(16).optional(),
  ENGRAM_TEAM_MEMORY_MAX_REPOS: z.coerce.number().int().positive().default(100),
  ENGRAM_TEAM_MEMORY_MAX_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(50 * 1024 * 1024),
  ENGRAM_SERVE_MAX_TURNS_PER_TENANT: z.coerce.number().int().positive().max(1_000).default(8),
  /** A service logs its turns (`info`), where the CLI's default is `warn`. */
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  /** PostgreSQL schema of the team memory store (tests isolate runs with it). */
  ENGRAM_TEAM_MEMORY_SCHEMA: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/)
    .optional(),
});

export interface ServeOptions {
  port: number;
  host: string;
  /** Authenticated routes of other modules (e.g. team-memory sync), mounted next to /v1. */
  routes?: readonly ExtraRoute[];
}

export interface RunningServer {
  hosted: HostedApp;
  server: Server;
  url: string;
  /** The file with the generated token per-tenant /metrics need (undefined when ENGRAM_DASHBOARD_TOKEN is set). */
  metricsTokenFile: string | undefined;
  /** Graceful stop: not ready, no new turns, in-flight turns finish (or abort at the deadline), leases freed. */
  stop(): Promise<{ finished: number; aborted: number }>;
}

export async function startServer(
  config: AgentConfig,
  opts: ServeOptions,
  env: NodeJS.ProcessEnv = process.env,
): Promise<RunningServer> {
  const settings = serveEnv.parse(env);
  const logger = createLogger(settings.LOG_LEVEL, { service: 'engram-serve' });
  // Team memory sync (docs/team-memory.md) and the Memory Stores API (docs/memory-stores.md) are served next to
  // /v1 on the same tenants and keys, each tenant its own organisation. Without a configured database, one
  // embedded PostgreSQL under ENGRAM_HOME holds both, so the routes are always there (one replica only: replicas
  // sharing a home must set ENGRAM_TEAM_MEMORY_DATABASE_URL).
  let embedded: EmbeddedPostgres | undefined;
  let databaseUrl = config.teamMemoryDatabaseUrl;
  if (!databaseUrl) {
    const dataDir = join(config.engramHome, 'team-memory', 'postgres');
    // Another replica on this home may have started it already (or be starting it right now): share that one.
    const running = await findRunningEmbeddedPostgres(dataDir);
    if (running) databaseUrl = running.url;
    else {
      try {
        embedded = await startEmbeddedPostgres({ dataDir });
        databaseUrl = embedded.url;
      } catch (error) {
        const raced = await findRunningEmbeddedPostgres(dataDir);
        if (!raced) throw error;
        databaseUrl = raced.url;
      }
    }
  }
  const schemaOpt = settings.ENGRAM_TEAM_MEMORY_SCHEMA ? { schema: settings.ENGRAM_TEAM_MEMORY_SCHEMA } : {};
  const team = await openTeamMemoryService({
    databaseUrl,
    ...schemaOpt,
    limits: {
      maxRepositoriesPerTenant: settings.ENGRAM_TEAM_MEMORY_MAX_REPOS,
      maxBytesPerTenant: settings.ENGRAM_TEAM_MEMORY_MAX_BYTES,
    },
  });
  const storesRepo = await MemoryStoresRepo.open({ connectionString: databaseUrl, ...schemaOpt });
  const memoryStores = createMemoryStoresHandler(storesRepo);
  // The team routes also accept a tenant's team sync credential: what the workers sync its team/ with.
  // Each route sees the tenant's team scope as its id: the repository key is (scope, repo), derived from the
  // authenticated credential alone, so a key of tenant A can only ever name A's repositories.
  const teamRoutes = (team.routes as readonly ExtraRoute[]).map(
    (r): ExtraRoute => ({
      ...r,
      acceptsTeamSyncKey: true,
      handler: (req, res, ctx) =>
        r.handler(req, res, { ...ctx, tenant: { ...ctx.tenant, id: ctx.tenant.teamScope } }),
    }),
  );
  // Team sync keys kept in tenant areas by earlier versions move to the operator-only secrets directory.
  await new TenantStore(config.engramHome).migrateSecrets();
  // Per-tenant series of /metrics need the operator's token: the configured one, or one generated into
  // ENGRAM_HOME (the workers' dashboard uses the same file).
  const operator = settings.ENGRAM_DASHBOARD_TOKEN ? undefined : await ensureOperatorToken(config.engramHome);
  const routes = [...(opts.routes ?? []), ...MCP_ROUTES, ...teamRoutes];
  const hosted = createHostedApp({
    config,
    maxBodyBytes: settings.ENGRAM_SERVE_MAX_BODY_BYTES,
    leaseTtlMs: settings.ENGRAM_SESSION_LEASE_TTL_MS,
    maxTurnsPerTenant: settings.ENGRAM_SERVE_MAX_TURNS_PER_TENANT,
    operatorToken: async () => settings.ENGRAM_DASHBOARD_TOKEN ?? operator?.token,
    ...(routes.length > 0 ? { routes } : {}),
    memoryStores,
    logger,
  });
  // Connect to the queue engine before taking traffic (it holds the session leases).
  await hosted.ready();
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: hosted.app.fetch, port: opts.port, hostname: opts.host }, () =>
      resolve(s as Server),
    ) as Server;
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`;
  logger.info({ url, teamMemory: embedded ? 'embedded' : 'configured' }, 'listening');
  let stopping: Promise<{ finished: number; aborted: number }> | undefined;
  return {
    hosted,
    server,
    metricsTokenFile: operator?.path,
    url,
    stop: () => {
      stopping ??= (async () => {
        const closed = new Promise<void>((r) => server.close(() => r()));
        logger.info(
          { inFlight: hosted.inFlight, deadlineMs: settings.ENGRAM_SERVE_DRAIN_TIMEOUT_MS },
          'draining',
        );
        const outcome = await hosted.drain(settings.ENGRAM_SERVE_DRAIN_TIMEOUT_MS);
        server.closeIdleConnections?.();
        await closed;
        await hosted.close();
        await team.close();
        await storesRepo.close();
        await embedded?.stop();
        logger.info(outcome, 'stopped');
        return outcome;
      })();
      return stopping;
    },
  };
}

export async function serveCommand(config: AgentConfig, opts: ServeOptions, io: Output): Promise<number> {
  // A service that could queue no memory work would answer turns and keep their work only in outboxes.
  if (config.backend.implicit) {
    io.err(`engram serve: ${new QueueNotConfiguredError(config.engramHome).message}`);
    return EXIT.usage;
  }
  const running = await startServer(config, opts);
  io.err(
    `engram serve: listening on ${running.url} (POST /v1/sessions, POST /v1/sessions/{id}/turns; /openapi.json)`,
  );
  io.err(
    `engram serve: /metrics shows per-tenant series only with \`Authorization: Bearer <token>\`, the token ${running.metricsTokenFile ? `in ${running.metricsTokenFile}` : 'in ENGRAM_DASHBOARD_TOKEN'}`,
  );
  const signal = await waitForSignal();
  io.err(`engram serve: ${signal}, draining in-flight turns`);
  const { finished, aborted } = await running.stop();
  io.err(`engram serve: stopped (${finished} turn(s) finished, ${aborted} aborted)`);
  return EXIT.ok;
}
