import { EngramError } from '@engram/errors/engram-error';
import { z } from 'zod';

// Which engine runs BullMQ is decided here and nowhere else: Redis in production, or BullMQ's PostgreSQL
// backend when ENGRAM_QUEUE_URL is a postgres:// URL. Redis may be one node (REDIS_URL, `rediss://` for TLS),
// a Sentinel-managed primary (ENGRAM_REDIS_SENTINELS + ENGRAM_REDIS_SENTINEL_NAME) or a Redis Cluster
// (ENGRAM_REDIS_CLUSTER); ENGRAM_REDIS_TLS_CA_FILE trusts a private CA (e.g. a self-signed certificate).

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

export interface RedisNode {
  host: string;
  port: number;
}

export type RedisTopology =
  | { mode: 'single' }
  /** Seed nodes; the client discovers the rest. Every queue and state key shares one hash tag (one slot). */
  | { mode: 'cluster'; nodes: RedisNode[] }
  | { mode: 'sentinel'; sentinels: RedisNode[]; name: string };

export type QueueBackendConfig =
  | {
      kind: 'redis';
      /** The node to connect to (single), or the first seed / sentinel (for display and diagnostics). */
      url: string;
      /** True when neither REDIS_URL nor ENGRAM_QUEUE_URL was set and the default was assumed. */
      implicit: boolean;
      /** Absent means a single node. */
      topology?: RedisTopology;
      /** TLS settings beyond what `rediss://` implies: a CA bundle to trust. */
      tls?: { caFile?: string };
    }
  | { kind: 'postgres'; url: string; implicit: false };

export class QueueConfigError extends EngramError {
  constructor(message: string) {
    super('QUEUE_CONFIG_INVALID', message, { retryable: false });
  }
}

const urlSchema = z.string().trim().min(1);

function parseUrl(name: string, value: string): URL {
  const parsed = urlSchema.safeParse(value);
  try {
    if (!parsed.success) throw new Error('empty');
    return new URL(parsed.data);
  } catch {
    throw new QueueConfigError(
      `${name} is not a valid URL (got ${JSON.stringify(redactUrl(value))}). Use redis://host:6379 or postgres://user:pass@host/db.`,
    );
  }
}

function parseNodes(
  name: string,
  value: string,
  defaultPort: number,
): { nodes: RedisNode[]; tls: boolean; url: string } {
  const parts = value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new QueueConfigError(`${name} is empty; list nodes as host:port,host:port.`);
  let tls = false;
  let first = '';
  const nodes = parts.map((part) => {
    const withScheme = /^[a-z]+:\/\//i.test(part) ? part : `redis://${part}`;
    const url = parseUrl(name, withScheme);
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
      throw new QueueConfigError(
        `${name} entries must be host:port, redis://host:port or rediss://host:port.`,
      );
    }
    tls ||= url.protocol === 'rediss:';
    first ||= withScheme;
    return { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port ? Number(url.port) : defaultPort };
  });
  return { nodes, tls, url: first };
}

function withTls<T extends QueueBackendConfig>(config: T, env: NodeJS.ProcessEnv): T {
  const caFile = env.ENGRAM_REDIS_TLS_CA_FILE?.trim();
  return config.kind === 'redis' && caFile ? { ...config, tls: { caFile } } : config;
}

export function resolveBackendConfig(env: NodeJS.ProcessEnv = process.env): QueueBackendConfig {
  const cluster = env.ENGRAM_REDIS_CLUSTER?.trim();
  const sentinels = env.ENGRAM_REDIS_SENTINELS?.trim();
  if (cluster && sentinels) {
    throw new QueueConfigError('Set ENGRAM_REDIS_CLUSTER or ENGRAM_REDIS_SENTINELS, not both.');
  }
  if ((cluster || sentinels) && env.ENGRAM_QUEUE_URL?.trim()) {
    throw new QueueConfigError(
      'ENGRAM_QUEUE_URL selects the queue engine by URL; with ENGRAM_REDIS_CLUSTER or ENGRAM_REDIS_SENTINELS leave it unset.',
    );
  }
  if (cluster) {
    const { nodes, url } = parseNodes('ENGRAM_REDIS_CLUSTER', cluster, 6379);
    return withTls({ kind: 'redis', url, implicit: false, topology: { mode: 'cluster', nodes } }, env);
  }
  if (sentinels) {
    const name = env.ENGRAM_REDIS_SENTINEL_NAME?.trim();
    if (!name) {
      throw new QueueConfigError(
        'ENGRAM_REDIS_SENTINELS is set but ENGRAM_REDIS_SENTINEL_NAME is not: name the monitored primary (e.g. mymaster).',
      );
    }
    const parsed = parseNodes('ENGRAM_REDIS_SENTINELS', sentinels, 26379);
    // REDIS_URL, if set, carries the primary's credentials and scheme (rediss:// for TLS).
    const url = env.REDIS_URL?.trim() || parsed.url;
    return withTls(
      { kind: 'redis', url, implicit: false, topology: { mode: 'sentinel', sentinels: parsed.nodes, name } },
      env,
    );
  }
  return withTls(resolveSingleBackend(env), env);
}

function resolveSingleBackend(env: NodeJS.ProcessEnv): QueueBackendConfig {
  const queueUrl = env.ENGRAM_QUEUE_URL?.trim();
  if (queueUrl) {
    const url = parseUrl('ENGRAM_QUEUE_URL', queueUrl);
    if (url.protocol === 'postgres:' || url.protocol === 'postgresql:') {
      return { kind: 'postgres', url: queueUrl, implicit: false };
    }
    if (url.protocol === 'redis:' || url.protocol === 'rediss:')
      return { kind: 'redis', url: queueUrl, implicit: false };
    throw new QueueConfigError(
      `ENGRAM_QUEUE_URL must start with postgres://, postgresql://, redis:// or rediss:// (got ${url.protocol}//…).`,
    );
  }
  const redisUrl = env.REDIS_URL?.trim();
  if (redisUrl) {
    const url = parseUrl('REDIS_URL', redisUrl);
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
      throw new QueueConfigError(`REDIS_URL must start with redis:// or rediss:// (got ${url.protocol}//…).`);
    }
    return { kind: 'redis', url: redisUrl, implicit: false };
  }
  return { kind: 'redis', url: DEFAULT_REDIS_URL, implicit: true };
}

/** The URL with any password replaced, for logs and error messages (secrets never go into logs). */
export function redactUrl(value: string): string {
  try {
    const url = new URL(value);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return value.replace(/\/\/([^:/@]+):([^@]+)@/, '//$1:***@');
  }
}
