import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Vitest globalSetup: every temporary file of a test run lives in one directory, removed at teardown, so
// `npm test` leaves nothing in /tmp. TMPDIR points there before the test workers start, so os.tmpdir() in
// the tests, in what they spawn (the CLI, redis-server, PostgreSQL) and in the code under test all agree.
// In a run of many projects (`npm run test:fast`) every project's setup calls this in the one Vitest process:
// the first makes the directory, the last teardown removes it (the count lives on globalThis, which the
// projects share even where each loads its own copy of this module).

interface RunDirectory {
  dir: string;
  previous: string | undefined;
  users: number;
}
const KEY = Symbol.for('engram.test.runDirectory');
const shared = globalThis as { [KEY]?: RunDirectory };

export function setup(): void {
  const run = shared[KEY];
  if (run) {
    run.users += 1;
    return;
  }
  const previous = process.env.TMPDIR;
  const dir = mkdtempSync(join(tmpdir(), 'engram-test-run-'));
  // A root run's embedded PostgreSQL (user "postgres") must be able to enter directories below it.
  chmodSync(dir, 0o755);
  process.env.TMPDIR = dir;
  shared[KEY] = { dir, previous, users: 1 };
}

export function teardown(): void {
  const run = shared[KEY];
  if (!run) return;
  run.users -= 1;
  if (run.users > 0) return;
  shared[KEY] = undefined;
  if (run.previous === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = run.previous;
  rmSync(run.dir, { recursive: true, force: true, maxRetries: 3 });
}
