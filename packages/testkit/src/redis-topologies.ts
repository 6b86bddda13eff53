import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
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
