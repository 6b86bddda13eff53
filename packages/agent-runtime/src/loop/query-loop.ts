import { inSpan, SpanStatusCode } from '@engram/telemetry/spans';
import type { ModelClient, ModelRequest, ModelResponse, TextDelta, Usage } from '../model/client.js';
import { addUsage, EMPTY_USAGE, usageToApi } from '../model/client.js';
import { ModelAbortedError } from '../model/errors.js';
import type {
  ContentBlock,
  StopReason,
  SystemBlock,
  ToolDefinition,
  ToolResultBlock,
  ToolUseBlock,
} from '../model/types.js';
import { gatedPolicy, type ToolBoundary } from '../sandbox/unattended.js';
import { applyToolResultBudget } from '../tool-results/storage.js';
import { toolDefinitions } from '../tools/registry.js';
import {
  type AnyTool,
  type CanUseTool,
  type PermissionDecision,
  ReadFileState,
  type ToolContext,
  ToolError,
  type ToolOutput,
} from '../tools/tool.js';
import {
  type ChainEntry,
  createAssistantEntry,
  createAttachmentEntry,
  createUserEntry,
  type EntryStamp,
  type ToolUseRecord,
  type TranscriptEntry,
} from '../transcript/entry.js';
import { renderChainToApiMessages } from '../transcript/render.js';

// The agent loop shared by the foreground and forked agents: render the conversation, call the model, run
// the tool calls it asked for (through the permission hook), append the results, repeat until a reply asks
// for no tools or the turn budget is spent. Every new message is a transcript entry, handed to `onMessage`
// as soon as it exists, and the request is always rendered from those entries by the shared renderer —
// so what a worker later rebuilds from the transcript is exactly what was sent.

export type EndReason = 'completed' | 'max_turns' | 'aborted';

/** Parallel tool calls per batch (Claude Code runs up to 10 concurrency-safe calls at once). */
export const MAX_TOOL_CONCURRENCY = 10;

export interface QueryLoopState {
  /** Model calls made so far in this run. */
  turn: number;
  /** The whole conversation: the prior entries followed by the new ones. */
  messages: readonly TranscriptEntry[];
  newMessages: readonly ChainEntry[];
  usage: Usage;
  lastResponse?: ModelResponse;
  readFileState: ReadFileState;
}

export interface DeniedCall {
  tool: string;
  toolUseId: string;
  message: string;
  reason?: string;
}

/** What `beforeModelCall` may inject: text or blocks, stored as an `attachment` entry rendered as user content. */
export type AttachmentInput = string | { content: string | ContentBlock[]; extra?: Partial<TranscriptEntry> };

export interface QueryLoopOptions {
  client: ModelClient;
  model: string;
  system: SystemBlock[];
  /** Executable tools, looked up by name. */
  tools: readonly AnyTool[];
  /** Definitions sent to the API (default: the tools' own). A fork sends its parent's list verbatim. */
  toolDefinitions?: ToolDefinition[];
  maxTokens: number;
  temperature?: number;
  /** The conversation so far (the live chain); new entries are parented on its last entry. */
  messages: readonly TranscriptEntry[];
  userContext?: string;
  canUseTool: CanUseTool;
  /** Maximum model calls in this run; reaching it ends the run normally with endReason 'max_turns'. */
  maxTurns?: number;
  signal?: AbortSignal;
  cwd: string;
  sessionId: string;
  /** Stamped on every new entry as Claude Code does (`gitBranch`); omitted when unknown. */
  gitBranch?: string;
  /** Parent of the first new entry (default: uuid of the last entry of `messages`, else null). */
  parentUuid?: string | null;
  readFileState?: ReadFileState;
  /** Directory for persisted large results (tool-results/); without it, oversized results are truncated. */
  toolResultsDir?: string;
  env?: NodeJS.ProcessEnv;
  fileModes?: { file: number; dir: number };
  /**
   * The run's filesystem boundary, in every tool's context: an unattended run's, prepared
   * (`prepareUnattended`: jail, read boundary, Bash's sandbox), or `ATTENDED` where a person approves each call.
   * Required: a run that forgot its boundary does not compile.
   */
  boundary: ToolBoundary;
  /** Before every model call: attachments to inject (e.g. a finished recall's memories). */
  beforeModelCall?: (
    state: QueryLoopState,
  ) => AttachmentInput[] | undefined | Promise<AttachmentInput[] | undefined>;
  /** After every model reply (before its tools run). */
  afterReply?: (reply: ModelResponse, state: QueryLoopState) => void | Promise<void>;
  /** Once, when the run ends (a reply without tool calls, the turn budget, or an abort). */
  onTurnEnd?: (state: QueryLoopState & { endReason: EndReason }) => void | Promise<void>;
  /** Every new entry, in order, as soon as it exists: append it to the transcript here. */
  onMessage?: (entry: ChainEntry) => void | Promise<void>;
  /**
   * Text deltas of the replies as the model streams them (`turn`: 0-based model call of this run). Only a
   * live view: the entries (`onMessage`) and the transcript carry the same text, complete, per block.
   */
  onTextDelta?: (delta: TextDelta & { turn: number }) => void;
  /** Every request exactly as handed to the client (before cache markers). */
  onRequest?: (request: ModelRequest) => void | Promise<void>;
  now?: () => Date;
}

export interface QueryLoopResult {
  newMessages: ChainEntry[];
  usage: Usage;
  turns: number;
  stopReason: StopReason | null;
  endReason: EndReason;
  deniedCalls: DeniedCall[];
  lastResponse?: ModelResponse;
  readFileState: ReadFileState;
}

export const INTERRUPTED_TOOL_TEXT = 'Interrupted: the run was aborted before this tool call finished.';

export function emptyOutputText(toolName: string): string {
  return `(${toolName} completed with no output)`;
}

function toolErrorText(message: string): string {
  return `<tool_use_error>${message}</tool_use_error>`;
}

function isEmptyOutput(content: ToolOutput['content']): boolean {
  if (typeof content === 'string') return content.trim().length === 0;
  return content.length === 0 || content.every((b) => b.type === 'text' && b.text.trim().length === 0);
}

interface CallOutcome {
  block: ToolResultBlock;
  record?: ToolUseRecord;
  denied?: DeniedCall;
}

export async function runQueryLoop(opts: QueryLoopOptions): Promise<QueryLoopResult> {
  // Unattended: Bash is denied at permission time, with the reason, where its sandbox cannot start.
  const canUseTool = gatedPolicy(opts.canUseTool, opts.boundary);
  const messages: TranscriptEntry[] = [...opts.messages];
  const newMessages: ChainEntry[] = [];
  const deniedCalls: DeniedCall[] = [];
  const readFileState = opts.readFileState ?? new ReadFileState();
  const toolsByName = new Map(opts.tools.map((t) => [t.name, t]));
  const definitions = opts.toolDefinitions ?? toolDefinitions(opts.tools);
  let usage: Usage = { ...EMPTY_USAGE };
  let turns = 0;
  let stopReason: StopReason | null = null;
  let lastResponse: ModelResponse | undefined;
  let parentUuid: string | null =
    opts.parentUuid !== undefined ? opts.parentUuid : (lastUuid(opts.messages) ?? null);

  const state = (): QueryLoopState => ({
    turn: turns,
    messages,
    newMessages,
    usage,
    ...(lastResponse ? { lastResponse } : {}),
    readFileState,
  });
  const stamp = (): EntryStamp => ({
    sessionId: opts.sessionId,
    cwd: opts.cwd,
    parentUuid,
    ...(opts.gitBranch !== undefined ? { gitBranch: opts.gitBranch } : {}),
    ...(opts.now ? { now: opts.now } : {}),
  });
  const emit = async (entry: ChainEntry) => {
    messages.push(entry);
    newMessages.push(entry);
    parentUuid = entry.uuid;
    await opts.onMessage?.(entry);
  };
  const finish = async (endReason: EndReason): Promise<QueryLoopResult> => {
    await opts.onTurnEnd?.({ ...state(), endReason });
    return {
      newMessages,
      usage,
      turns,
      stopReason,
      endReason,
      deniedCalls,
      ...(lastResponse ? { lastResponse } : {}),
      readFileState,
    };
  };

  for (;;) {
    if (opts.signal?.aborted) return finish('aborted');
    const attachments = (await opts.beforeModelCall?.(state())) ?? [];
    for (const a of attachments) {
      const content = typeof a === 'string' ? a : a.content;
      const extra = typeof a === 'string' ? {} : (a.extra ?? {});
      await emit(createAttachmentEntry(stamp(), content, extra));
    }

    const request: ModelRequest = {
      model: opts.model,
      system: opts.system,
      tools: definitions,
      messages: renderChainToApiMessages(messages, opts.userContext ? { userContext: opts.userContext } : {}),
      maxTokens: opts.maxTokens,
      ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
    };
    await opts.onRequest?.(request);
    let response: ModelResponse;
    try {
      const onTextDelta = opts.onTextDelta;
      const turn = turns;
      response = await opts.client.send(request, {
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(onTextDelta ? { onTextDelta: (d: TextDelta) => onTextDelta({ ...d, turn }) } : {}),
      });
    } catch (e) {
      if (e instanceof ModelAbortedError) return finish('aborted');
      throw e;
    }
    turns++;
    lastResponse = response;
    stopReason = response.message.stopReason;
    usage = addUsage(usage, response.usage);
    const assistant = createAssistantEntry(stamp(), {
      id: response.message.id,
      ...(response.message.model ? { model: response.message.model } : {}),
      content: response.message.content,
      stop_reason: response.message.stopReason,
      usage: usageToApi(response.usage),
    });
    await emit(assistant);
    await opts.afterReply?.(response, state());

    const calls = response.message.content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
    if (calls.length === 0) return finish('completed');

    const outcomes = await runToolCalls(calls, {
      toolsByName,
      canUseTool,
      ctxFor: (toolUseId) => ({
        cwd: opts.cwd,
        readFileState,
        toolUseId,
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(opts.env ? { env: opts.env } : {}),
        ...(opts.fileModes ? { fileModes: opts.fileModes } : {}),
        boundary: opts.boundary,
      }),
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.toolResultsDir ? { toolResultsDir: opts.toolResultsDir } : {}),
    });
    // One entry per result, each with its own `toolUseResult`, as Claude Code writes them (chained one after
    // the other; rendering merges them back into one user message).
    for (const o of outcomes) {
      if (o.denied) deniedCalls.push(o.denied);
      await emit(
        createUserEntry(stamp(), [o.block], {
          sourceToolAssistantUUID: assistant.uuid,
          ...(o.record ? { toolUseResult: o.record } : {}),
        }),
      );
    }
    if (opts.signal?.aborted) return finish('aborted');
    if (opts.maxTurns !== undefined && turns >= opts.maxTurns) return finish('max_turns');
  }
}

function lastUuid(entries: readonly TranscriptEntry[]): string | undefined {
  for (let i = entries.length - 1; i >= 0; i--) {
    const uuid = entries[i]!.uuid;
    if (typeof uuid === 'string') return uuid;
  }
  return undefined;
}

interface ToolRunEnv {
  toolsByName: Map<string, AnyTool>;
  canUseTool: CanUseTool;
  ctxFor: (toolUseId: string) => ToolContext;
  signal?: AbortSignal;
  toolResultsDir?: string;
}

/**
 * Runs calls in order, batching consecutive concurrency-safe ones (read-only tools, read-only Bash) to run
 * in parallel; anything that may write runs alone. Results come back in call order.
 */
async function runToolCalls(calls: ToolUseBlock[], env: ToolRunEnv): Promise<CallOutcome[]> {
  const batches: ToolUseBlock[][] = [];
  for (const call of calls) {
    const safe = isConcurrencySafe(call, env.toolsByName);
    const last = batches[batches.length - 1];
    if (safe && last && last.length < MAX_TOOL_CONCURRENCY && isConcurrencySafe(last[0]!, env.toolsByName)) {
      last.push(call);
    } else {
      batches.push([call]);
    }
  }
  const outcomes: CallOutcome[] = [];
  for (const batch of batches) {
    if (env.signal?.aborted) {
      for (const call of batch) outcomes.push(errorOutcome(call.id, INTERRUPTED_TOOL_TEXT));
      continue;
    }
    outcomes.push(...(await Promise.all(batch.map((call) => runToolCall(call, env)))));
  }
  return outcomes;
}

function isConcurrencySafe(call: ToolUseBlock, toolsByName: Map<string, AnyTool>): boolean {
  const tool = toolsByName.get(call.name);
  if (!tool) return false;
  const parsed = tool.inputSchema.safeParse(call.input);
  if (!parsed.success) return false;
  try {
    return tool.isConcurrencySafe(parsed.data);
  } catch {
    return false;
  }
}

function errorOutcome(toolUseId: string, text: string): CallOutcome {
  return { block: { type: 'tool_result', tool_use_id: toolUseId, content: text, is_error: true } };
}

/**
 * One tool call as an OpenTelemetry span, per the gen_ai conventions (`execute_tool <name>`): the job's
 * tenant and project reach it from the scope processor, like every span started inside a job. A call that
 * answers with an error (refused, invalid input, a failing tool) is an error span; the model still sees
 * its tool_result. With telemetry off the tracer is a no-op.
 */
function runToolCall(call: ToolUseBlock, env: ToolRunEnv): Promise<CallOutcome> {
  // The name is the model's: a tool this loop does not have names no span (a bounded attribute only), so
  // model output cannot mint span names.
  const known = env.toolsByName.has(call.name);
  return inSpan(
    known ? `execute_tool ${call.name}` : 'execute_tool',
    {
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': known ? call.name : call.name.slice(0, 64),
        'gen_ai.tool.call.id': call.id.slice(0, 64),
        'gen_ai.tool.type': 'function',
      },
    },
    async (span) => {
      const outcome = await runToolCallUntraced(call, env);
      if (outcome.block.is_error) {
        const type = outcome.denied ? 'permission_denied' : 'tool_error';
        span.setStatus({ code: SpanStatusCode.ERROR, message: type });
        span.setAttribute('error.type', type);
      }
      return outcome;
    },
  );
}

async function runToolCallUntraced(call: ToolUseBlock, env: ToolRunEnv): Promise<CallOutcome> {
  const tool = env.toolsByName.get(call.name);
  if (!tool) return errorOutcome(call.id, toolErrorText(`Error: No such tool available: ${call.name}`));
  const parsed = tool.inputSchema.safeParse(call.input);
  if (!parsed.success) {
    const issues = parsed.error.issues
      .map((i) => `- ${i.path.join('.') || '(input)'}: ${i.message}`)
      .join('\n');
    return errorOutcome(
      call.id,
      toolErrorText(`InputValidationError: ${call.name} failed due to the following issue(s):\n${issues}`),
    );
  }
  const ctx = env.ctxFor(call.id);
  const input = parsed.data as Record<string, unknown>;
  let decision: PermissionDecision;
  try {
    decision = await env.canUseTool(tool, input, {
      toolUseId: call.id,
      cwd: ctx.cwd,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    });
  } catch (e) {
    // A failing policy must not run the tool, nor leave the tool_use without a result.
    decision = {
      behavior: 'deny',
      message: `Permission check failed: ${e instanceof Error ? e.message : String(e)}`,
      reason: 'permission_check_failed',
    };
  }
  if (decision.behavior === 'deny') {
    return {
      ...errorOutcome(call.id, decision.message),
      denied: {
        tool: call.name,
        toolUseId: call.id,
        message: decision.message,
        ...(decision.reason !== undefined ? { reason: decision.reason } : {}),
      },
    };
  }
  let output: ToolOutput;
  try {
    output = await tool.call(input, ctx);
  } catch (e) {
    if (env.signal?.aborted) return errorOutcome(call.id, INTERRUPTED_TOOL_TEXT);
    const message = e instanceof ToolError || e instanceof Error ? e.message : String(e);
    return errorOutcome(call.id, toolErrorText(message));
  }
  let content = isEmptyOutput(output.content) ? emptyOutputText(call.name) : output.content;
  const budgeted = await applyToolResultBudget({
    toolName: call.name,
    toolUseId: call.id,
    content,
    maxResultChars: tool.maxResultChars,
    ...(env.toolResultsDir ? { dir: env.toolResultsDir } : {}),
  });
  content = budgeted.content;
  const record: ToolUseRecord = {
    ...(output.record ?? {}),
    ...(budgeted.persisted ? { persistedOutputPath: budgeted.persisted.path } : {}),
  };
  return {
    block: {
      type: 'tool_result',
      tool_use_id: call.id,
      content,
      ...(output.isError ? { is_error: true } : {}),
    },
    ...(Object.keys(record).length > 0 ? { record } : {}),
  };
}
