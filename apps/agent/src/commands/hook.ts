import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { buildChain } from '@engram/agent-runtime/transcript/chain';
import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { TranscriptStore } from '@engram/agent-runtime/transcript/store';
import {
  additionalContextOutput,
  type HookEvent,
  type HookInput,
  hookSurfacedMemories,
  lastTurn,
  parseHookInput,
  pickStopLeaf,
  recallContext,
} from '@engram/memory-core/hooks/claude-code-hook';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { collectSurfacedMemories, prefetchSkipReason } from '@engram/memory-core/recall/prefetch';
import type { AgentConfig } from '../config.js';
import { MemoryQueue, type SessionRef } from '../memory/memory-queue.js';
import { awaitRecall } from '../memory/queued-recall.js';
import { EXIT, type Output } from './output.js';

// `engram hook <event>`: Claude Code's hook commands. Claude Code's home is Engram's home here (ENGRAM_HOME
// defaults to CLAUDE_CONFIG_DIR or ~/.claude for hooks), so the workers read Claude Code's own transcript and
// write Claude Code's own memory directory. A hook never breaks Claude Code: every failure exits 0 with one
// line on stderr (exit 2 would drop the prompt or loop the turn), and durable work waits in the outbox.

/** How long Stop waits for the turn's last entries to land (Claude Code writes them after firing Stop). */
const STOP_SETTLE_MS = 600;
/** How long UserPromptSubmit waits for the recall selector before answering with nothing. */
const RECALL_WAIT_MS = 4_000;

export { claudeHome } from './claude-home.js';

export async function readStdin(stream: NodeJS.ReadableStream = process.stdin): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

export interface HookResult {
  /** What the hook printed on stdout (Claude Code's answer channel), possibly empty. */
  stdout: string;
  /** One line for the person (stderr): what happened or why nothing did. */
  note: string;
}

export async function hookCommand(
  config: AgentConfig,
  event: HookEvent,
  inputText: string,
  io: Output,
): Promise<number> {
  let result: HookResult;
  try {
    result = await runHook(config, event, inputText);
  } catch (error) {
    result = { stdout: '', note: `engram hook ${event}: ${(error as Error).message}; nothing done.` };
  }
  if (result.stdout) io.out(result.stdout);
  if (result.note) io.err(`${result.note}\n`);
  return EXIT.ok;
}

export async function runHook(config: AgentConfig, event: HookEvent, inputText: string): Promise<HookResult> {
  const parsed = parseHookInput(inputText, event);
  if (!parsed.ok) return { stdout: '', note: `engram hook ${event}: ${parsed.reason}; nothing done.` };
  const input = parsed.input;
  const paths = await resolveEngramPaths({
    engramHome: config.engramHome,
    cwd: input.cwd,
    ...(config.memoryDirOverride ? { memoryDirOverride: config.memoryDirOverride } : {}),
  });
  const expected = paths.transcriptPath(input.session_id);
  if (resolve(input.transcript_path) !== expected) {
    return {
      stdout: '',
      note: `engram hook ${event}: the transcript ${input.transcript_path} is not under ENGRAM_HOME (${config.engramHome}); set ENGRAM_HOME to Claude Code's config directory. Nothing done.`,
    };
  }
  const ref: SessionRef = { sessionId: input.session_id, paths };
  const memory = new MemoryQueue(config);
  try {
    switch (event) {
      case 'Stop':
        return await stop(config, memory, ref, input);
      case 'UserPromptSubmit':
        return await userPromptSubmit(memory, ref, input);
      case 'SessionStart':
        return await sessionStart(config, memory, ref);
      case 'PreCompact':
      case 'SessionEnd':
        return await handOver(config, memory, ref, input, event);
    }
  } finally {
    await memory.close().catch(() => {});
  }
}

async function readSettled(path: string, waitMs: number) {
  const store = new TranscriptStore(path);
  const started = Date.now();
  for (;;) {
    const { entries } = await store.readAll();
    const leaf = pickStopLeaf(entries);
    if (!leaf || leaf.settled || Date.now() - started >= waitMs) return { entries, leaf };
    await new Promise((r) => setTimeout(r, 50));
  }
}

function describe(status: { status: string; reason?: string; jobId?: string }): string {
  if (status.status === 'queued') return `queued (job ${status.jobId})`;
  return `${status.status}${status.reason ? `: ${status.reason}` : ''}`;
}

/**
 * The fork repeats its parent's system prompt and tools (cache-safe parameters, saved beside the transcript);
 * Claude Code keeps its own to itself, so a Claude Code session's forks get Engram's tools and a short system
 * prompt, written once per session. Only the first Stop of a session pays for loading the tool registry.
 */
export async function ensureClaudeCodeParams(config: AgentConfig, transcriptPath: string): Promise<void> {
  const { cacheSafeParamsPathFor, saveCacheSafeParams } = await import(
    '@engram/agent-runtime/fork/cache-safe-params'
  );
  const path = cacheSafeParamsPathFor(transcriptPath);
  if (existsSync(path)) return;
  const { defaultTools, toolDefinitions } = await import('@engram/agent-runtime/tools/registry');
  await saveCacheSafeParams(path, {
    model: config.model,
    system: [
      {
        type: 'text',
        text: 'You are reviewing a Claude Code session (its transcript follows) to maintain its long-term memory.',
      },
    ],
    tools: toolDefinitions(defaultTools()),
    maxTokens: config.maxOutputTokens,
  });
}

async function stop(
  config: AgentConfig,
  memory: MemoryQueue,
  ref: SessionRef,
  input: HookInput,
): Promise<HookResult> {
  const { entries, leaf } = await readSettled(input.transcript_path, STOP_SETTLE_MS);
  if (!leaf) return { stdout: '', note: 'engram: no message in the transcript yet; nothing to extract.' };
  await ensureClaudeCodeParams(config, input.transcript_path);
  const chain = buildChain(entries, leaf.leafUuid).live as ChainEntry[];
  const status = await memory.afterTurn(ref, lastTurn(chain), {
    leafUuid: leaf.leafUuid,
    leafSeq: leaf.leafSeq,
  });
  return { stdout: '', note: `engram: memory extraction ${describe(status)}` };
}

async function handOver(
  config: AgentConfig,
  memory: MemoryQueue,
  ref: SessionRef,
  input: HookInput,
  event: 'PreCompact' | 'SessionEnd',
): Promise<HookResult> {
  const { entries, leaf } = await readSettled(input.transcript_path, 0);
  if (!leaf) return { stdout: '', note: 'engram: no message in the transcript yet; nothing to hand over.' };
  await ensureClaudeCodeParams(config, input.transcript_path);
  const chain = buildChain(entries, leaf.leafUuid).live as ChainEntry[];
  // The last turn's extraction (its Stop may have seen the transcript before its last entries landed) ...
  const extract = await memory.afterTurn(ref, lastTurn(chain), {
    leafUuid: leaf.leafUuid,
    leafSeq: leaf.leafSeq,
  });
  // ... and the session's notes, forced: compaction or the end of the session is the last chance for them.
  const notes = await memory.enqueue('session-memory', {
    sessionId: ref.sessionId,
    ...memory.projectRef(ref),
    leafUuid: leaf.leafUuid,
    leafSeq: leaf.leafSeq,
    contextTokens: 0,
    thresholds: { initTokens: 0, minGrowthTokens: 0, toolCalls: 0 },
    requestedAt: new Date().toISOString(),
  });
  return {
    stdout: '',
    note: `engram ${event}: extraction ${describe(extract)}; session memory ${describe(notes)}`,
  };
}

async function userPromptSubmit(memory: MemoryQueue, ref: SessionRef, input: HookInput): Promise<HookResult> {
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
  if (skip) return { stdout: '', note: '' };
  const recall = await awaitRecall(memory, ref, {
    query: prompt,
    alreadySurfaced: [...surfaced.paths],
    waitMs: RECALL_WAIT_MS,
    // The same prompt's recall started by another hook process (the hook installed twice, a re-run) is reused.
    reuse: true,
  });
  if (recall.status !== 'answered')
    return { stdout: '', note: `engram: ${recall.reason}; no memories added.` };
  const attachments = recall.result.attachments;
  if (attachments.length === 0) return { stdout: '', note: '' };
  return {
    stdout: additionalContextOutput('UserPromptSubmit', recallContext(ref.paths.memoryDir, attachments)),
    note: '',
  };
}

async function sessionStart(config: AgentConfig, memory: MemoryQueue, ref: SessionRef): Promise<HookResult> {
  if (!config.teamSync) return { stdout: '', note: '' };
  const { TeamSyncTrigger, describeTeamSync } = await import('../memory/team-sync-trigger.js');
  const status = await new TeamSyncTrigger(memory, config.teamSync).atSessionStart(ref.paths, ref.sessionId);
  const text = describeTeamSync(status);
  if (status.status === 'pulled' && text) {
    return { stdout: additionalContextOutput('SessionStart', `Engram team memory: ${text}`), note: text };
  }
  return { stdout: '', note: text ? `engram: ${text}` : '' };
}
