import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Vitest globalSetup: every temporary file of a test run lives in one directory, removed at teardown, so
// `npm test` leaves nothing in /tmp. TMPDIR points there before the test workers start, so os.tmpdir() in
// the tests, in what they spawn (the CLI, redis-server, PostgreSQL) and in the code under test all agree.

let dir: string | undefined;
let previous: string | undefined;

export function setup(): void {
  previous = process.env.TMPDIR;
  dir = mkdtempSync(join(tmpdir(), 'engram-test-run-'));
  // A root run's embedded PostgreSQL (user "postgres") must be able to enter directories below it.
  chmodSync(dir, 0o755);
  process.env.TMPDIR = dir;
}

export function teardown(): void {
  if (previous === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = previous;
  if (dir) rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  dir = undefined;
}
