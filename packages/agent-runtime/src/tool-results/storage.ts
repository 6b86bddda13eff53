import { join } from 'node:path';
import { EngramError } from '@engram/errors/engram-error';
import { createExclusive } from '@engram/fs-atomic/atomic-write';
import type { ImageBlock, TextBlock } from '../model/types.js';

// Large tool results leave the context: the full output goes to tool-results/<tool_use_id>.txt|json and
// the model gets a <persisted-output> block with the path and a preview. The file is created exclusively
// and reused when present, so replaying a turn (or a retried job) yields the very same replacement text.

/** System-wide cap on a tool result kept inline (Claude Code's DEFAULT_MAX_RESULT_SIZE_CHARS). */
export const DEFAULT_MAX_RESULT_SIZE_CHARS = 50_000;
export const PREVIEW_SIZE_CHARS = 2_000;
/** Per-tool thresholds as declared by Claude Code's tools (Read bounds itself and is never persisted). */
export const TOOL_RESULT_THRESHOLDS: Readonly<Record<string, number>> = {
  Bash: 30_000,
  Grep: 20_000,
  Read: Number.POSITIVE_INFINITY,
};

export class ToolResultStorageError extends EngramError {
  constructor(message: string) {
    super('UNSAFE_TOOL_USE_ID', message, { retryable: false });
  }
}

export type ToolResultContent = string | Array<TextBlock | ImageBlock>;

/** min(declared, 50,000), except Infinity (never persisted) stays Infinity. */
export function resultThreshold(toolName: string, declaredMaxChars?: number): number {
  const declared = declaredMaxChars ?? TOOL_RESULT_THRESHOLDS[toolName] ?? DEFAULT_MAX_RESULT_SIZE_CHARS;
  if (declared === Number.POSITIVE_INFINITY) return declared;
  return Math.min(declared, DEFAULT_MAX_RESULT_SIZE_CHARS);
}

/** Size in characters of a result; undefined when it cannot be persisted (contains an image). */
export function persistableSize(content: ToolResultContent): number | undefined {
  if (typeof content === 'string') return content.length;
  if (!content.every((b) => b.type === 'text')) return undefined;
  return JSON.stringify(content).length;
}

export function formatSize(chars: number): string {
  if (chars < 1024) return `${chars} bytes`;
  if (chars < 1024 * 1024) return `${trimFixed(chars / 1024)}KB`;
  return `${trimFixed(chars / (1024 * 1024))}MB`;
}

function trimFixed(n: number): string {
  return n.toFixed(1).replace(/\.0$/, '');
}

/** The first 2,000 characters, cut back to the last newline when that newline lies past half of them. */
export function generatePreview(
  text: string,
  limit = PREVIEW_SIZE_CHARS,
): { preview: string; hasMore: boolean } {
  if (text.length <= limit) return { preview: text, hasMore: false };
  const head = text.slice(0, limit);
  const lastNewline = head.lastIndexOf('\n');
  const cut = lastNewline > limit * 0.5 ? head.slice(0, lastNewline) : head;
  return { preview: cut, hasMore: true };
}

export function buildPersistedOutputMessage(
  path: string,
  size: number,
  preview: string,
  hasMore: boolean,
): string {
  return (
    '<persisted-output>\n' +
    `Output too large (${formatSize(size)}). Full output saved to: ${path}\n\n` +
    'Preview (first 2KB):\n' +
    `${preview}${hasMore ? '\n...' : ''}\n` +
    '</persisted-output>'
  );
}

export interface PersistedToolResult {
  path: string;
  /** True when this call created the file; false when an earlier run already had. */
  created: boolean;
  size: number;
  /** The replacement content for the tool_result block. */
  replacement: string;
}

/** Writes the full result once and returns the <persisted-output> replacement. */
export async function persistLargeToolResult(input: {
  toolUseId: string;
  content: ToolResultContent;
  dir: string;
}): Promise<PersistedToolResult> {
  if (!/^[A-Za-z0-9_-]+$/.test(input.toolUseId)) {
    throw new ToolResultStorageError(
      `Refusing to persist a tool result under the tool_use_id ${JSON.stringify(input.toolUseId)}: ids may only contain letters, digits, _ and -.`,
    );
  }
  const isText = typeof input.content === 'string';
  const data = isText ? (input.content as string) : JSON.stringify(input.content, null, 2);
  const path = join(input.dir, `${input.toolUseId}.${isText ? 'txt' : 'json'}`);
  const created = await createExclusive(path, data);
  const { preview, hasMore } = generatePreview(data);
  return {
    path,
    created,
    size: data.length,
    replacement: buildPersistedOutputMessage(path, data.length, preview, hasMore),
  };
}

export interface ToolResultBudgetInput {
  toolName: string;
  toolUseId: string;
  content: ToolResultContent;
  /** The tool's declared maximum (`Tool.maxResultChars`); defaults to the table above. */
  maxResultChars?: number;
  /** Where to persist; without it, an oversized result is truncated in place instead. */
  dir?: string;
}

/** Applies the per-tool threshold: returns the content to send (unchanged, persisted, or truncated). */
export async function applyToolResultBudget(input: ToolResultBudgetInput): Promise<{
  content: ToolResultContent;
  persisted?: PersistedToolResult;
}> {
  const threshold = resultThreshold(input.toolName, input.maxResultChars);
  const size = persistableSize(input.content);
  if (size === undefined || size <= threshold) return { content: input.content };
  if (input.dir) {
    const persisted = await persistLargeToolResult({
      toolUseId: input.toolUseId,
      content: input.content,
      dir: input.dir,
    });
    return { content: persisted.replacement, persisted };
  }
  const text =
    typeof input.content === 'string'
      ? input.content
      : input.content.map((b) => (b as TextBlock).text).join('\n');
  return {
    content: `${text.slice(0, threshold)}\n\n[Output truncated: ${formatSize(size)} total, first ${threshold} characters shown]`,
  };
}
