import { bridgePrometheusRegistry } from '@engram/telemetry/prometheus-bridge';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { OperationsReport } from './operations.js';

// Prometheus metrics for the worker service. One registry per service instance (tests start several).

export interface WorkerMetrics {
  registry: Registry;
  /** Series labelled with tenant ids: served on /metrics only to the operator's token. */
  tenantRegistry: Registry;
  jobs: Counter<'queue' | 'outcome'>;
  jobDuration: Histogram<'queue' | 'outcome'>;
  forkTokens: Counter<'queue' | 'kind'>;
  /** Completed jobs' tokens per tenant (the cost ledger's process-local view; `_operator` = no tenant). */
  tenantForkTokens: Counter<'tenant' | 'queue' | 'type'>;
  toolDenials: Counter<'queue' | 'tool'>;
  indexOverflows: Counter<'queue' | 'cap'>;
  lockLost: Counter<'queue'>;
  memoriesWritten: Counter<'queue' | 'action'>;
  queueDepth: Gauge<'queue' | 'state'>;
  recalls: Counter<'outcome'>;
  recallLatency: Histogram<'outcome'>;
  /** 1 for the OS-sandbox mode this process runs unattended tools in (set at scrape time). */
  sandbox: Gauge<'mode' | 'backend' | 'bash'>;
  /** Outbox backlog (memory work waiting to be queued), by job kind; set at scrape time. */
  outboxItems: Gauge<'kind'>;
  outboxOldestAge: Gauge<'kind'>;
  outboxes: Gauge;
  /** The reconcile sweep's last recorded run (any worker of the namespace); set at scrape time. */
  reconcileLastRun: Gauge;
  reconcileLastSuccess: Gauge;
  reconcileLastRunOk: Gauge;
  reconcileLastResult: Gauge<'field'>;
}

export function createWorkerMetrics(): WorkerMetrics {
  const registry = new Registry();
  const tenantRegistry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'engram_workers_' });
  const metrics: WorkerMetrics = {
    registry,
    tenantRegistry,
    jobs: new Counter({
      name: 'engram_jobs_total',
      help: 'Jobs finished, by queue and outcome (completed, failed, retried).',
      labelNames: ['queue', 'outcome'],
      registers: [registry],
    }),
    jobDuration: new Histogram({
      name: 'engram_job_duration_seconds',
      help: 'Processing time of jobs, by queue and outcome.',
      labelNames: ['queue', 'outcome'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers: [registry],
    }),
    forkTokens: new Counter({
      name: 'engram_fork_tokens_total',
      help: 'Tokens used by forked agents, by queue and kind (input, output, cache_read, cache_creation).',
      labelNames: ['queue', 'kind'],
      registers: [registry],
    }),
    tenantForkTokens: new Counter({
      name: 'engram_tenant_fork_tokens_total',
      help: 'Tokens of completed memory jobs per tenant, queue and type (input, output, cache_read, cache_write).',
      labelNames: ['tenant', 'queue', 'type'],
      registers: [tenantRegistry],
    }),
    toolDenials: new Counter({
      name: 'engram_tool_denials_total',
      help: 'Tool calls a fork attempted and the permission policy denied, by tool.',
      labelNames: ['queue', 'tool'],
      registers: [registry],
    }),
    indexOverflows: new Counter({
      name: 'engram_index_overflows_total',
      help: 'MEMORY.md loads cut by the 200-line or 25,000-character cap.',
      labelNames: ['queue', 'cap'],
      registers: [registry],
    }),
    lockLost: new Counter({
      name: 'engram_job_lock_lost_total',
      help: 'Jobs whose lock this worker lost (its work was aborted).',
      labelNames: ['queue'],
      registers: [registry],
    }),
    memoriesWritten: new Counter({
      name: 'engram_memories_written_total',
      help: 'Memory files created or updated by workers.',
      labelNames: ['queue', 'action'],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'engram_queue_jobs',
      help: 'Jobs in each queue by state, sampled at scrape time.',
      labelNames: ['queue', 'state'],
      registers: [registry],
    }),
    recalls: new Counter({
      name: 'engram_recalls_total',
      help: 'Recall jobs by outcome (model, fallback, empty).',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    recallLatency: new Histogram({
      name: 'engram_recall_latency_seconds',
      help: 'Recall selection latency inside the worker.',
      labelNames: ['outcome'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
      registers: [registry],
    }),
    sandbox: new Gauge({
      name: 'engram_sandbox_info',
      help: 'The OS sandbox forks run in: mode (ENGRAM_SANDBOX), backend (bubblewrap or none), bash (sandboxed or denied).',
      labelNames: ['mode', 'backend', 'bash'],
      registers: [registry],
    }),
    outboxItems: new Gauge({
      name: 'engram_outbox_items',
      help: "Memory work waiting in sessions' outboxes to be queued (the foreground could not enqueue it), by kind.",
      labelNames: ['kind'],
      registers: [registry],
    }),
    outboxOldestAge: new Gauge({
      name: 'engram_outbox_oldest_age_seconds',
      help: 'Age of the oldest outbox item, by kind (0 when none waits).',
      labelNames: ['kind'],
      registers: [registry],
    }),
    outboxes: new Gauge({
      name: 'engram_outboxes',
      help: 'Sessions with a non-empty outbox.',
      registers: [registry],
    }),
    reconcileLastRun: new Gauge({
      name: 'engram_reconcile_last_run_timestamp_seconds',
      help: 'When the last reconcile sweep of this namespace finished (0: none recorded).',
      registers: [registry],
    }),
    reconcileLastSuccess: new Gauge({
      name: 'engram_reconcile_last_success_timestamp_seconds',
      help: 'When the last successful reconcile sweep finished (0: none recorded).',
      registers: [registry],
    }),
    reconcileLastRunOk: new Gauge({
      name: 'engram_reconcile_last_run_ok',
      help: 'Whether the last reconcile sweep succeeded (1), failed (0); -1 when none is recorded.',
      registers: [registry],
    }),
    reconcileLastResult: new Gauge({
      name: 'engram_reconcile_last_result',
      help: 'Counts of the last successful reconcile sweep (sessions, unchanged, outbox_handed, extracts_enqueued, skipped).',
      labelNames: ['field'],
      registers: [registry],
    }),
  };
  // The same instruments through OpenTelemetry when it is on; /metrics is unchanged either way.
  bridgePrometheusRegistry(registry);
  return metrics;
}

/** Sets the outbox and reconcile gauges from one operations report (at scrape time). */
export function setOperationsGauges(metrics: WorkerMetrics, report: OperationsReport): void {
  for (const [kind, v] of Object.entries(report.backlog.byKind)) {
    metrics.outboxItems.set({ kind }, v.items);
    metrics.outboxOldestAge.set(
      { kind },
      v.oldestAtMs === undefined ? 0 : Math.max(0, (report.atMs - v.oldestAtMs) / 1000),
    );
  }
  metrics.outboxes.set(report.backlog.outboxes.length);
  const run = report.reconcile;
  metrics.reconcileLastRun.set(run ? run.finishedAtMs / 1000 : 0);
  metrics.reconcileLastSuccess.set(run?.lastSuccessAtMs ? run.lastSuccessAtMs / 1000 : 0);
  metrics.reconcileLastRunOk.set(run ? (run.ok ? 1 : 0) : -1);
  if (run?.ok && run.result) {
    const r = run.result;
    metrics.reconcileLastResult.set({ field: 'sessions' }, r.sessions);
    metrics.reconcileLastResult.set({ field: 'unchanged' }, r.unchanged);
    metrics.reconcileLastResult.set({ field: 'outbox_handed' }, r.outboxHanded);
    metrics.reconcileLastResult.set({ field: 'extracts_enqueued' }, r.extractsEnqueued);
    metrics.reconcileLastResult.set({ field: 'skipped' }, r.skipped);
  }
}
