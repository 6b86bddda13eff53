import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModelServer } from '@engram/testkit/model-server';
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
