import type { StateStore } from '@engram/queue/state/state-store';
import type { Tenant, TenantStore } from '@engram/tenants/tenant-store';
import type { Logger } from '@engram/worker-service/logger';
import type { Context } from 'hono';
import type { AgentConfig } from '../config.js';
import type { AgentMetrics } from '../metrics.js';
import type { AgentRuntime } from '../runtime.js';
import type { Env } from './http.js';
import type { SessionRecord } from './session-records.js';

/**
 * What `createHostedApp` composes and every route module reads: the configuration, the tenants, the runtime,
 * the metrics, the logger, the queue engine's state store, whether the replica is draining, and the two lookups every
 * session route starts with. Built once per app (hosted-app.ts); route modules get it as their one argument.
 */
export interface ServerContext {
  readonly config: AgentConfig;
  readonly tenants: TenantStore;
  readonly runtime: AgentRuntime;
  readonly metrics: AgentMetrics;
  /** JSON log lines (and OTel log records when telemetry is on), each with the request's trace and span ids. */
  readonly logger: Logger;
  /** The queue engine's state store; 503 QUEUE_DISABLED when memory (and so the engine) is off. */
  stateStore(): StateStore;
  isDraining(): boolean;
  /** The session the `:id` path parameter names, owned by the request's tenant (400 / 404 otherwise). */
  sessionOf(c: Context<Env>): Promise<SessionRecord>;
  /** `cwd` resolved inside the tenant's workspace (403 CWD_OUTSIDE_WORKSPACE otherwise). */
  tenantCwd(tenant: Tenant, cwd: string): Promise<string>;
}
