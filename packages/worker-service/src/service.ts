import type { JobKind } from '@engram/queue/catalog';
import { inspectBackend, UnsafeBackendError } from '@engram/queue/diagnostics';
import { openQueueEngine, type QueueEngine } from '@engram/queue/engine';
import { RECONCILE_SCHEDULER_ID } from '@engram/queue/jobs/reconcile';
import { JobProducer } from '@engram/queue/producer';
import { readConsolidationState } from '@engram/queue/state/consolidation-lock';
import { OPERATOR_TENANT, recordCost, type UsageLike } from '@engram/queue/state/cost-ledger';
import { createJobWaker, createJobWorker, type JobHandler, type JobWaker } from '@engram/queue/worker';
import { activeTelemetry } from '@engram/telemetry/setup';
import { ensureOperatorToken } from '@engram/tenants/operator-token';
import type { WorkersConfig } from './config.js';
import { type RunningHttpServer, startHttpServer } from './http/server.js';
import { isModelConfigured } from './jobs/model-preflight.js';
import type { Logger } from './logger.js';
import { createWorkerMetrics, type WorkerMetrics } from './metrics.js';
import { operationsReport, recordWorkersModel } from './operations.js';

// The worker service: one BullMQ worker per job kind (so recall never waits behind a consolidation), plus the
// HTTP side (health, metrics, dashboard) and a shutdown that lets active jobs finish up to a deadline.

export type WorkerHandlers = { [K in JobKind]?: JobHandler<K> };

export interface HandlerDeps {
  config: WorkersConfig;
  engine: QueueEngine;
  metrics: WorkerMetrics;
  logger: Logger;
  /** Wakes a parked job when a writer lease is handed to it (FIFO per project). */
  waker?: JobWaker;
  /** The service's producer (the reconciliation job enqueues through it). */
  producer?: JobProducer;
  /** Registers a cleanup the service runs at stop, after its workers closed (e.g. a model client's threads). */
  onStop?: (cleanup: () => Promise<void>) => void;
}

export interface StartWorkerServiceOptions {
  config: WorkersConfig;
  logger: Logger;
  handlers: (deps: HandlerDeps) => WorkerHandlers;
  /** Serve /healthz, /readyz, /metrics, /dashboard. Default true. */
  http?: boolean;
}

type AnyWorker = ReturnType<typeof createJobWorker>;

export interface WorkerService {
  engine: QueueEngine;
  metrics: WorkerMetrics;
  http: RunningHttpServer | undefined;
  /**
   * How the dashboard, the memory browser and /metrics' per-tenant series are opened: the file holding the
   * token generated because none was configured, or undefined when ENGRAM_DASHBOARD_TOKEN / basic auth is set.
   */
  dashboardTokenFile: string | undefined;
  workers: Map<JobKind, AnyWorker>;
  stop(reason?: string): Promise<void>;
}

export async function startWorkerService(options: StartWorkerServiceOptions): Promise<WorkerService> {
  const { config, logger } = options;
  if (config.backend.kind === 'redis') {
    const report = await inspectBackend(config.backend);
    if (report.problems.length) throw new UnsafeBackendError(report);
    logger.info(
      { backend: 'redis', url: report.url, version: report.version, appendOnly: report.appendOnly },
      'queue backend ok',
    );
  } else {
    const report = await inspectBackend(config.backend);
    logger.info({ backend: config.backend.kind, url: report.url, version: report.version }, 'queue backend');
  }
  // Prepares the backend once at start (PostgreSQL: explicit migrations), then opens the engine.
  const engine = await openQueueEngine({
    config: config.backend,
    profile: 'worker',
    namespace: config.namespace,
    telemetry: activeTelemetry().bullmq,
  });
  // For `engram doctor`, which runs elsewhere and cannot see the workers' environment.
  await recordWorkersModel(engine.state, {
    configured: isModelConfigured(config.anthropic),
    startedAtMs: Date.now(),
    queues: [...config.queues],
  });
  const metrics = createWorkerMetrics();
  const waker = createJobWaker(engine);
  const producer = new JobProducer(engine);
  const cleanups: Array<() => Promise<void>> = [];
  const handlers = options.handlers({
    config,
    engine,
    metrics,
    logger,
    waker,
    producer,
    onStop: (cleanup) => cleanups.push(cleanup),
  });
  const workers = new Map<JobKind, AnyWorker>();

  for (const kind of config.queues) {
    const handler = handlers[kind] as JobHandler<JobKind> | undefined;
    if (!handler) {
      logger.warn({ queue: kind }, 'no handler for this queue in this build; not consuming it');
      continue;
    }
    const worker = createJobWorker(engine, kind, handler, {
      config: {
        ...(config.concurrency[kind] ? { concurrency: config.concurrency[kind] } : {}),
        ...(config.lockDurationMs ? { lockDurationMs: config.lockDurationMs } : {}),
        ...(config.stalledIntervalMs ? { stalledIntervalMs: config.stalledIntervalMs } : {}),
      },
      onCompleted: ({ job, durationMs, result }) => {
        metrics.jobs.inc({ queue: kind, outcome: 'completed' });
        // The per-tenant cost ledger: the tenant comes from the job's scope (set by the authenticated replica).
        const usage = (result as { usage?: UsageLike } | undefined)?.usage;
        if (usage) {
          const tenant = (job.data as { tenant?: string }).tenant ?? OPERATOR_TENANT;
          metrics.tenantForkTokens.inc({ tenant, queue: kind, type: 'input' }, usage.inputTokens);
          metrics.tenantForkTokens.inc({ tenant, queue: kind, type: 'output' }, usage.outputTokens);
          metrics.tenantForkTokens.inc(
            { tenant, queue: kind, type: 'cache_read' },
            usage.cacheReadInputTokens,
          );
          metrics.tenantForkTokens.inc(
            { tenant, queue: kind, type: 'cache_write' },
            usage.cacheCreationInputTokens,
          );
          void recordCost(engine.state, tenant, kind, usage).catch((error: Error) =>
            logger.warn({ queue: kind, jobId: job.id, err: error.message }, 'cost ledger not updated'),
          );
        }
        metrics.jobDuration.observe({ queue: kind, outcome: 'completed' }, durationMs / 1000);
        logger.info({ queue: kind, jobId: job.id, durationMs, ...jobContext(job.data) }, 'job completed');
      },
      onFailed: ({ job, durationMs, error, final }) => {
        const outcome = final ? 'failed' : 'retried';
        metrics.jobs.inc({ queue: kind, outcome });
        metrics.jobDuration.observe({ queue: kind, outcome }, durationMs / 1000);
        logger[final ? 'error' : 'warn'](
          {
            queue: kind,
            jobId: job?.id,
            attempt: job?.attemptsMade,
            err: error.message,
            ...jobContext(job?.data),
          },
          final ? 'job failed' : 'job attempt failed; will retry',
        );
      },
      onError: ({ error }) => logger.error({ queue: kind, err: error.message }, 'worker error'),
      onLockLost: ({ jobId }) => {
        metrics.lockLost.inc({ queue: kind });
        logger.warn({ queue: kind, jobId }, 'job lock lost; aborting this copy of the work');
      },
    });
    workers.set(kind, worker);
  }

  // One reconciliation sweep per interval for the whole fleet (a job scheduler: upserting it again from every
  // worker keeps one schedule, not one per worker).
  if (workers.has('reconcile')) {
    await producer
      .queue('reconcile')
      .upsertJobScheduler(
        RECONCILE_SCHEDULER_ID,
        { every: config.reconcileIntervalMs },
        { name: 'reconcile', data: {} },
      );
    logger.info({ everyMs: config.reconcileIntervalMs }, 'reconciliation scheduled');
  }

  let http: RunningHttpServer | undefined;
  let dashboardTokenFile: string | undefined;
  if (options.http !== false) {
    // Closed by default: with no token or credentials configured, one is generated into ENGRAM_HOME.
    let dashboard = config.dashboard;
    if (!dashboard.token && !dashboard.basicAuth) {
      const generated = await ensureOperatorToken(config.engramHome);
      dashboard = { ...dashboard, token: generated.token };
      dashboardTokenFile = generated.path;
      logger.info(
        { file: generated.path, created: generated.created },
        'dashboard token (ENGRAM_DASHBOARD_TOKEN unset): read it from the file',
      );
    }
    http = await startHttpServer({
      config: { ...config, dashboard },
      metrics,
      dashboardQueues: config.queues.map((kind) => producer.queue(kind)),
      operations: () => operationsReport({ engramHome: config.engramHome, state: engine.state }),
      consolidationRunning: async (projectDir) =>
        !!(await readConsolidationState(engine.state, projectDir)).running,
      checkReady: async () => {
        const details: Record<string, unknown> = {};
        let ok = true;
        try {
          await engine.state.ping();
          details.backend = 'ok';
        } catch (error) {
          ok = false;
          details.backend = (error as Error).message;
        }
        for (const [kind, worker] of workers) {
          const running = worker.isRunning() && !worker.isPaused();
          details[kind] = running ? 'fetching' : 'stopped';
          ok &&= running;
        }
        if (workers.size === 0) ok = false;
        return { ok, details };
      },
      sampleQueueDepths: async () => {
        for (const kind of config.queues) {
          const counts = await producer
            .queue(kind)
            .getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized');
          for (const [state, n] of Object.entries(counts)) metrics.queueDepth.set({ queue: kind, state }, n);
        }
      },
    });
    logger.info(
      { url: http.url, dashboard: config.dashboard.enabled ? `${http.url}/dashboard` : undefined },
      'http listening',
    );
  }

  let stopping: Promise<void> | undefined;
  const stop = (reason = 'stop'): Promise<void> => {
    stopping ??= (async () => {
      logger.info({ reason, deadlineMs: config.shutdownTimeoutMs }, 'shutting down: waiting for active jobs');
      let timer: NodeJS.Timeout | undefined;
      const graceful = Promise.all([...workers.values()].map((w) => w.close())).then(
        () => 'graceful' as const,
      );
      const deadline = new Promise<'deadline'>((resolve) => {
        timer = setTimeout(() => resolve('deadline'), config.shutdownTimeoutMs);
      });
      const how = await Promise.race([graceful, deadline]);
      clearTimeout(timer);
      if (how === 'deadline') {
        logger.warn(
          'shutdown deadline reached; force-closing workers (their jobs will be retried after the stall)',
        );
        await Promise.allSettled([...workers.values()].map((w) => w.close(true)));
      }
      await Promise.allSettled(cleanups.map((cleanup) => cleanup()));
      await http?.close();
      await waker.close();
      await producer.close();
      await engine.close();
      logger.info({ how }, 'stopped');
    })();
    return stopping;
  };

  return { engine, metrics, http, dashboardTokenFile, workers, stop };
}

/** The identifiers every log line about a job carries (never payload text). */
function jobContext(data: unknown): Record<string, unknown> {
  const d = (data ?? {}) as Record<string, unknown>;
  return { sessionId: d.sessionId, project: d.projectDir };
}
