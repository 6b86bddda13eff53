import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

// Prometheus metrics for the worker service. One registry per service instance (tests start several).

export interface WorkerMetrics {
  registry: Registry;
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
}

export function createWorkerMetrics(): WorkerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'engram_workers_' });
  return {
    registry,
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
      registers: [registry],
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
  };
}
