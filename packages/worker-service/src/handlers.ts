import { createModelClient } from '@engram/agent-runtime/model/client';
import { createDreamHandler } from './jobs/dream.js';
import { createExtractHandler } from './jobs/extract.js';
import { createRecallHandler, createRecallModelClient } from './jobs/recall.js';
import { createReconcileHandler } from './jobs/reconcile.js';
import { createSessionMemoryHandler } from './jobs/session-memory.js';
import { createTeamSyncHandler } from './jobs/team-sync.js';
import type { HandlerDeps, WorkerHandlers } from './service.js';

// Composition of the job handlers this build runs, with the shared model client.

export function createHandlers(deps: HandlerDeps): WorkerHandlers {
  const { anthropic } = deps.config;
  const client = createModelClient({
    // A local Anthropic-compatible server may not need a key; the SDK still requires a value.
    apiKey: anthropic.apiKey ?? 'unset',
    ...(anthropic.baseURL ? { baseURL: anthropic.baseURL } : {}),
    // BullMQ owns retries (backoff with jitter, visible on the job); the SDK retries at most once inside a job.
    maxRetries: anthropic.maxRetries,
    // The SDK's requests run in model threads, off the thread that runs the jobs (docs/hosted-api.md, sizing).
    threads: anthropic.threads,
  });
  const recallClient = createRecallModelClient(deps.config);
  deps.onStop?.(async () => {
    await Promise.all([client.close?.(), recallClient.close?.()]);
  });
  return {
    extract: createExtractHandler({ ...deps, client }),
    'session-memory': createSessionMemoryHandler({ ...deps, client }),
    dream: createDreamHandler({ ...deps, client }),
    // The selector gets its own client: SDK retries off (a retried side query would answer too late).
    recall: createRecallHandler({
      ...deps,
      client: recallClient,
      selectorTimeoutMs: deps.config.recallTimeoutMs,
    }),
    ...(deps.producer ? { reconcile: createReconcileHandler({ ...deps, producer: deps.producer }) } : {}),
    'team-sync': createTeamSyncHandler(deps),
  };
}
