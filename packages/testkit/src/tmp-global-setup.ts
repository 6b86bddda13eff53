import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { takeShared } from './run-shared.js';

// Vitest globalSetup: every temporary file of a test run lives in one directory, removed at teardown, so
// `npm test` leaves nothing in /tmp. TMPDIR points there before the test workers start, so os.tmpdir() in
// the tests, in what they spawn (the CLI, redis-server, PostgreSQL) and in the code under test all agree.
// A run of many projects shares the one directory (`takeShared`).

export async function setup(): Promise<() => Promise<void>> {
  const run = takeShared(
    'run-directory',
    async () => {
      const previous = process.env.TMPDIR;
      const dir = mkdtempSync(join(tmpdir(), 'engram-test-run-'));
      // A root run's embedded PostgreSQL (user "postgres") must be able to enter directories below it.
      chmodSync(dir, 0o755);
      process.env.TMPDIR = dir;
      return { dir, previous };
    },
    ({ dir, previous }) => {
      if (previous === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previous;
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    },
  );
  await run.value;
  return run.release;
}
