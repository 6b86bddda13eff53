import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { Closer } from './bullmq-helpers.js';
import { type ModelServer, startModelServer } from './model-server.js';

// The lifecycle most integration test files share: one scripted model server for the file, started before
// its tests and closed after them; after each test, what the test deferred on `closer` is closed first (a
// worker service still calling the model), then (optionally) that every request was scripted is asserted,
// then the server's routes and recorded requests are reset.

export interface ModelServerFixture {
  /** The file's server (started in beforeAll: read it inside hooks and tests, not at import time). */
  readonly server: ModelServer;
  /** Closed after each test, before the server is reset. */
  readonly closer: Closer;
}

export interface ModelServerOptions {
  /** After each test (and its closer), assert that no request went unanswered by the script. */
  requireScripted?: boolean;
}

/** Registers the hooks in the calling test file (call it at the file's top level). */
export function useModelServer(opts: ModelServerOptions = {}): ModelServerFixture {
  const closer = new Closer();
  let started: ModelServer | undefined;
  beforeAll(async () => {
    started = await startModelServer();
  });
  afterEach(async () => {
    await closer.closeAll();
    if (opts.requireScripted) expect(started?.unscripted).toEqual([]);
    started?.reset();
  });
  afterAll(() => started?.close());
  return {
    closer,
    get server(): ModelServer {
      if (!started) throw new Error('the model server starts in beforeAll: use it inside hooks and tests');
      return started;
    },
  };
}
