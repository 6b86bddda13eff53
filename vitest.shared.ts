import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

const ROOT = fileURLToPath(new URL('./', import.meta.url));

/**
 * The suites `npm run test:fast` leaves out (`npm test` runs them all): those that clone the repository, start
 * built processes, drive a browser or another program's binary, or kill processes — the end-to-end tier. Paths
 * from the repository root; `test-tiers.test.ts` (apps/agent) checks that each exists.
 */
export const END_TO_END_SUITES = [
  'apps/agent/src/fresh-clone.test.ts', // clones the repository and installs it
  'apps/agent/src/first-run.test.ts', // runs `npm run dev` / the built CLI as a new user would
  'apps/agent/src/zero-install.test.ts', // the stack with nothing but Node (embedded PostgreSQL)
  'apps/agent/src/cli.test.ts', // the CLI as processes
  'apps/agent/src/dev-stack-ports.test.ts', // restarts the built dev stack
  'apps/agent/src/mcp-stdio.test.ts', // spawns `engram mcp`
  'apps/agent/src/commands/hook-entry.test.ts', // `engram hook` processes and their background processes
  'apps/agent/src/claude-code-e2e.test.ts', // the real Claude Code binary with the plugin, hooks and workers
  'apps/agent/src/telemetry.test.ts', // a served turn with workers, exported to an OTLP receiver
  'apps/agent/src/server/memory-stores.test.ts', // the SDK against engram serve on PostgreSQL
  'apps/agent/src/server/mcp-route.test.ts', // the MCP client against engram serve
  'apps/agent/src/sandbox.test.ts', // `engram sandbox` processes under bubblewrap
  'apps/agent/src/server/hosted-app.test.ts', // engram serve + workers end to end
  'apps/agent/src/server/compose.test.ts', // the compose file against the built images' contract
  'apps/workers/src/jobs/extract-crash.test.ts', // SIGKILLs worker processes mid-job
  'apps/workers/src/jobs/dream-processes.test.ts', // dream workers as processes
  'packages/worker-service/src/jobs/extract-staged-kill.test.ts', // SIGKILLs processes at every staged commit step
  'packages/worker-service/src/redis-topologies.test.ts', // Redis Cluster, Sentinel and TLS servers
  'packages/worker-service/src/http/memory-browser.test.ts', // headless Chromium
  'packages/agent-sdk/src/query.test.ts', // the Agent SDK's bundled Claude Code binary
] as const;

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
      // `npm run test:fast` (ENGRAM_TEST_FAST=1): this package's suites without the end-to-end tier.
      exclude: [
        ...configDefaults.exclude,
        ...(process.env.ENGRAM_TEST_FAST === '1'
          ? END_TO_END_SUITES.map((path) => relative(process.cwd(), `${ROOT}${path}`)).filter(
              (path) => !path.startsWith('..'),
            )
          : []),
      ],
      environment: 'node',
      globalSetup,
      provide: { engramServices: services },
      testTimeout: options.testTimeout ?? 20_000,
      hookTimeout: 30_000,
      pool: 'forks',
    },
  });
}
