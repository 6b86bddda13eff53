import type { ModelClient, ModelRequest, Usage } from '../model/client.js';
import { addUsage, EMPTY_USAGE, responseText } from '../model/client.js';
import { ModelAbortedError, PromptTooLongError } from '../model/errors.js';
import { tokenCountWithEstimation } from '../model/tokens.js';
import type { SystemBlock, ToolDefinition } from '../model/types.js';
import { type ChainEntry, createUserEntry, type TranscriptEntry } from '../transcript/entry.js';
import { renderChainToApiMessages } from '../transcript/render.js';
import {
  buildCompaction,
  CompactionError,
  type CompactionResult,
  type CompactTrigger,
  continuationMessage,
} from './compaction.js';
import { entryTokens } from './tail.js';

// Compaction by a model-written summary, the fallback when no session notes are usable (docs/claude-code-memory.md §10.13–14).
// The request repeats the session's model, system prompt and tools and renders the conversation with the
// shared renderer, so it reads the session's prompt cache; one instruction is appended. If that request is
// itself too long, the oldest API rounds are dropped and it is retried, up to 3 times.

export const MAX_PTL_RETRIES = 3;
/** Share of API rounds dropped per retry when the error does not say by how much the prompt is too long. */
export const PTL_FALLBACK_DROP_FRACTION = 0.2;
export const PTL_RETRY_MARKER = '[Earlier conversation truncated for compaction retry]';

export function buildCompactPrompt(customInstructions?: string): string {
  const lines = [
    'Respond with text only. Do not call any tool: tool calls will be refused, and this turn is your only chance to answer.',
    '',
    "Write a detailed summary of the conversation so far. It will replace the conversation, so someone continuing the work from it alone must lose nothing that matters: be thorough about the user's requests and your own actions, and specific about technical detail.",
    '',
    'First think it through inside <analysis> tags: go through the conversation in order and note each user request and intent, what you did, the decisions made, file names, code, function signatures and edits, errors and how they were fixed, and feedback from the user (especially corrections).',
    '',
    'Then write the summary inside <summary> tags, with these sections:',
    '1. Primary request and intent: everything the user asked for, in detail.',
    '2. Key technical concepts: technologies, frameworks and ideas discussed.',
    '3. Files and code: files examined, changed or created, why each matters, with the important snippets.',
    '4. Errors and fixes: every error met, how it was fixed, and what the user said about it.',
    '5. Problem solving: problems solved and investigations still open.',
    '6. All user messages: every user message that is not a tool result, in order.',
    '7. Pending tasks: what you were asked to do and have not done yet.',
    '8. Current work: precisely what was being worked on just before this summary, with file names and snippets.',
    '9. Next step (only if it follows directly from the latest request): the next step, quoting the latest messages verbatim to show where you left off. Do not start tangents or reopen finished work.',
  ];
  if (customInstructions !== undefined && customInstructions.trim().length > 0) {
    lines.push('', `Additional instructions:\n${customInstructions.trim()}`);
  }
  lines.push(
    '',
    'Remember: plain text only, no tool calls. Your answer is <analysis>…</analysis> then <summary>…</summary>.',
  );
  return lines.join('\n');
}

/** The summary from a reply: the <analysis> scratchpad removed, the <summary> contents kept. */
export function formatCompactSummary(text: string): string {
  let out = text.replace(/<analysis>[\s\S]*?<\/analysis>/gi, '');
  const m = /<summary>([\s\S]*?)<\/summary>/i.exec(out);
  if (m) out = m[1]!;
  return out.replace(/\n{3,}/g, '\n\n').trim();
}

/**
 * Splits entries into API rounds: a new round starts at every assistant reply (fragments sharing one API
 * message id stay together), so a round is a reply plus the tool results and user messages that follow it.
 */
export function groupByApiRound<T extends TranscriptEntry>(entries: readonly T[]): T[][] {
  const groups: T[][] = [];
  let current: T[] = [];
  let lastAssistantId: string | undefined;
  for (const entry of entries) {
    const id = entry.type === 'assistant' ? (entry.message?.id as string | undefined) : undefined;
    if (entry.type === 'assistant' && current.length > 0 && (id === undefined || id !== lastAssistantId)) {
      groups.push(current);
      current = [];
    }
    current.push(entry);
    if (entry.type === 'assistant') lastAssistantId = id;
  }
  if (current.length > 0) groups.push(current);
  return groups;
}

/**
 * The entries to summarise after a "prompt is too long" reply: the oldest rounds dropped, enough to cover
 * the reported gap (else 20% of them), always keeping at least one; undefined when nothing can be dropped.
 */
export function dropOldestRounds(
  entries: readonly ChainEntry[],
  error: PromptTooLongError,
  stamp: { sessionId: string; cwd: string },
): ChainEntry[] | undefined {
  const groups = groupByApiRound(entries);
  if (groups.length < 2) return undefined;
  const gap =
    error.actualTokens !== undefined && error.maxTokens !== undefined
      ? error.actualTokens - error.maxTokens
      : undefined;
  let drop: number;
  if (gap !== undefined && gap > 0) {
    drop = 0;
    let covered = 0;
    for (const group of groups) {
      covered += group.reduce((n, e) => n + entryTokens(e), 0);
      drop++;
      if (covered >= gap) break;
    }
  } else {
    drop = Math.max(1, Math.floor(groups.length * PTL_FALLBACK_DROP_FRACTION));
  }
  drop = Math.min(drop, groups.length - 1);
  const rest = groups.slice(drop).flat();
  if (rest[0]?.type === 'assistant') {
    const marker = createUserEntry({ ...stamp, parentUuid: null }, PTL_RETRY_MARKER, { isMeta: true });
    return [marker, ...rest];
  }
  return rest;
}

/** The session's request identity (a `CacheSafeParams` fits). */
export interface CompactRequestParams {
  model: string;
  system: SystemBlock[];
  tools: ToolDefinition[];
  maxTokens: number;
  userContext?: string;
}

export interface CompactWithModelOptions {
  client: ModelClient;
  params: CompactRequestParams;
  /** The live chain to summarise. */
  entries: readonly ChainEntry[];
  signal?: AbortSignal;
  /** Named in the summary message for details the summary lacks. */
  transcriptPath?: string;
  /** Extra instructions, e.g. from `/compact <instructions>`. */
  customInstructions?: string;
  trigger?: CompactTrigger;
  preTokens?: number;
  overheadTokens?: number;
  maxRetries?: number;
  now?: () => Date;
  uuid?: () => string;
}

export interface ModelCompactionResult extends CompactionResult {
  usage: Usage;
  /** Summarising requests sent (1 + retries). */
  attempts: number;
}

export async function compactWithModel(opts: CompactWithModelOptions): Promise<ModelCompactionResult> {
  const leaf = opts.entries.at(-1);
  if (!leaf)
    throw new CompactionError('COMPACTION_NOTHING_TO_COMPACT', 'There is no conversation to compact yet.');
  const stamp = { sessionId: leaf.sessionId, cwd: leaf.cwd };
  const maxRetries = opts.maxRetries ?? MAX_PTL_RETRIES;
  const prompt = buildCompactPrompt(opts.customInstructions);
  let toSummarise: ChainEntry[] = [...opts.entries];
  let usage: Usage = { ...EMPTY_USAGE };
  let attempts = 0;
  let retries = 0;
  for (;;) {
    const instruction = createUserEntry({ ...stamp, parentUuid: toSummarise.at(-1)?.uuid ?? null }, prompt);
    const request: ModelRequest = {
      model: opts.params.model,
      system: opts.params.system,
      tools: opts.params.tools,
      messages: renderChainToApiMessages(
        [...toSummarise, instruction],
        opts.params.userContext ? { userContext: opts.params.userContext } : {},
      ),
      maxTokens: opts.params.maxTokens,
    };
    attempts++;
    try {
      const response = await opts.client.send(request, opts.signal ? { signal: opts.signal } : {});
      usage = addUsage(usage, response.usage);
      const summary = formatCompactSummary(responseText(response));
      if (summary.length === 0) {
        throw new CompactionError(
          'COMPACTION_EMPTY_SUMMARY',
          'The model returned no summary text for the compaction request; the conversation was left as it was.',
        );
      }
      return {
        ...buildCompaction({
          via: 'model',
          entries: opts.entries,
          summaryText: continuationMessage({
            summary,
            transcriptPath: opts.transcriptPath,
            recentMessagesPreserved: false,
          }),
          keep: [],
          trigger: opts.trigger ?? 'auto',
          preTokens: opts.preTokens ?? tokenCountWithEstimation(opts.entries),
          ...(opts.overheadTokens !== undefined ? { overheadTokens: opts.overheadTokens } : {}),
          usage,
          ...(opts.now ? { now: opts.now } : {}),
          ...(opts.uuid ? { uuid: opts.uuid } : {}),
        }),
        usage,
        attempts,
      };
    } catch (error) {
      if (error instanceof ModelAbortedError) {
        throw new CompactionError('COMPACTION_ABORTED', 'Compaction was aborted.', { cause: error });
      }
      if (!(error instanceof PromptTooLongError)) throw error;
      const shorter = retries < maxRetries ? dropOldestRounds(toSummarise, error, stamp) : undefined;
      if (!shorter) {
        throw new CompactionError(
          'COMPACTION_PROMPT_TOO_LONG',
          `The conversation is too long to summarise even after dropping its oldest turns ${retries} time(s). Start a new session, or run /compact with instructions to keep less.`,
          { cause: error },
        );
      }
      retries++;
      toSummarise = shorter;
    }
  }
}
