import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModelServer } from '@engram/testkit/model-server';
import { useModelServer } from '@engram/testkit/model-server-hooks';
import { beforeAll, beforeEach } from 'vitest';
import { createModelClient, type ModelClient } from './model/client.js';

// Shared test fixtures: a fresh temporary directory per test and a model client bound to the testkit server.

export async function makeTempDir(
  prefix = 'engram-runtime-',
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await realpath(await mkdtemp(join(tmpdir(), prefix)));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export function clientFor(server: ModelServer, maxRetries = 2): ModelClient {
  return createModelClient({ apiKey: 'test', baseURL: server.url, maxRetries });
}

export interface ModelTestbed {
  /** The file's scripted model server (every request a test makes must be scripted). */
  readonly server: ModelServer;
  /** A model client bound to it. */
  readonly client: ModelClient;
  /** This test's temporary directory (removed after the test). */
  readonly dir: string;
}

/** Registers the hooks of a file whose tests talk to the scripted model from a fresh directory each. */
export function useModelTestbed(): ModelTestbed {
  const scripted = useModelServer({ requireScripted: true });
  let client: ModelClient | undefined;
  let dir: string | undefined;
  beforeAll(() => {
    client = clientFor(scripted.server);
  });
  beforeEach(async () => {
    const temp = await makeTempDir();
    dir = temp.dir;
    scripted.closer.defer(temp.cleanup);
  });
  const ready = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is set up in the hooks: use it inside tests`);
    return value;
  };
  return {
    get server() {
      return scripted.server;
    },
    get client() {
      return ready(client, 'the model client');
    },
    get dir() {
      return ready(dir, 'the test directory');
    },
  };
}
