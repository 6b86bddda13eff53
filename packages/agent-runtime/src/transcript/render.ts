import type { ApiMessage, ContentBlock, Role, ToolResultBlock } from '../model/types.js';
import { attachmentRenderedText, isModelVisible, type TranscriptEntry } from './entry.js';

// The ONE function that turns transcript entries into API messages. The foreground renders its in-memory
// entries with it before every model call, and a worker renders the same entries read back from JSONL with
// it, so both produce byte-identical request prefixes and the fork reads the parent's prompt cache. It is
// pure and deterministic: no clock, no randomness, no dependence on object identity.

export interface RenderOptions {
  /** Claude Code's "user context" (CLAUDE.md, MEMORY.md, date…), prepended as a system-reminder message. */
  userContext?: string;
}

/** Result text for a tool_use whose result is missing from the chain (e.g. a crash between the two). */
export const MISSING_TOOL_RESULT_TEXT = '[Tool result missing due to internal error]';
/** First message when a chain starts with an assistant reply: the API requires a user message first. */
export const TRUNCATED_START_TEXT = '[Earlier conversation truncated]';

export function formatUserContextReminder(userContext: string): string {
  return (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n" +
    `${userContext}\n\n` +
    '      IMPORTANT: this context may or may not be relevant to your tasks. You should not respond to this ' +
    'context unless it is highly relevant to your task.\n</system-reminder>\n'
  );
}

export function renderChainToApiMessages(
  chain: readonly TranscriptEntry[],
  options: RenderOptions = {},
): ApiMessage[] {
  const raw: Array<{ role: Role; content: ContentBlock[] }> = [];
  if (options.userContext !== undefined && options.userContext.length > 0) {
    raw.push({
      role: 'user',
      content: [{ type: 'text', text: formatUserContextReminder(options.userContext) }],
    });
  }
  for (const entry of chain) {
    if (!isModelVisible(entry)) continue;
    // A Claude Code attachment carries no message, only the text it rendered.
    const message = entry.message ?? { role: 'user' as Role, content: attachmentRenderedText(entry) ?? '' };
    const role: Role = entry.type === 'attachment' ? 'user' : message.role;
    const content = toBlocks(message.content);
    if (content.length > 0) raw.push({ role, content });
  }
  return mergeSameRole(repairToolPairing(mergeSameRole(raw)));
}

function toBlocks(content: string | readonly ContentBlock[]): ContentBlock[] {
  if (typeof content === 'string') return isBlankText(content) ? [] : [{ type: 'text', text: content }];
  const out: ContentBlock[] = [];
  for (const block of content) {
    if (block.type === 'text' && isBlankText(block.text)) continue; // the API rejects empty text blocks
    out.push(stripCacheControl(block));
  }
  return out;
}

function isBlankText(text: unknown): boolean {
  return typeof text !== 'string' || text.trim().length === 0;
}

function stripCacheControl(block: ContentBlock): ContentBlock {
  if (!('cache_control' in block)) return block;
  const { cache_control: _ignored, ...rest } = block as ContentBlock & { cache_control?: unknown };
  return rest as ContentBlock;
}

/** Consecutive messages of one role become one; in user messages tool_results move to the front. */
function mergeSameRole(messages: Array<{ role: Role; content: ContentBlock[] }>) {
  const out: Array<{ role: Role; content: ContentBlock[] }> = [];
  for (const m of messages) {
    const prev = out[out.length - 1];
    if (prev && prev.role === m.role) prev.content = [...prev.content, ...m.content];
    else out.push({ role: m.role, content: [...m.content] });
  }
  for (const m of out) {
    if (m.role === 'user' && m.content.some((b) => b.type === 'tool_result')) {
      m.content = [
        ...m.content.filter((b) => b.type === 'tool_result'),
        ...m.content.filter((b) => b.type !== 'tool_result'),
      ];
    }
  }
  return out;
}

/**
 * Every tool_use gets exactly one tool_result in the next user message (a synthetic error result when the
 * chain lacks one); tool_results without a matching tool_use just before them are dropped.
 */
function repairToolPairing(messages: Array<{ role: Role; content: ContentBlock[] }>) {
  const out: Array<{ role: Role; content: ContentBlock[] }> = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (m.role === 'user') {
      const prev = out[out.length - 1];
      const expected = new Set(
        prev?.role === 'assistant' ? prev.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : [])) : [],
      );
      const seen = new Set<string>();
      const content = m.content.filter((b) => {
        if (b.type !== 'tool_result') return true;
        if (!expected.has(b.tool_use_id) || seen.has(b.tool_use_id)) return false;
        seen.add(b.tool_use_id);
        return true;
      });
      const missing = [...expected].filter((id) => !seen.has(id));
      const synthetic = missing.map(syntheticResult);
      const merged = [
        ...content.filter((b) => b.type === 'tool_result'),
        ...synthetic,
        ...content.filter((b) => b.type !== 'tool_result'),
      ];
      if (merged.length > 0) out.push({ role: 'user', content: merged });
      continue;
    }
    out.push(m);
    const toolUseIds = m.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : []));
    const next = messages[i + 1];
    if (toolUseIds.length > 0 && next?.role !== 'user') {
      out.push({ role: 'user', content: toolUseIds.map(syntheticResult) });
    }
  }
  if (out[0]?.role === 'assistant')
    out.unshift({ role: 'user', content: [{ type: 'text', text: TRUNCATED_START_TEXT }] });
  return out;
}

function syntheticResult(id: string): ToolResultBlock {
  return { type: 'tool_result', tool_use_id: id, content: MISSING_TOOL_RESULT_TEXT, is_error: true };
}
