import { describe, expect, it } from 'vitest';
import { QueueConfigError, resolveBackendConfig } from './backend-config.js';
import { topologyNamespace } from './redis-client.js';

describe('resolveBackendConfig: Redis topologies', () => {
  it('reads a Cluster seed list, a Sentinel set and a TLS CA', () => {
    const cluster = resolveBackendConfig({
      ENGRAM_REDIS_CLUSTER: '10.0.0.1:7000, rediss://10.0.0.2:7001,10.0.0.3',
    });
    expect(cluster).toMatchObject({
      kind: 'redis',
      topology: {
        mode: 'cluster',
        nodes: [
          { host: '10.0.0.1', port: 7000 },
          { host: '10.0.0.2', port: 7001 },
          { host: '10.0.0.3', port: 6379 },
        ],
      },
    });
    const sentinel = resolveBackendConfig({
      ENGRAM_REDIS_SENTINELS: 's1:26379,s2',
      ENGRAM_REDIS_SENTINEL_NAME: 'mymaster',
      REDIS_URL: 'rediss://:secret@mymaster',
      ENGRAM_REDIS_TLS_CA_FILE: '/etc/ssl/ca.pem',
    });
    expect(sentinel).toMatchObject({
      url: 'rediss://:secret@mymaster',
      topology: {
        mode: 'sentinel',
        name: 'mymaster',
        sentinels: [
          { host: 's1', port: 26379 },
          { host: 's2', port: 26379 },
        ],
      },
      tls: { caFile: '/etc/ssl/ca.pem' },
    });
    expect(resolveBackendConfig({ REDIS_URL: 'rediss://cache:6380' })).toEqual({
      kind: 'redis',
      url: 'rediss://cache:6380',
      implicit: false,
    });
  });

  it('refuses ambiguous or incomplete settings with what to do', () => {
    const err = (env: NodeJS.ProcessEnv) => {
      try {
        resolveBackendConfig(env);
      } catch (e) {
        expect(e).toBeInstanceOf(QueueConfigError);
        return (e as Error).message;
      }
      return 'no error';
    };
    expect(err({ ENGRAM_REDIS_CLUSTER: 'a:1', ENGRAM_REDIS_SENTINELS: 'b:2' })).toMatch(/not both/);
    expect(err({ ENGRAM_REDIS_SENTINELS: 'b:2' })).toMatch(/ENGRAM_REDIS_SENTINEL_NAME/);
    expect(err({ ENGRAM_REDIS_CLUSTER: ' , ' })).toMatch(/empty/);
    expect(err({ ENGRAM_REDIS_CLUSTER: 'http://x:1' })).toMatch(/host:port/);
    expect(err({ ENGRAM_REDIS_CLUSTER: 'a:1', ENGRAM_QUEUE_URL: 'postgres://x/y' })).toMatch(
      /leave it unset/,
    );
  });

  it('hash-tags the namespace on a Cluster only', () => {
    const cluster = resolveBackendConfig({ ENGRAM_REDIS_CLUSTER: 'a:1' });
    expect(topologyNamespace(cluster, 'engram')).toBe('{engram}');
    expect(topologyNamespace(cluster, '{mine}')).toBe('{mine}');
    expect(topologyNamespace(resolveBackendConfig({ REDIS_URL: 'redis://a:1' }), 'engram')).toBe('engram');
  });
});
