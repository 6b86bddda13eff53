import type { TestProject } from 'vitest/node';
import { provisionPostgres } from './postgres.js';
import { provisionRedis } from './redis.js';
import { takeShared } from './run-shared.js';

// Vitest globalSetup: one real Redis per test run, handed to tests through `inject('redisUrl')`, and — when the
// package's config asks for it (engramVitestConfig(dir, { postgres: true })) — one PostgreSQL, through
// `inject('postgresUrl')`. A run of many projects (`npm run test:fast`) shares them (`takeShared`): the first
// project that needs a server starts it, every project that needs it gets its URL.

export async function setup(project: TestProject): Promise<() => Promise<void>> {
  const services = project.getProvidedContext().engramServices ?? { redis: true, postgres: false };
  const redis = services.redis
    ? takeShared(
        'redis',
        () => provisionRedis(),
        (r) => r.stop(),
      )
    : undefined;
  const postgres = services.postgres
    ? takeShared(
        'postgres',
        () => provisionPostgres(),
        (p) => p.stop(),
      )
    : undefined;
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
