import type { TestProject } from 'vitest/node';
import { type ProvisionedRedis, provisionRedis } from './redis.js';

// Vitest globalSetup: one real Redis per test run, handed to tests through `inject('redisUrl')`.

let redis: ProvisionedRedis | undefined;

export async function setup(project: TestProject): Promise<void> {
  redis = await provisionRedis();
  project.provide('redisUrl', redis.url);
  project.provide('redisSource', redis.source);
}

export async function teardown(): Promise<void> {
  await redis?.stop();
}
