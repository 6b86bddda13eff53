import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { FAST_LOOP_PACKAGES, isolatedSuiteProjects } from './vitest.shared.js';

// `npm run test:fast` (ENGRAM_TEST_FAST=1): one Vitest from the repository root with every package as a project,
// without the end-to-end tier (`END_TO_END_SUITES`). One Vitest, one Redis and one PostgreSQL for the loop, where
// twenty package runs started twenty of each (vitest.shared.ts).
if (process.env.ENGRAM_TEST_FAST !== '1') {
  throw new Error(
    'vitest.fast.config.ts is the fast loop: run it as `npm run test:fast` (ENGRAM_TEST_FAST=1).',
  );
}

export default defineConfig({
  test: {
    projects: [...FAST_LOOP_PACKAGES, ...isolatedSuiteProjects()],
    // The integration suites mostly wait (on Redis, PostgreSQL, the scripted model, lease timers): one file more
    // than the cores keeps both busy.
    maxWorkers: availableParallelism() + 1,
    experimental: { fsModuleCache: true },
  },
});
