import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { delimiter, join } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';

// Starts a `redis-server` binary as a child process on a free loopback port: used by the test harness and by
// `engram dev` on a laptop that has Redis installed but not running.

export class RedisServerError extends EngramError {
  declare readonly code: 'REDIS_SERVER_NOT_FOUND' | 'REDIS_SERVER_START_FAILED';
  constructor(code: 'REDIS_SERVER_NOT_FOUND' | 'REDIS_SERVER_START_FAILED', message: string) {
    super(code, message, { retryable: code === 'REDIS_SERVER_START_FAILED' });
  }
}

export interface LocalRedisOptions {
  /** Working directory for the server (AOF files live here when `persist` is on). */
  dir: string;
  /** Fixed port; default: a free one. */
  port?: number;
  /** Append-only persistence, so a restart keeps every job. Tests turn it off unless they restart Redis. */
  persist?: boolean;
  binary?: string;
  startTimeoutMs?: number;
}

export interface LocalRedis {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** Stop the server (SIGTERM, waits for exit). */
  stop(): Promise<void>;
  /** Start it again on the same port and directory (after `stop`). */
  start(): Promise<void>;
  isRunning(): boolean;
}

export function findRedisServer(pathEnv = process.env.PATH ?? ''): string | undefined {
  for (const dir of pathEnv.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, 'redis-server');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return undefined;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let data = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      data += chunk.toString();
      if (data.includes('\r\n')) done(data.startsWith('+PONG'));
    });
  });
}

export async function startLocalRedis(options: LocalRedisOptions): Promise<LocalRedis> {
  const binary = options.binary ?? findRedisServer();
  if (!binary) {
    throw new RedisServerError(
      'REDIS_SERVER_NOT_FOUND',
      'No redis-server binary on PATH. Install one (Debian/Ubuntu: `apt-get install -y redis-server`, ' +
        'macOS: `brew install redis`), or set REDIS_URL to a running Redis 7.',
    );
  }
  mkdirSync(options.dir, { recursive: true, mode: 0o700 });
  const port = options.port ?? (await freePort());
  let child: ChildProcess | undefined;
  let stderr = '';

  const launch = async () => {
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      options.dir,
      '--save',
      '',
      '--appendonly',
      options.persist ? 'yes' : 'no',
      '--appendfsync',
      'always',
      '--maxmemory-policy',
      'noeviction',
      '--daemonize',
      'no',
      '--loglevel',
      'warning',
    ];
    // Its own process group: a terminal's Ctrl-C must not stop the server before its clients close.
    const proc = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    child = proc;
    // If this process dies without stopping us (a crash, a closed stdout), the server must not outlive it.
    const killOnExit = () => proc.kill('SIGTERM');
    process.once('exit', killOnExit);
    proc.once('exit', () => process.off('exit', killOnExit));
    proc.stderr?.on('data', (c: Buffer) => {
      stderr = (stderr + c.toString()).slice(-4_000);
    });
    const deadline = Date.now() + (options.startTimeoutMs ?? 10_000);
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) break;
      if (await ping(port)) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    proc.kill('SIGKILL');
    throw new RedisServerError(
      'REDIS_SERVER_START_FAILED',
      `redis-server did not start on port ${port}${stderr ? `: ${stderr.trim()}` : ''}`,
    );
  };

  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir: options.dir,
    isRunning: () => child !== undefined && child.exitCode === null && child.signalCode === null,
    async stop() {
      const proc = child;
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
    start: launch,
  };
}
