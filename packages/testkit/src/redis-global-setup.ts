import type { TestProject } from 'vitest/node';
import { provisionPostgres } from './postgres.js';
import { provisionRedis } from './redis.js';
import { takeShared } from './run-shared.js';

// Vitest globalSetup: one real Redis per test run, handed to tests through `inject('redisUrl')`, and — when the
// package's config asks for it (engramVitestConfig(dir, { postgres: true })) — one PostgreSQL, through
// `inject('postgresUrl')`. A run of many projects (`npm run test:fast`) shares them (`takeShared`): the first
// project that needs a server starts it, every project that needs it gets its URL.

/** A server of the run, shared by every project that asks for it and stopped after the last one's teardown. */
const shareServer = <T extends { stop(): Promise<void> }>(name: string, start: () => Promise<T>) =>
  takeShared(name, start, (server) => server.stop());

export async function setup(project: TestProject): Promise<() => Promise<void>> {
  const services = project.getProvidedContext().engramServices ?? { redis: true, postgres: false };
  const redis = services.redis ? shareServer('redis', () => provisionRedis()) : undefined;
  const postgres = services.postgres ? shareServer('postgres', () => provisionPostgres()) : undefined;
  const teardown = async () => void (await Promise.allSettled([redis?.release(), postgres?.release()]));
  const [r, p] = await Promise.allSettled([redis?.value, postgres?.value]);
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
