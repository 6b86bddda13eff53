import { createModelClient, type ModelClient } from '@engram/agent-runtime/model/client';
import { scanMemoryDir } from '@engram/memory-core/memdir/scan';
import type { EngramPaths } from '@engram/memory-core/paths/memory-paths';
import { readMemoriesForSurfacing } from '@engram/memory-core/recall/read-for-surfacing';
import {
  DEFAULT_SELECTOR_TIMEOUT_MS,
  type MemorySelector,
  SelectorOutputError,
  selectRelevantMemories,
} from '@engram/memory-core/recall/select';
import { supersessionNotes } from '@engram/memory-core/recall/supersession';
import type { RecallPayload, RecallResult } from '@engram/queue/jobs/recall';
import type { HandlerContext } from '@engram/queue/worker';
import { PermanentJobError } from '@engram/queue/worker';
import type { WorkersConfig } from '../config.js';
import type { HandlerDeps } from '../service.js';
import { pathsForJob } from './job-paths.js';

// recall: choose up to five memories for the user's prompt with a small-model side query and read them for
// injection (docs/design.md §5). It degrades instead of failing: a slow, failing or confused selector hands the choice
// to the lexical ranking. The rules live in memory-core's recall/; this is the wiring.

export interface RecallDeps extends HandlerDeps {
  /** The selector's model client; build it with createRecallModelClient (no SDK retries). */
  client: ModelClient;
  /** Default DEFAULT_SELECTOR_TIMEOUT_MS (2 s). */
  selectorTimeoutMs?: number;
  /** Clock for the freshness headers. */
  now?: () => number;
}

/**
 * A client for the selector with SDK retries off: a retried side query would answer after the turn has
 * moved on, and the job's own timeout already falls back to the lexical ranking.
 */
export function createRecallModelClient(config: WorkersConfig): ModelClient {
  return createModelClient({
    // A local Anthropic-compatible server may not need a key; the SDK still requires a value.
    apiKey: config.anthropic.apiKey ?? 'unset',
    ...(config.anthropic.baseURL ? { baseURL: config.anthropic.baseURL } : {}),
    maxRetries: 0,
    // In this thread: a selector call is small and has a deadline (2 s), and a model thread's start (~0.3 s,
    // lazily on the first call) would eat into the first one's. Forks, which wait seconds, use the threads.
    threads: 0,
  });
}

/** The selector as a side query to the small model with structured output. */
export function modelSelector(client: ModelClient, model: string): MemorySelector {
  return async (request) => {
    const response = await client.sendSideQuery(
      {
        model,
        system: [{ type: 'text', text: request.system }],
        tools: [],
        messages: [{ role: 'user', content: request.user }],
        maxTokens: request.maxTokens,
        outputFormat: { type: 'json_schema', schema: request.schema },
      },
      { signal: request.signal },
    );
    const first = response.message.content.find((b) => b.type === 'text');
    const text = first?.type === 'text' ? first.text : '';
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new SelectorOutputError(
        `The selector reply is not JSON (${text.length} characters, stop reason ${response.message.stopReason}).`,
      );
    }
  };
}

const round2 = (ms: number) => Math.round(ms * 100) / 100;

export function createRecallHandler(deps: RecallDeps) {
  const { config, metrics, logger } = deps;
  const selector = modelSelector(deps.client, config.smallModel);
  const timeoutMs = deps.selectorTimeoutMs ?? DEFAULT_SELECTOR_TIMEOUT_MS;
  const now = deps.now ?? Date.now;
  return async (payload: RecallPayload, ctx: HandlerContext): Promise<RecallResult> => {
    const started = performance.now();
    const log = logger.child({
      queue: 'recall',
      jobId: ctx.job.id,
      sessionId: payload.sessionId,
      project: payload.projectDir,
    });
    let paths: EngramPaths;
    try {
      paths = pathsForJob(config, payload);
    } catch (error) {
      throw new PermanentJobError('INVALID_PATHS', (error as Error).message);
    }

    const scan = await scanMemoryDir(paths.memoryDir, { signal: ctx.signal });
    const scanned = performance.now();
    const selection = await selectRelevantMemories({
      query: payload.query,
      headers: scan.headers,
      alreadySurfaced: payload.alreadySurfaced,
      alreadyRead: payload.alreadyRead,
      recentTools: payload.recentTools,
      selector,
      timeoutMs,
      signal: ctx.signal,
    });
    const selected = performance.now();
    const read = await readMemoriesForSurfacing({
      memoryDir: paths.memoryDir,
      filenames: selection.selected.map((h) => h.filename),
      notes: supersessionNotes(selection.superseded),
      now: now(),
      signal: ctx.signal,
    });

    const latencyMs = performance.now() - started;
    const { outcome, fallbackReason } = selection;
    metrics.recalls.inc({ outcome });
    metrics.recallLatency.observe({ outcome }, latencyMs / 1000);
    log.info(
      {
        outcome,
        candidates: selection.candidates.length,
        selected: read.memories.map((m) => m.path),
        ...(fallbackReason ? { fallbackReason, fallbackDetail: selection.fallbackDetail } : {}),
        ...(selection.unknownPicks.length ? { ignoredPicks: selection.unknownPicks.length } : {}),
        ...(selection.linked.length ? { linked: selection.linked.map((l) => `${l.from} -> ${l.to}`) } : {}),
        ...(selection.superseded.length
          ? { superseded: selection.superseded.map((s) => `${s.older} -> ${s.newer} (${s.reason})`) }
          : {}),
        ...(read.dropped.length ? { dropped: read.dropped.map((d) => `${d.path}: ${d.reason}`) } : {}),
        latencyMs: Math.round(latencyMs),
        phasesMs: {
          scan: round2(scanned - started),
          select: round2(selected - scanned),
          read: round2(started + latencyMs - selected),
        },
      },
      'recall done',
    );
    return {
      outcome,
      attachments: read.memories,
      latencyMs,
      ...(fallbackReason ? { fallbackReason } : {}),
    };
  };
}
