import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Tests resolve workspace packages to their TypeScript sources (the `source` export condition), so a
// package's tests never run against a stale dist/ of another package.
export function engramVitestConfig(options: { redis?: boolean; testTimeout?: number } = {}) {
  const globalSetup = options.redis
    ? [fileURLToPath(new URL('./packages/testkit/src/redis-global-setup.ts', import.meta.url))]
    : [];
  return defineConfig({
    resolve: { conditions: ['source'] },
    ssr: { resolve: { conditions: ['source'] } },
    // globalSetup files run in Vitest's own `__vitest__` environment, which needs the same rule.
    environments: {
      __vitest__: {
        resolve: { conditions: ['source', 'node', 'import', 'default'], noExternal: [/@engram\//] },
      },
    },
    test: {
      include: ['src/**/*.test.ts'],
      environment: 'node',
      globalSetup,
      testTimeout: options.testTimeout ?? 20_000,
      hookTimeout: 30_000,
      pool: 'forks',
    },
  });
}
