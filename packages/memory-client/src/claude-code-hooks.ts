import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { buildChain } from '@engram/agent-runtime/transcript/chain';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import {
  type HookEvent,
  type HookInput,
  hookSurfacedMemories,
  lastTurn,
  pickStopLeaf,
  recallContext,
} from '@engram/memory-core/hooks/claude-code-hook';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { collectSurfacedMemories, prefetchSkipReason } from '@engram/memory-core/recall/prefetch';
import type { MemoryQueue, MemoryWorkStatus, SessionRef } from './memory-queue.js';
import { awaitRecall } from './queued-recall.js';
import type { TeamSyncConfig } from './team-sync-trigger.js';

// What Claude Code's hook events do for memory, once the event's input is parsed: shared by `engram hook
// <event>` (apps/agent, one process per hook) and the Agent SDK's hook callbacks (@engram/agent-sdk, in the
// host process). Stop enqueues extraction from Claude Code's own transcript (cursor + hasMemoryWritesSince
// rules of MemoryQueue.afterTurn); UserPromptSubmit answers with recalled memories (bounded wait);
// SessionStart pulls team memory when configured; PreCompact / SessionEnd hand the session over. Nothing
// here throws for a queue problem: every outcome is a note (and, for the context events, a context text).

/** How long Stop waits for the turn's last entries to land (Claude Code writes them after firing Stop). */
export const STOP_SETTLE_MS = 600;
/** How long UserPromptSubmit waits for the recall selector before answering with nothing. */
export const RECALL_WAIT_MS = 4_000;

/** PreCompact / SessionEnd: update the notes on any growth (the payload's thresholds must be positive). */
const FORCED_SESSION_MEMORY = { initTokens: 1, minGrowthTokens: 1, toolCalls: 1 };

export interface ClaudeCodeHookOptions {
  /** Engram's home, which must be Claude Code's config directory: the workers read the transcript there. */
  engramHome: string;
  memoryDirOverride?: string | undefined;
  /** The producer side; the caller owns it (one per hook process, or one for a whole Agent SDK host). */
  memory: MemoryQueue;
  /** The model and output budget of this session's memory forks (saved beside the transcript once). */
  fork: { model: string; maxOutputTokens: number };
  /** Team memory sync; SessionStart pulls only when it is set. */
  teamSync?: TeamSyncConfig | undefined;
  /** The hosted tenant that owns the session (from the authenticated caller, never from the hook input). */
  tenant?: string | undefined;
  stopSettleMs?: number;
  recallWaitMs?: number;
}

export interface ClaudeCodeHookResult {
  /** Text for the model (`additionalContext`), for UserPromptSubmit and SessionStart; absent for none. */
  context?: string;
  /** One line for the person: what happened or why nothing did (empty when there is nothing to say). */
  note: string;
}

/**
 * The memory work of one hook event. The transcript must be the one Engram's paths name for the session
 * under `engramHome` (the workers read it there); another path is refused with a note, and nothing is done.
 */
export async function handleClaudeCodeHook(
  opts: ClaudeCodeHookOptions,
  event: HookEvent,
  input: HookInput,
): Promise<ClaudeCodeHookResult> {
  const paths = await resolveEngramPaths({
    engramHome: opts.engramHome,
    cwd: input.cwd,
    ...(opts.memoryDirOverride ? { memoryDirOverride: opts.memoryDirOverride } : {}),
  });
  const expected = paths.transcriptPath(input.session_id);
  if (resolve(input.transcript_path) !== expected) {
    return {
      note: `engram hook ${event}: the transcript ${input.transcript_path} is not under ENGRAM_HOME (${opts.engramHome}); set ENGRAM_HOME to Claude Code's config directory. Nothing done.`,
    };
  }
  const ref: SessionRef = {
    sessionId: input.session_id,
    paths,
    ...(opts.tenant ? { tenant: opts.tenant } : {}),
  };
  switch (event) {
    case 'Stop':
      return stop(opts, ref, input);
    case 'UserPromptSubmit':
      return userPromptSubmit(opts, ref, input);
    case 'SessionStart':
      return sessionStart(opts, ref);
    case 'PreCompact':
    case 'SessionEnd':
      return handOver(opts, ref, input, event);
  }
}

async function readSettled(path: string, waitMs: number) {
  const store = new TranscriptStore(path);
  const started = Date.now();
  for (;;) {
    const { entries } = await store.readAll();
    const leaf = pickStopLeaf(entries);
    // No message yet counts as unsettled too: in the Agent SDK's sessions Claude Code may fire Stop before
    // the turn's first entry reaches the transcript file.
    if (leaf?.settled || Date.now() - started >= waitMs) return { entries, leaf };
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function describeWork(
  status: MemoryWorkStatus | { status: string; reason?: string; jobId?: string },
): string {
  if (status.status === 'queued') return `queued (job ${(status as { jobId: string }).jobId})`;
  const reason = (status as { reason?: string }).reason;
  return `${status.status}${reason ? `: ${reason}` : ''}`;
}

/**
 * The fork repeats its parent's system prompt and tools (cache-safe parameters, saved beside the transcript);
 * Claude Code keeps its own to itself, so a Claude Code session's forks get Engram's tools and a short system
 * prompt, written once per session. Only the first Stop of a session pays for loading the tool registry.
 */
export async function ensureClaudeCodeParams(
  transcriptPath: string,
  fork: { model: string; maxOutputTokens: number },
): Promise<void> {
  const { cacheSafeParamsPathFor, saveCacheSafeParams } = await import(
    '@engram/agent-runtime/fork/cache-safe-params'
  );
  const path = cacheSafeParamsPathFor(transcriptPath);
  if (existsSync(path)) return;
  const { defaultTools, toolDefinitions } = await import('@engram/agent-runtime/tools/registry');
  await saveCacheSafeParams(path, {
    model: fork.model,
    system: [
      {
        type: 'text',
        text: 'You are reviewing a Claude Code session (its transcript follows) to maintain its long-term memory.',
      },
    ],
    tools: toolDefinitions(defaultTools()),
    maxTokens: fork.maxOutputTokens,
  });
}

async function stop(
  opts: ClaudeCodeHookOptions,
  ref: SessionRef,
  input: HookInput,
): Promise<ClaudeCodeHookResult> {
  const { entries, leaf } = await readSettled(input.transcript_path, opts.stopSettleMs ?? STOP_SETTLE_MS);
  if (!leaf) return { note: 'engram: no message in the transcript yet; nothing to extract.' };
  await ensureClaudeCodeParams(input.transcript_path, opts.fork);
  const chain = buildChain(entries, leaf.leafUuid).live as ChainEntry[];
  const status = await opts.memory.afterTurn(ref, lastTurn(chain), {
    leafUuid: leaf.leafUuid,
    leafSeq: leaf.leafSeq,
  });
  return { note: `engram: memory extraction ${describeWork(status)}` };
}

async function handOver(
  opts: ClaudeCodeHookOptions,
  ref: SessionRef,
  input: HookInput,
  event: 'PreCompact' | 'SessionEnd',
): Promise<ClaudeCodeHookResult> {
  const { memory } = opts;
  const { entries, leaf } = await readSettled(input.transcript_path, 0);
  if (!leaf) return { note: 'engram: no message in the transcript yet; nothing to hand over.' };
  await ensureClaudeCodeParams(input.transcript_path, opts.fork);
  const chain = buildChain(entries, leaf.leafUuid).live as ChainEntry[];
  // The last turn's extraction (its Stop may have seen the transcript before its last entries landed) ...
  const extract = await memory.afterTurn(ref, lastTurn(chain), {
    leafUuid: leaf.leafUuid,
    leafSeq: leaf.leafSeq,
  });
  // ... and the session's notes, forced: compaction or the end of the session is the last chance for them.
  // The lowest thresholds the payload allows (each must be positive) with the context measured by the worker
  // from the transcript: any growth since the last update is enough.
  const notes = await memory.enqueue('session-memory', {
    sessionId: ref.sessionId,
    ...memory.projectRef(ref),
    leafUuid: leaf.leafUuid,
    leafSeq: leaf.leafSeq,
    thresholds: FORCED_SESSION_MEMORY,
    requestedAt: new Date().toISOString(),
  });
  return {
    note: `engram ${event}: extraction ${describeWork(extract)}; session memory ${describeWork(notes)}`,
  };
}

async function userPromptSubmit(
  opts: ClaudeCodeHookOptions,
  ref: SessionRef,
  input: HookInput,
): Promise<ClaudeCodeHookResult> {
  const { memory } = opts;
  const waitMs = opts.recallWaitMs ?? RECALL_WAIT_MS;
  const prompt = input.prompt ?? '';
  const { entries } = await new TranscriptStore(input.transcript_path)
    .readAll()
    .catch(() => ({ entries: [] as ChainEntry[] }));
  const chain = entries.length ? (buildChain(entries).live as ChainEntry[]) : [];
  const surfaced = collectSurfacedMemories(chain);
  // What earlier prompts' hooks recalled counts too (Claude Code keeps it as hook context, not as its own).
  const byHook = hookSurfacedMemories(chain, ref.paths.memoryDir);
  for (const p of byHook.paths) surfaced.paths.add(p);
  const skip = prefetchSkipReason(prompt, surfaced.bytes + byHook.bytes);
  if (skip) return { note: '' };
  const recall = await awaitRecall(memory, ref, {
    query: prompt,
    alreadySurfaced: [...surfaced.paths],
    waitMs,
    // The same prompt's recall started by another hook (the hook installed twice, a re-run) is reused.
    reuse: true,
  });
  if (recall.status !== 'answered') return { note: `engram: ${recall.reason}; no memories added.` };
  const attachments = recall.result.attachments;
  if (attachments.length === 0) return { note: '' };
  return { context: recallContext(ref.paths.memoryDir, attachments), note: '' };
}

async function sessionStart(opts: ClaudeCodeHookOptions, ref: SessionRef): Promise<ClaudeCodeHookResult> {
  if (!opts.teamSync) return { note: '' };
  const { TeamSyncTrigger, describeTeamSync } = await import('./team-sync-trigger.js');
  const status = await new TeamSyncTrigger(opts.memory, opts.teamSync).atSessionStart(
    ref.paths,
    ref.sessionId,
    ref.tenant,
  );
  const text = describeTeamSync(status);
  if (status.status === 'pulled' && text) return { context: `Engram team memory: ${text}`, note: text };
  return { note: text ? `engram: ${text}` : '' };
}
