import type { TestProject } from 'vitest/node';
import { provisionPostgres } from './postgres.js';
import { provisionRedis } from './redis.js';

// Vitest globalSetup: one real Redis per test run, handed to tests through `inject('redisUrl')`, and — when the
// package's config asks for it (engramVitestConfig(dir, { postgres: true })) — one PostgreSQL, through
// `inject('postgresUrl')`. In a run of many projects (`npm run test:fast`) the projects share them: the first
// project that needs a server starts it, every project that needs it gets its URL, and the teardown of the last
// one stops it. The servers are kept on globalThis, which the projects share even where each loads its own copy
// of this module.

interface Shared {
  started: Promise<{ stop(): Promise<void> }>;
  users: number;
}
const KEY = Symbol.for('engram.test.servers');
const holder = globalThis as { [KEY]?: Map<string, Shared> };
const servers = holder[KEY] ?? new Map<string, Shared>();
holder[KEY] = servers;

/** The run's server called `name`, started by the first project that takes it and stopped after the last. */
function take<T extends { stop(): Promise<void> }>(
  name: string,
  start: () => Promise<T>,
): { started: Promise<T>; release: () => Promise<void> } {
  let server = servers.get(name);
  if (!server) {
    server = { started: start(), users: 0 };
    servers.set(name, server);
  }
  server.users += 1;
  const mine = server;
  return {
    started: mine.started as Promise<T>,
    release: async () => {
      mine.users -= 1;
      if (mine.users > 0) return;
      if (servers.get(name) === mine) servers.delete(name);
      await mine.started.then(
        (running) => running.stop(),
        () => {},
      );
    },
  };
}

export async function setup(project: TestProject): Promise<() => Promise<void>> {
  const services = project.getProvidedContext().engramServices ?? { redis: true, postgres: false };
  const redis = services.redis ? take('redis', provisionRedis) : undefined;
  const postgres = services.postgres ? take('postgres', provisionPostgres) : undefined;
  const teardown = async () => void (await Promise.allSettled([redis?.release(), postgres?.release()]));
  const [r, p] = await Promise.allSettled([redis?.started, postgres?.started]);
  if (r.status === 'rejected' || p.status === 'rejected') {
    await teardown();
    throw r.status === 'rejected' ? r.reason : (p as PromiseRejectedResult).reason;
  }
  if (r.value) {
    project.provide('redisUrl', r.value.url);
    project.provide('redisSource', r.value.source);
  }
  if (p.value) {
    project.provide('postgresUrl', p.value.url);
    project.provide('postgresSource', p.value.source);
  }
  return teardown;
}
