import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type AutoCompactOutcome,
  maybeAutoCompact,
  type SessionMemorySource,
  waitForSessionMemoryUpdate,
} from '@engram/agent-runtime/compact/auto-compact';
import type { CompactionResult } from '@engram/agent-runtime/compact/compaction';
import { compactWithModel } from '@engram/agent-runtime/compact/llm-compact';
import { cacheSafeParamsPathFor, saveCacheSafeParams } from '@engram/agent-runtime/fork/cache-safe-params';
import { runQueryLoop } from '@engram/agent-runtime/loop/query-loop';
import { createModelClient, type ModelClient } from '@engram/agent-runtime/model/client';
import { tokenCountWithEstimation } from '@engram/agent-runtime/model/tokens';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { defaultTools, toolDefinitions } from '@engram/agent-runtime/tools/registry';
import { allowAll } from '@engram/agent-runtime/tools/tool';
import { type ChainEntry, createUserEntry } from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import { type EngramPaths, engramPathsFor } from '@engram/memory-core/paths/memory-paths';
import { sanitizePath } from '@engram/memory-core/paths/sanitize';
import { SESSION_MEMORY_PROMPT_OPENER } from '@engram/memory-core/session-memory/prompt';
import { readSessionMemoryForCompact } from '@engram/memory-core/session-memory/summary-file';
import { DEFAULT_SESSION_MEMORY_TEMPLATE } from '@engram/memory-core/session-memory/template';
import {
  countToolCallsSince,
  type SessionMemoryThresholds,
  shouldUpdateSessionMemory,
} from '@engram/memory-core/session-memory/trigger';
import type { QueueEngine } from '@engram/queue/engine';
import type { SessionMemoryPayload } from '@engram/queue/jobs/session-memory';
import type { JobProducer } from '@engram/queue/producer';
import { SessionState } from '@engram/queue/state/session-state';
import type { ModelServer } from '@engram/testkit/model-server';
import { PARENT_MODEL, PARENT_SYSTEM, USER_CONTEXT } from '../testing/foreground.test-helpers.js';

// A foreground for session-memory tests: real turns through the runtime's query loop against the scripted
// model server, the transcript on disk, cache-safe params saved, and — after every model reply — the
// session-memory trigger decided and the job enqueued exactly as docs/design.md §5 says. Compaction runs through
// agent-runtime's maybeAutoCompact with the notes the workers keep.

export const MAX_TOKENS = 8_192;

export interface ReplyRecord {
  index: number;
  uuid: string;
  seq: number;
  contextTokens: number;
  hadToolCalls: boolean;
  enqueued: boolean;
}

export interface SmSessionOptions {
  engine: QueueEngine;
  producer: JobProducer;
  engramHome?: string;
  thresholds?: Partial<SessionMemoryThresholds>;
  /** Called with each enqueued job's id (tests wait for it to keep the run deterministic). */
  onEnqueued?: (jobId: string, reply: ReplyRecord) => Promise<void> | void;
  /** Don't trigger session memory at all (the "without session memory" baseline). */
  sessionMemory?: boolean;
}

export interface SmSession {
  engramHome: string;
  cwd: string;
  sessionId: string;
  paths: EngramPaths;
  summaryPath: string;
  store: TranscriptStore;
  client: ModelClient;
  state: SessionState;
  /** The live chain (what the next request is rendered from). */
  live: ChainEntry[];
  replies: ReplyRecord[];
  /** Runs one user turn (a tool loop until a reply without tool calls). */
  turn(prompt: string, opts?: { messages?: readonly ChainEntry[] }): Promise<void>;
  /** Appends compaction output, makes its live chain current and resets the trigger baselines. */
  applyCompaction(result: CompactionResult): Promise<void>;
  /** maybeAutoCompact with the workers' notes first and a model summary as the fallback. */
  autoCompact(opts: {
    threshold: number;
    force?: boolean;
    entries?: readonly ChainEntry[];
  }): Promise<AutoCompactOutcome>;
  sessionMemorySource(): SessionMemorySource;
  payload(reply: { uuid: string; seq: number }, contextTokens?: number): SessionMemoryPayload;
  compactionFailures: number;
}

export function createSmSession(server: ModelServer, opts: SmSessionOptions): SmSession {
  const engramHome = opts.engramHome ?? mkdtempSync(join(tmpdir(), 'engram-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'engram-project-'));
  const sessionId = `s${Math.random().toString(36).slice(2, 10)}`;
  const paths = engramPathsFor({ engramHome, cwd, projectRoot: cwd });
  const transcriptPath = paths.transcriptPath(sessionId);
  const store = new TranscriptStore(transcriptPath);
  const client = createModelClient({ apiKey: 'test', baseURL: server.url, maxRetries: 0 });
  const tools = defaultTools();
  const ref = { projectDir: sanitizePath(cwd), transcriptDir: sanitizePath(cwd) };
  const state = new SessionState(opts.engine.state, { ...ref, sessionId });
  let seq = 0;
  // The foreground's own trigger baseline, moved when it enqueues (the reference moves its cursor then too).
  const local = { initialized: false, tokens: 0, cursor: undefined as string | undefined };

  const append = async (entries: readonly ChainEntry[]) => {
    const written = await store.append(entries);
    seq += written.length;
  };

  const session: SmSession = {
    engramHome,
    cwd,
    sessionId,
    paths,
    summaryPath: paths.sessionMemoryPath(sessionId),
    store,
    client,
    state,
    live: [],
    replies: [],
    compactionFailures: 0,
    payload(reply, contextTokens) {
      return {
        sessionId,
        ...ref,
        leafUuid: reply.uuid,
        leafSeq: reply.seq,
        ...(contextTokens !== undefined ? { contextTokens } : {}),
        ...(opts.thresholds ? { thresholds: opts.thresholds as SessionMemoryPayload['thresholds'] } : {}),
        requestedAt: new Date().toISOString(),
      };
    },
    async turn(prompt, turnOpts = {}) {
      const base = turnOpts.messages ?? session.live;
      const user = createUserEntry({ sessionId, cwd, parentUuid: base.at(-1)?.uuid ?? null }, prompt);
      await append([user]);
      session.live = [...base, user];
      await runQueryLoop({
        client,
        model: PARENT_MODEL,
        system: PARENT_SYSTEM,
        tools,
        maxTokens: MAX_TOKENS,
        messages: session.live,
        userContext: USER_CONTEXT,
        canUseTool: allowAll,
        cwd,
        sessionId,
        boundary: ATTENDED,
        toolResultsDir: paths.toolResultsDir(sessionId),
        onMessage: async (entry) => {
          await append([entry]);
          session.live.push(entry);
        },
        afterReply: async (reply, st) => {
          if (session.replies.length === 0) {
            await saveCacheSafeParams(cacheSafeParamsPathFor(transcriptPath), {
              model: PARENT_MODEL,
              system: PARENT_SYSTEM,
              tools: toolDefinitions(tools),
              userContext: USER_CONTEXT,
              maxTokens: MAX_TOKENS,
            });
          }
          const leaf = st.newMessages.at(-1)!;
          const hadToolCalls = reply.message.content.some((b) => b.type === 'tool_use');
          const record: ReplyRecord = {
            index: session.replies.length,
            uuid: leaf.uuid,
            seq,
            contextTokens: tokenCountWithEstimation(session.live),
            hadToolCalls,
            enqueued: false,
          };
          session.replies.push(record);
          if (opts.sessionMemory === false) return;
          const decision = shouldUpdateSessionMemory({
            initialized: local.initialized,
            contextTokens: record.contextTokens,
            tokensAtLastUpdate: local.tokens,
            toolCallsSinceLastUpdate: countToolCallsSince(session.live, local.cursor),
            lastReplyHadToolCalls: hadToolCalls,
            thresholds: opts.thresholds,
          });
          if (decision.initialize) {
            local.initialized = true;
            await state.updateSessionMemory({ initialized: true });
          }
          if (!decision.update) return;
          local.tokens = record.contextTokens;
          local.cursor = leaf.uuid;
          record.enqueued = true;
          const receipt = await opts.producer.enqueue(
            'session-memory',
            session.payload(record, record.contextTokens),
          );
          await opts.onEnqueued?.(receipt.jobId, record);
        },
      });
    },
    async applyCompaction(result) {
      await append(result.newEntries);
      session.live = [...result.live];
      // The old "last summarised" message is gone from the live chain. After a compaction from the notes,
      // the notes cover exactly what the summary message replaced; after a model summary, nothing is known.
      // Growth is measured from the compacted size again, or the notes would stall until the context regrew.
      await state.updateSessionMemory({
        lastSummarizedUuid: result.via === 'session-memory' ? result.summary.uuid : undefined,
        tokensAtLastUpdate: result.postTokens,
      });
      local.cursor = undefined;
      local.tokens = result.postTokens;
    },
    sessionMemorySource() {
      return {
        waitForInFlight: async () => {
          await waitForSessionMemoryUpdate({ readMarkers: () => state.sessionMemory(), pollMs: 50 });
        },
        read: async () => {
          const notes = await readSessionMemoryForCompact(
            session.summaryPath,
            DEFAULT_SESSION_MEMORY_TEMPLATE,
          );
          if (!notes) return undefined;
          const { lastSummarizedUuid } = await state.sessionMemory();
          return { ...notes, lastSummarizedUuid };
        },
      };
    },
    async autoCompact({ threshold, force, entries = session.live }) {
      const outcome = await maybeAutoCompact({
        entries,
        contextTokens: tokenCountWithEstimation(entries),
        threshold,
        ...(opts.sessionMemory === false ? {} : { sessionMemory: session.sessionMemorySource() }),
        compactWithModel: (entries, ctx) =>
          compactWithModel({
            client,
            params: {
              model: PARENT_MODEL,
              system: PARENT_SYSTEM,
              tools: toolDefinitions(tools),
              maxTokens: MAX_TOKENS,
              userContext: USER_CONTEXT,
            },
            entries,
            transcriptPath,
            ...ctx,
          }),
        consecutiveFailures: session.compactionFailures,
        transcriptPath,
        ...(force ? { force } : {}),
      });
      session.compactionFailures = outcome.consecutiveFailures;
      if (outcome.compacted) await session.applyCompaction(outcome.result);
      return outcome;
    },
  };
  return session;
}

export function isSessionMemoryRequest(body: {
  messages: Array<{ role: string; content: unknown }>;
}): boolean {
  return JSON.stringify(body.messages).includes(SESSION_MEMORY_PROMPT_OPENER);
}

export const COMPACT_PROMPT_MARK = 'Write a detailed summary of the conversation so far';

export function isCompactRequest(body: { messages: Array<{ role: string; content: unknown }> }): boolean {
  return JSON.stringify(body.messages.at(-1) ?? '').includes(COMPACT_PROMPT_MARK);
}
