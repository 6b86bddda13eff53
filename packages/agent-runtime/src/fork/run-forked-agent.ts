import { promises as fs } from 'node:fs';
import { type DeniedCall, type EndReason, runQueryLoop } from '../loop/query-loop.js';
import type { ModelClient, Usage } from '../model/client.js';
import type { StopReason, ToolResultBlock, ToolUseBlock } from '../model/types.js';
import type { UnattendedBoundary } from '../sandbox/boundary.js';
import type { SandboxProbeOptions, SandboxStatus } from '../sandbox/sandbox.js';
import { prepareUnattended, type ToolSandbox } from '../sandbox/unattended.js';
import { hashContent, resolveToolPath, toolPath } from '../tools/file-state.js';
import { defaultTools } from '../tools/registry.js';
import { type AnyTool, type CanUseTool, ReadFileState } from '../tools/tool.js';
import { buildChain } from '../transcript/chain.js';
import {
  type ChainEntry,
  createUserEntry,
  type TranscriptEntry,
  toolUseRecordFor,
} from '../transcript/entry.js';
import { TranscriptStore } from '../transcript/store.js';
import type { CacheSafeParams } from './cache-safe-params.js';

// A forked agent: the parent's conversation up to a leaf, plus one instruction, run through the normal
// loop with a restrictive permission hook. The request repeats the parent's (same model, system, tool
// definitions, max_tokens, and messages rendered from the transcript by the shared renderer), so the
// model's prompt cache serves the whole prefix even when the fork runs in another process or machine.
// The fork never writes to the parent's transcript; its messages are returned to the caller.

export interface RunForkedAgentOptions {
  client: ModelClient;
  params: CacheSafeParams;
  transcriptPath: string;
  /**
   * The transcript's entries when the caller has just read the file at `transcriptPath` (and checked that the
   * leaf is there): the fork builds its chain from them instead of reading and parsing the file again.
   */
  entries?: readonly TranscriptEntry[];
  leafUuid: string;
  instruction: string;
  canUseTool: CanUseTool;
  maxTurns: number;
  signal?: AbortSignal;
  cwd: string;
  toolResultsDir?: string;
  /** Executable tools (default: the standard set). The API still sees the parent's full list. */
  tools?: AnyTool[];
  /** Session id stamped on the fork's own entries (default: the leaf's session id). */
  sessionId?: string;
  env?: NodeJS.ProcessEnv;
  fileModes?: { file: number; dir: number };
  onMessage?: (entry: ChainEntry) => void | Promise<void>;
  /**
   * Files the fork counts as fully read at its start, beyond what the parent read: for an instruction that
   * embeds a file's current content (the session-memory notes), so Edit's read-before-write rule holds.
   */
  extraReadFiles?: readonly string[];
  /**
   * The fork's filesystem boundary: the directory it may change (and whether Bash may), what its tools may
   * read, Bash's world, and an optional path alias. Required: a fork is never attended, so its Bash always
   * runs in the OS sandbox (or is denied where the sandbox cannot start) and its Write/Edit go through the
   * jailed write.
   */
  boundary: UnattendedBoundary;
  /** Sandbox probe options or a fixed status (tests); default: the process's probe (ENGRAM_SANDBOX). */
  sandboxProbe?: SandboxProbeOptions & { status?: SandboxStatus };
}

export interface ForkResult {
  newMessages: ChainEntry[];
  usage: Usage;
  turns: number;
  endReason: EndReason;
  stopReason: StopReason | null;
  /** Unique absolute paths of successful Edit/Write calls, in first-written order. */
  writtenPaths: string[];
  deniedCalls: DeniedCall[];
  /** The sandbox the fork's tools ran in. */
  sandbox: ToolSandbox;
}

const FILE_TOOLS = new Set(['Read', 'Write', 'Edit']);
const WRITE_TOOLS = new Set(['Write', 'Edit']);

function toolUses(entry: TranscriptEntry): ToolUseBlock[] {
  const content = entry.message?.content;
  if (entry.type !== 'assistant' || !Array.isArray(content)) return [];
  return content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
}

function toolResults(entry: TranscriptEntry): ToolResultBlock[] {
  const content = entry.message?.content;
  if (entry.type !== 'user' || !Array.isArray(content)) return [];
  return content.filter((b): b is ToolResultBlock => b.type === 'tool_result');
}

/**
 * What the parent "has read": every successful Read/Write/Edit in the chain, with the file's mtime as the
 * tool recorded it (or, for entries without that record, the result's timestamp). A fork's Edit then
 * passes or fails the read-before-write rule exactly as the parent's would.
 */
export function seedReadFileState(chain: readonly TranscriptEntry[], cwd: string): ReadFileState {
  const state = new ReadFileState();
  const calls = new Map<string, { name: string; filePath: string; cwd: string }>();
  for (const entry of chain) {
    for (const use of toolUses(entry)) {
      const filePath = use.input.file_path;
      if (FILE_TOOLS.has(use.name) && typeof filePath === 'string') {
        calls.set(use.id, { name: use.name, filePath, cwd: entry.cwd ?? cwd });
      }
    }
    for (const result of toolResults(entry)) {
      const call = calls.get(result.tool_use_id);
      if (!call || result.is_error === true) continue;
      const record = toolUseRecordFor(entry, result.tool_use_id);
      const recordedPath = typeof record?.filePath === 'string' ? record.filePath : undefined;
      const recordedMtime = typeof record?.mtimeMs === 'number' ? record.mtimeMs : undefined;
      const at = entry.timestamp ? Date.parse(entry.timestamp) : Number.NaN;
      const mtimeMs = recordedMtime ?? (Number.isFinite(at) ? at : undefined);
      if (mtimeMs === undefined) continue;
      state.set(recordedPath ?? resolveToolPath(call.cwd, call.filePath), { mtimeMs });
    }
  }
  return state;
}

/** Unique absolute paths written by successful Edit/Write calls among `entries`. */
export function collectWrittenPaths(entries: readonly TranscriptEntry[], cwd: string): string[] {
  const calls = new Map<string, string>();
  const written: string[] = [];
  for (const entry of entries) {
    for (const use of toolUses(entry)) {
      if (WRITE_TOOLS.has(use.name) && typeof use.input.file_path === 'string') {
        calls.set(use.id, resolveToolPath(cwd, use.input.file_path));
      }
    }
    for (const result of toolResults(entry)) {
      const path = calls.get(result.tool_use_id);
      if (path === undefined || result.is_error === true) continue;
      const record = toolUseRecordFor(entry, result.tool_use_id);
      const finalPath = typeof record?.filePath === 'string' ? record.filePath : path;
      if (!written.includes(finalPath)) written.push(finalPath);
    }
  }
  return written;
}

export async function runForkedAgent(opts: RunForkedAgentOptions): Promise<ForkResult> {
  const entries = opts.entries ?? (await new TranscriptStore(opts.transcriptPath).readAll()).entries;
  const chain = buildChain(entries, opts.leafUuid);
  const leaf = chain.leaf!;
  const instruction = createUserEntry(
    { sessionId: opts.sessionId ?? leaf.sessionId, cwd: opts.cwd, parentUuid: leaf.uuid },
    opts.instruction,
  );
  const readFileState = seedReadFileState(chain.live, opts.cwd);
  const boundary = await prepareUnattended(opts.boundary, opts.sandboxProbe);
  for (const file of opts.extraReadFiles ?? []) {
    const path = toolPath({ cwd: opts.cwd, boundary }, file);
    const [stat, content] = await Promise.all([fs.stat(path.actual), fs.readFile(path.actual)]);
    readFileState.set(path.shown, { mtimeMs: stat.mtimeMs, contentHash: hashContent(content) });
  }
  const result = await runQueryLoop({
    client: opts.client,
    model: opts.params.model,
    system: opts.params.system,
    tools: opts.tools ?? defaultTools(),
    toolDefinitions: opts.params.tools,
    maxTokens: opts.params.maxTokens,
    messages: [...chain.live, instruction],
    ...(opts.params.userContext !== undefined ? { userContext: opts.params.userContext } : {}),
    canUseTool: opts.canUseTool,
    maxTurns: opts.maxTurns,
    ...(opts.signal ? { signal: opts.signal } : {}),
    cwd: opts.cwd,
    sessionId: opts.sessionId ?? leaf.sessionId,
    readFileState,
    ...(opts.toolResultsDir ? { toolResultsDir: opts.toolResultsDir } : {}),
    ...(opts.env ? { env: opts.env } : {}),
    ...(opts.fileModes ? { fileModes: opts.fileModes } : {}),
    boundary,
    ...(opts.onMessage ? { onMessage: opts.onMessage } : {}),
  });
  return {
    newMessages: result.newMessages,
    usage: result.usage,
    turns: result.turns,
    endReason: result.endReason,
    stopReason: result.stopReason,
    writtenPaths: collectWrittenPaths(result.newMessages, opts.cwd),
    deniedCalls: result.deniedCalls,
    sandbox: boundary.sandbox,
  };
}
