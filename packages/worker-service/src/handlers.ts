import { createModelClient } from '@engram/agent-runtime/model/client';
import { createDreamHandler } from './jobs/dream.js';
import { createExtractHandler } from './jobs/extract.js';
import { isModelConfigured, modelNotConfigured } from './jobs/model-preflight.js';
import { createRecallHandler, createRecallModelClient } from './jobs/recall.js';
import { createReconcileHandler } from './jobs/reconcile.js';
import { createSessionMemoryHandler } from './jobs/session-memory.js';
import { createTeamSyncHandler } from './jobs/team-sync.js';
import type { HandlerDeps, WorkerHandlers } from './service.js';

// Composition of the job handlers this build runs, with the shared model client.

/**
 * With no model configured, a memory job that needs one fails at once with that reason, before it reads or
 * changes anything (its cursor and outbox stay as they are, so a later job redoes it once a model is set).
 */
function needsModel<P, R, C>(configured: boolean, handler: (payload: P, ctx: C) => Promise<R>) {
  if (configured) return handler;
  return async (_payload: P, _ctx: C): Promise<R> => {
    throw modelNotConfigured();
  };
}

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
  const configured = isModelConfigured(anthropic);
  return {
    extract: needsModel(configured, createExtractHandler({ ...deps, client })),
    'session-memory': needsModel(configured, createSessionMemoryHandler({ ...deps, client })),
    // Consolidation checks the model itself, after its gates (a dream that is not due needs none).
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
