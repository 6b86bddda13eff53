import type { TestProject } from 'vitest/node';
import { type ProvisionedPostgres, provisionPostgres } from './postgres.js';
import { type ProvisionedRedis, provisionRedis } from './redis.js';

// Vitest globalSetup: one real Redis per test run, handed to tests through `inject('redisUrl')`, and — when the
// package's config asks for it (engramVitestConfig({ postgres: true })) — one PostgreSQL, through
// `inject('postgresUrl')`. Both start together and are stopped at teardown.

let redis: ProvisionedRedis | undefined;
let postgres: ProvisionedPostgres | undefined;

export async function setup(project: TestProject): Promise<void> {
  const services = project.getProvidedContext().engramServices ?? { redis: true, postgres: false };
  const [r, p] = await Promise.allSettled([
    services.redis ? provisionRedis() : Promise.resolve(undefined),
    services.postgres ? provisionPostgres() : Promise.resolve(undefined),
  ]);
  redis = r.status === 'fulfilled' ? r.value : undefined;
  postgres = p.status === 'fulfilled' ? p.value : undefined;
  if (r.status === 'rejected' || p.status === 'rejected') {
    await teardown();
    throw r.status === 'rejected' ? r.reason : (p as PromiseRejectedResult).reason;
  }
  if (redis) {
    project.provide('redisUrl', redis.url);
    project.provide('redisSource', redis.source);
  }
  if (postgres) {
    project.provide('postgresUrl', postgres.url);
    project.provide('postgresSource', postgres.source);
  }
}

export async function teardown(): Promise<void> {
  await Promise.allSettled([redis?.stop(), postgres?.stop()]);
  redis = undefined;
  postgres = undefined;
}
