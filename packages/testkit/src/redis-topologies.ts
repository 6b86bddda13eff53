import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findRedisServer, freePort } from '@engram/queue/local-redis';

// Real multi-node and TLS Redis on loopback for tests and benches: a 3-primary Redis Cluster built with
// `redis-cli --cluster create`, and a TLS-only server with a self-signed certificate made by openssl.

export interface RunningRedisTopology {
  /** Environment that points Engram at it (ENGRAM_REDIS_CLUSTER or REDIS_URL + ENGRAM_REDIS_TLS_CA_FILE). */
  env: Record<string, string>;
  ports: number[];
  stop(): Promise<void>;
}

function redisServer(): string {
  const binary = findRedisServer();
  if (!binary) throw new Error('redis-server is not on PATH (apt-get install -y redis-server).');
  return binary;
}

async function waitFor(check: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function cli(args: string[]): string {
  try {
    return execFileSync('redis-cli', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    return String((error as { stdout?: string }).stdout ?? '');
  }
}

function launch(args: string[], processes: ChildProcess[]): ChildProcess {
  const proc = spawn(redisServer(), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const kill = () => proc.kill('SIGKILL');
  process.once('exit', kill);
  proc.once('exit', () => process.off('exit', kill));
  processes.push(proc);
  return proc;
}

async function stopAll(processes: ChildProcess[], dir: string): Promise<void> {
  await Promise.all(
    processes.map(
      (p) =>
        new Promise<void>((resolve) => {
          if (p.exitCode !== null || p.signalCode !== null) return resolve();
          p.once('exit', () => resolve());
          p.kill('SIGTERM');
        }),
    ),
  );
  rmSync(dir, { recursive: true, force: true });
}

/** Three primaries, no replicas, every slot assigned; resolves when `cluster_state:ok` on every node. */
export async function startRedisCluster(nodes = 3): Promise<RunningRedisTopology> {
  const dir = mkdtempSync(join(tmpdir(), 'engram-redis-cluster-'));
  const processes: ChildProcess[] = [];
  const ports: number[] = [];
  for (let i = 0; i < nodes; i++) ports.push(await freePort());
  for (const port of ports) {
    const nodeDir = join(dir, String(port));
    mkdirSync(nodeDir);
    launch(
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        nodeDir,
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-node-timeout',
        '5000',
        '--save',
        '',
        '--appendonly',
        'no',
        '--maxmemory-policy',
        'noeviction',
        '--loglevel',
        'warning',
      ],
      processes,
    );
  }
  try {
    for (const port of ports) {
      await waitFor(() => cli(['-p', String(port), 'ping']).trim() === 'PONG', `cluster node ${port}`);
    }
    execFileSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { stdio: 'ignore' },
    );
    for (const port of ports) {
      await waitFor(
        () => cli(['-p', String(port), 'cluster', 'info']).includes('cluster_state:ok'),
        `cluster state on ${port}`,
      );
    }
  } catch (error) {
    await stopAll(processes, dir);
    throw error;
  }
  return {
    env: { ENGRAM_REDIS_CLUSTER: ports.map((p) => `127.0.0.1:${p}`).join(',') },
    ports,
    stop: () => stopAll(processes, dir),
  };
}

/** A TLS-only Redis (no plaintext port) with a fresh self-signed certificate for 127.0.0.1. */
export async function startTlsRedis(): Promise<RunningRedisTopology & { caFile: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'engram-redis-tls-'));
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  const port = await freePort();
  const processes: ChildProcess[] = [];
  launch(
    [
      '--port',
      '0',
      '--tls-port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--tls-cert-file',
      cert,
      '--tls-key-file',
      key,
      '--tls-ca-cert-file',
      cert,
      '--tls-auth-clients',
      'no',
      '--save',
      '',
      '--appendonly',
      'no',
      '--maxmemory-policy',
      'noeviction',
      '--loglevel',
      'warning',
    ],
    processes,
  );
  try {
    await waitFor(
      () => cli(['--tls', '--cacert', cert, '-p', String(port), 'ping']).trim() === 'PONG',
      `TLS redis on ${port}`,
    );
  } catch (error) {
    await stopAll(processes, dir);
    throw error;
  }
  return {
    env: { REDIS_URL: `rediss://127.0.0.1:${port}`, ENGRAM_REDIS_TLS_CA_FILE: cert },
    ports: [port],
    caFile: cert,
    stop: () => stopAll(processes, dir),
  };
}

export interface RunningRedisSentinel extends RunningRedisTopology {
  /** The name the sentinels monitor the primary under (ENGRAM_REDIS_SENTINEL_NAME). */
  name: string;
  sentinelPorts: number[];
  /** Port of the current primary, as the sentinels report it. */
  primaryPort(): number | undefined;
  /**
   * Waits until the replica has every write of the primary, SIGKILLs the primary and resolves once every
   * sentinel names the promoted replica: a real failover, decided by the sentinels' quorum.
   */
  failover(): Promise<{ from: number; to: number }>;
}

function sentinelPrimary(sentinelPort: number, name: string): number | undefined {
  const lines = cli(['-p', String(sentinelPort), 'sentinel', 'get-master-addr-by-name', name])
    .trim()
    .split('\n');
  const port = Number(lines[1]);
  return Number.isInteger(port) && port > 0 ? port : undefined;
}

/**
 * A Sentinel-managed primary on loopback: a primary, one replica, and three `redis-server --sentinel`
 * processes (quorum 2, primary declared down after 1 s). Resolves when every sentinel sees the replica and
 * the other sentinels.
 */
export async function startRedisSentinel(name = 'engram'): Promise<RunningRedisSentinel> {
  const dir = mkdtempSync(join(tmpdir(), 'engram-redis-sentinel-'));
  const processes: ChildProcess[] = [];
  const byPort = new Map<number, ChildProcess>();
  const [primary, replica] = [await freePort(), await freePort()];
  const common = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'];
  for (const port of [primary, replica]) {
    const nodeDir = join(dir, String(port));
    mkdirSync(nodeDir);
    const args = ['--port', String(port), '--dir', nodeDir, '--maxmemory-policy', 'noeviction', ...common];
    if (port === replica) args.push('--replicaof', '127.0.0.1', String(primary));
    byPort.set(port, launch(args, processes));
  }
  const sentinelPorts = [await freePort(), await freePort(), await freePort()];
  try {
    for (const port of [primary, replica]) {
      await waitFor(() => cli(['-p', String(port), 'ping']).trim() === 'PONG', `redis node ${port}`);
    }
    await waitFor(
      () => cli(['-p', String(replica), 'info', 'replication']).includes('master_link_status:up'),
      'the replica to sync',
    );
    for (const port of sentinelPorts) {
      // A sentinel rewrites its configuration file (it records what it learns), so each has its own.
      const conf = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${name} 127.0.0.1 ${primary} 2`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 10000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      launch([conf, '--sentinel', '--loglevel', 'warning'], processes);
    }
    for (const port of sentinelPorts) {
      await waitFor(() => {
        const info = cli(['-p', String(port), 'sentinel', 'master', name]).split('\n');
        const field = (key: string) => Number(info[info.indexOf(key) + 1]);
        return field('num-slaves') >= 1 && field('num-other-sentinels') >= 2;
      }, `sentinel ${port} to see the replica and the other sentinels`);
    }
  } catch (error) {
    await stopAll(processes, dir);
    throw error;
  }
  const primaryPort = () => sentinelPrimary(sentinelPorts[0]!, name);
  return {
    env: {
      ENGRAM_REDIS_SENTINELS: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
      ENGRAM_REDIS_SENTINEL_NAME: name,
    },
    ports: [primary, replica, ...sentinelPorts],
    name,
    sentinelPorts,
    primaryPort,
    async failover() {
      const from = primaryPort();
      const to = from === primary ? replica : primary;
      if (from === undefined) throw new Error('the sentinels name no primary');
      cli(['-p', String(from), 'wait', '1', '5000']);
      byPort.get(from)?.kill('SIGKILL');
      await waitFor(
        () => sentinelPorts.every((p) => sentinelPrimary(p, name) === to),
        `the sentinels to promote ${to}`,
        30_000,
      );
      await waitFor(
        () => cli(['-p', String(to), 'info', 'replication']).includes('role:master'),
        `${to} to take the primary role`,
      );
      return { from, to };
    },
    stop: () => stopAll(processes, dir),
  };
}
