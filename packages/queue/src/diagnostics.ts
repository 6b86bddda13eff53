import { Redis } from 'ioredis';
import { type QueueBackendConfig, redactUrl } from './backend-config.js';

// What `engram doctor` and the worker start-up check ask of the engine: is it reachable, which version, and
// is it configured so that queued jobs cannot silently disappear.

export interface BackendReport {
  kind: QueueBackendConfig['kind'];
  url: string;
  reachable: boolean;
  version?: string;
  /** Redis only: must be `noeviction`, or Redis may evict job keys under memory pressure (lost jobs). */
  evictionPolicy?: string;
  /** Redis only: whether AOF persistence is on (jobs survive a Redis restart). */
  appendOnly?: boolean;
  problems: string[];
}

export class UnsafeBackendError extends Error {
  readonly code = 'QUEUE_BACKEND_UNSAFE';
  constructor(readonly report: BackendReport) {
    super(report.problems.join(' '));
    this.name = 'UnsafeBackendError';
  }
}

export async function inspectBackend(config: QueueBackendConfig, timeoutMs = 3_000): Promise<BackendReport> {
  const report: BackendReport = {
    kind: config.kind,
    url: redactUrl(config.url),
    reachable: false,
    problems: [],
  };
  if (config.kind !== 'redis') {
    report.problems.push('inspection of this backend is not implemented');
    return report;
  }
  const redis = new Redis(config.url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    report.reachable = true;
    const info = await redis.info('server');
    report.version = /redis_version:([^\r\n]+)/.exec(info)?.[1];
    const [, policy] = (await redis.config('GET', 'maxmemory-policy')) as [string, string];
    const [, aof] = (await redis.config('GET', 'appendonly')) as [string, string];
    report.evictionPolicy = policy;
    report.appendOnly = aof === 'yes';
    const major = Number(report.version?.split('.')[0]);
    if (Number.isFinite(major) && major < 6) {
      report.problems.push(`Redis ${report.version} is too old: BullMQ needs Redis ≥ 6.2 (7.x recommended).`);
    }
    if (policy !== 'noeviction') {
      report.problems.push(
        `Redis maxmemory-policy is "${policy}"; BullMQ needs "noeviction" or jobs can be evicted and lost. ` +
          'Fix: `redis-cli CONFIG SET maxmemory-policy noeviction` (and set it in redis.conf).',
      );
    }
  } catch (error) {
    report.problems.push(
      `Cannot reach Redis at ${report.url}: ${(error as Error).message}. Start Redis or set REDIS_URL.`,
    );
  } finally {
    redis.disconnect();
  }
  return report;
}
