import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Tests resolve workspace packages to their TypeScript sources (the `source` export condition), so a
// package's tests never run against a stale dist/ of another package.
// Every run's temporary files live in one directory removed at the end (packages/testkit/src/tmp-global-setup.ts).
// `redis`/`postgres` start a real server once per run (packages/testkit/src/redis-global-setup.ts) for
// `inject('redisUrl')` / `inject('postgresUrl')`.
export function engramVitestConfig(
  options: { redis?: boolean; postgres?: boolean; testTimeout?: number } = {},
) {
  const services = { redis: !!options.redis, postgres: !!options.postgres };
  // The temporary-directory setup comes first, so its teardown (removing every temporary file) runs last.
  const globalSetup = [
    fileURLToPath(new URL('./packages/testkit/src/tmp-global-setup.ts', import.meta.url)),
    ...(services.redis || services.postgres
      ? [fileURLToPath(new URL('./packages/testkit/src/redis-global-setup.ts', import.meta.url))]
      : []),
  ];
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
      provide: { engramServices: services },
      testTimeout: options.testTimeout ?? 20_000,
      hookTimeout: 30_000,
      pool: 'forks',
    },
  });
}
