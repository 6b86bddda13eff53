import { readFileSync } from 'node:fs';
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { QueueBackendConfig } from './backend-config.js';

// Turns a Redis backend choice (one node, a Sentinel-managed primary, or a Redis Cluster; TLS or not) into
// ioredis clients and BullMQ connection options. The only place that knows the topologies; the engine asks it.

type RedisBackend = Extract<QueueBackendConfig, { kind: 'redis' }>;

/** TLS options for ioredis: `rediss://` turns TLS on; ENGRAM_REDIS_TLS_CA_FILE adds the CA to trust. */
function tlsOptions(config: RedisBackend): TlsOptions | undefined {
  const tls = config.url.startsWith('rediss://') || config.tls?.caFile !== undefined;
  if (!tls) return undefined;
  return config.tls?.caFile ? { ca: readFileSync(config.tls.caFile) } : {};
}

/** Credentials in the URL (redis://user:pass@…), for topologies where the URL is not handed to ioredis. */
function credentials(config: RedisBackend): Pick<RedisOptions, 'username' | 'password'> {
  try {
    const url = new URL(config.url);
    return {
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    };
  } catch {
    return {};
  }
}

export function isCluster(config: QueueBackendConfig): boolean {
  return config.kind === 'redis' && config.topology?.mode === 'cluster';
}

/**
 * The key namespace as used on this topology. On a Cluster, BullMQ's multi-key scripts (and the state store's
 * lease + fence script) need all their keys in one slot, so the namespace becomes a hash tag — `{engram}` —
 * as BullMQ documents for its prefix. A namespace that already contains a tag is kept.
 */
export function topologyNamespace(config: QueueBackendConfig, namespace: string): string {
  if (!isCluster(config) || /\{[^}]+\}/.test(namespace)) return namespace;
  return `{${namespace}}`;
}

/** A client of the configured Redis (a Cluster client on a Cluster). */
export function createRedisClient(config: RedisBackend, options: RedisOptions): Redis | Cluster {
  const tls = tlsOptions(config);
  const topology = config.topology ?? { mode: 'single' as const };
  if (topology.mode === 'cluster') {
    const { enableOfflineQueue, enableAutoPipelining, retryStrategy, lazyConnect, ...nodeOptions } = options;
    const clusterOptions: ClusterOptions = {
      redisOptions: { ...nodeOptions, ...credentials(config), ...(tls ? { tls } : {}) },
      ...(lazyConnect !== undefined ? { lazyConnect } : {}),
      ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
      ...(enableAutoPipelining !== undefined ? { enableAutoPipelining } : {}),
      ...(retryStrategy ? { clusterRetryStrategy: (times: number) => retryStrategy(times) ?? null } : {}),
    };
    return new Cluster(topology.nodes, clusterOptions);
  }
  if (topology.mode === 'sentinel') {
    return new Redis({ ...options, ...sentinelOptions(config, topology, tls) });
  }
  return new Redis(config.url, { ...options, ...(tls ? { tls } : {}) });
}

function sentinelOptions(
  config: RedisBackend,
  topology: Extract<NonNullable<RedisBackend['topology']>, { mode: 'sentinel' }>,
  tls: TlsOptions | undefined,
): RedisOptions {
  return {
    sentinels: topology.sentinels,
    name: topology.name,
    ...credentials(config),
    ...(tls ? { tls, enableTLSForSentinelMode: true } : {}),
  };
}

/**
 * BullMQ connection options for a Queue/Worker/QueueEvents that BullMQ creates and closes itself (one node,
 * Sentinel). On a Cluster it needs a client instance: see `ownedBullmqConnection`.
 */
export function bullmqConnectionOptions(
  config: RedisBackend,
  options: RedisOptions,
): RedisOptions & { url?: string } {
  const tls = tlsOptions(config);
  const topology = config.topology ?? { mode: 'single' as const };
  if (topology.mode === 'sentinel') return { ...options, ...sentinelOptions(config, topology, tls) };
  return { url: config.url, ...options, ...(tls ? { tls } : {}) };
}
