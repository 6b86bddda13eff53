import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

const ROOT = fileURLToPath(new URL('./', import.meta.url));

/**
 * The end-to-end tier: the suites `npm run test:fast` leaves out (`npm test` runs them all). A suite belongs here
 * when it does one of these — everything else (unit tests, and integration tests in this process against the
 * run's Redis, PostgreSQL and scripted model server) is fast:
 * - `install`: clones or installs the repository;
 * - `process`: runs the built CLI or workers as processes, another program's binary (Claude Code, Chromium),
 *   or servers of its own (Redis topologies, PostgreSQL launches);
 * - `crash`: kills, stops or restarts a process or server mid-test (SIGKILL, engine outages);
 * - `soak`: a load, a long session or a race against another process, repeated to show a bound holds.
 * Paths from the repository root; `test-tiers.test.ts` (apps/agent) checks that each exists.
 */
export const END_TO_END_SUITES = [
  'apps/agent/src/fresh-clone.test.ts', // install: clones the repository and installs it
  'apps/agent/src/first-run.test.ts', // install: runs `npm run dev` / the built CLI as a new user would
  'apps/agent/src/zero-install.test.ts', // process: the stack with nothing but Node (embedded PostgreSQL)
  'apps/agent/src/cli.test.ts', // process: the CLI as processes
  'apps/agent/src/dev-stack-ports.test.ts', // process: restarts the built dev stack
  'apps/agent/src/dev-stack-restart.test.ts', // process: the built dev stack restarted under serve and chat
  'apps/agent/src/state-keys-ttl.test.ts', // process: a whole session through the built CLI, then every key
  'apps/agent/src/dream.test.ts', // process: `engram dream --force`, `memory history` and `restore` as processes
  'apps/agent/src/chat-serve.test.ts', // process: the built `engram chat` REPL driven through its stdin
  'apps/agent/src/mcp-stdio.test.ts', // process: spawns `engram mcp`
  'apps/agent/src/commands/hook-entry.test.ts', // process: `engram hook` processes and their background processes
  'apps/agent/src/claude-code-e2e.test.ts', // process: the real Claude Code binary with the plugin, hooks and workers
  'apps/agent/src/telemetry.test.ts', // process: a served turn with workers, exported to an OTLP receiver
  'apps/agent/src/telemetry-processes.test.ts', // process: serve and workers as processes, one trace across them
  'apps/agent/src/server/memory-stores.test.ts', // process: the SDK against engram serve on PostgreSQL
  'apps/agent/src/server/mcp-route.test.ts', // process: the MCP client against engram serve
  'apps/agent/src/sandbox.test.ts', // process: `engram sandbox` processes under bubblewrap
  'apps/agent/src/server/hosted-app.test.ts', // process: engram serve + workers end to end
  'apps/agent/src/server/compose.test.ts', // process: the compose file against the built images' contract
  'apps/agent/src/server/served-policy.test.ts', // soak: 1,000 writes each against a process flipping a symlink
  'apps/agent/src/commands/hook.test.ts', // crash: Redis stopped under `engram hook`, then the sweep recovers
  'apps/agent/src/memory/memory-outbox.test.ts', // crash: Redis stopped and restarted under turns
  'apps/workers/src/jobs/extract-crash.test.ts', // crash: SIGKILLs worker processes mid-job, restarts the engine
  'apps/workers/src/jobs/extract-staged-crash.test.ts', // crash: SIGKILLs staged worker processes mid-commit
  'apps/workers/src/jobs/dream-processes.test.ts', // process: dream workers as processes
  'packages/queue/src/embedded-postgres.test.ts', // process: launches embedded PostgreSQL servers, as root too
  'packages/queue/src/outage.test.ts', // crash: the engine's server stopped and restarted under workers
  'packages/queue/src/state/postgres-state-store-outage.test.ts', // crash: PostgreSQL stopped mid-call
  'packages/queue/src/state/redis-state-store-outage.test.ts', // crash: Redis stopped and restarted
  'packages/worker-service/src/redis-topologies.test.ts', // process: Redis Cluster, Sentinel and TLS servers
  'packages/worker-service/src/http/memory-browser.test.ts', // process: headless Chromium
  'packages/worker-service/src/concurrency.test.ts', // soak: 120 extraction forks at once in one process
  'packages/worker-service/src/jobs/session-memory-tokens.test.ts', // soak: two scripted 200-turn sessions
  'packages/agent-runtime/src/tools/search-race.test.ts', // soak: 4,000 searches against a process flipping a link
  'packages/agent-runtime/src/sandbox/symlink-race.test.ts', // soak: 400 writes, 1,000 reads against a process flipping links
  'packages/agent-runtime/src/sandbox/sandbox-limits.test.ts', // soak: a fork bomb, CPU, file and memory hogs under bubblewrap
  'packages/agent-runtime/src/model/threaded-transport-process.test.ts', // process: a script's model call as a process
  'packages/agent-sdk/src/query.test.ts', // process: the Agent SDK's bundled Claude Code binary
  'packages/worker-service/src/jobs/extract-staged-kill.test.ts', // crash: SIGKILLs processes at every staged commit step
] as const;

/** The packages' test configurations the fast loop (`vitest.fast.config.ts`) runs as its projects. */
export const FAST_LOOP_PACKAGES = ['apps/*/vitest.config.ts', 'packages/*/vitest.config.ts'] as const;

/**
 * Suites that leave process-wide state behind (environment, telemetry) and need no Redis or PostgreSQL: in a
 * package that shares one process between its files (`shareProcess`), each of these runs apart, in a process of
 * its own. Paths from the repository root.
 */
export const ISOLATED_SUITES = [
  // Starts this process's OpenTelemetry SDK, which stays the active telemetry after its shutdown.
  'packages/worker-service/src/logger-otlp.test.ts',
] as const;

/** The options of one package's suites (its `vitest.config.ts`). */
export interface EngramTestOptions {
  redis?: boolean;
  postgres?: boolean;
  testTimeout?: number;
  /**
   * Run a package's test files in one process instead of one process each: `always` for packages whose files
   * leave no process-wide state behind (the few that do are in `ISOLATED_SUITES`); `fast` for packages where some
   * end-to-end files do (apps/agent). Loading the modules once per file is most of a small file's cost: in
   * `npm test`, worker-service 222 → 157 s of CPU, agent-runtime 204 → 165 s.
   */
  shareProcess?: 'always' | 'fast';
}

// Tests resolve workspace packages to their TypeScript sources (the `source` export condition), so a
// package's tests never run against a stale dist/ of another package.
// Every run's temporary files live in one directory removed at the end (packages/testkit/src/tmp-global-setup.ts).
// `redis`/`postgres` start a real server once per run (packages/testkit/src/redis-global-setup.ts) for
// `inject('redisUrl')` / `inject('postgresUrl')`.
//
// Two ways to run: `npm test` runs each package's `vitest run` in its directory (turbo); `npm run test:fast`
// (ENGRAM_TEST_FAST=1) runs one Vitest from the repository root with every package as a project
// (`vitest.fast.config.ts`): one Vitest, one Redis and one PostgreSQL for the whole loop instead of twenty of each.
export function engramVitestConfig(dir: string, options: EngramTestOptions = {}) {
  const fast = process.env.ENGRAM_TEST_FAST === '1';
  const shared = options.shareProcess === 'always' || (options.shareProcess === 'fast' && fast);
  const services = { redis: !!options.redis, postgres: !!options.postgres };
  const apart = shared ? packageRelative(dir, ISOLATED_SUITES) : [];
  // The fast loop's root config runs the files kept apart as projects of their own (Vitest has no projects
  // within a project).
  if (apart.length === 0 || fast)
    return packageConfig(dir, options, services, { isolate: !shared, exclude: apart });
  return defineConfig({
    test: {
      projects: [
        packageConfig(dir, options, services, {
          isolate: false,
          exclude: apart,
          name: 'shared',
          groupOrder: 0,
        }),
        packageConfig(
          dir,
          {},
          { redis: false, postgres: false },
          { isolate: true, include: apart, name: 'apart', groupOrder: 1 },
        ),
      ],
    },
  });
}

/** The fast loop's projects beyond the packages' own: each of `ISOLATED_SUITES` in a process of its own. */
export function isolatedSuiteProjects() {
  return ISOLATED_SUITES.map((path) => {
    const dir = `${ROOT}${path.slice(0, path.indexOf('/src/'))}`;
    return packageConfig(
      dir,
      {},
      { redis: false, postgres: false },
      {
        isolate: true,
        include: packageRelative(dir, [path]),
        name: `${path} (apart)`,
      },
    );
  });
}

/** The paths (from the repository root) that lie in `dir`, relative to it. */
function packageRelative(dir: string, paths: readonly string[]): string[] {
  return paths.map((path) => relative(dir, `${ROOT}${path}`)).filter((path) => !path.startsWith('..'));
}

function packageConfig(
  dir: string,
  options: { testTimeout?: number },
  services: { redis: boolean; postgres: boolean },
  files: { isolate: boolean; include?: string[]; exclude?: string[]; name?: string; groupOrder?: number },
) {
  const fast = process.env.ENGRAM_TEST_FAST === '1';
  // The temporary-directory setup comes first, so its teardown (removing every temporary file) runs last.
  const globalSetup = [
    fileURLToPath(new URL('./packages/testkit/src/tmp-global-setup.ts', import.meta.url)),
    ...(services.redis || services.postgres
      ? [fileURLToPath(new URL('./packages/testkit/src/redis-global-setup.ts', import.meta.url))]
      : []),
  ];
  return defineConfig({
    root: dir,
    resolve: { conditions: ['source'] },
    ssr: { resolve: { conditions: ['source'] } },
    // globalSetup files run in Vitest's own `__vitest__` environment, which needs the same rule.
    environments: {
      __vitest__: {
        resolve: { conditions: ['source', 'node', 'import', 'default'], noExternal: [/@engram\//] },
      },
    },
    test: {
      ...(files.name ? { name: files.name } : {}),
      // In a package split into two projects the shared one runs first, then the files kept apart.
      ...(files.groupOrder !== undefined ? { sequence: { groupOrder: files.groupOrder } } : {}),
      include: files.include ?? ['src/**/*.test.ts'],
      // `npm run test:fast` (ENGRAM_TEST_FAST=1): this package's suites without the end-to-end tier.
      exclude: [
        ...configDefaults.exclude,
        ...(files.exclude ?? []),
        ...(fast ? packageRelative(dir, END_TO_END_SUITES) : []),
      ],
      environment: 'node',
      globalSetup,
      provide: { engramServices: services },
      testTimeout: options.testTimeout ?? 20_000,
      hookTimeout: 30_000,
      pool: 'forks',
      isolate: files.isolate,
    },
  });
}
