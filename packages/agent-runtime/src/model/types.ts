import type { StopReason as SdkStopReason } from '@anthropic-ai/sdk/resources/messages';

// The wire shapes this runtime sends and stores. They mirror the Messages API (snake_case) so a transcript
// written here is readable by Claude Code and a stored message can be sent back byte for byte.

export interface CacheControl {
  type: 'ephemeral';
}

export interface SystemBlock {
  type: 'text';
  text: string;
  cache_control?: CacheControl;
}

export interface ToolDefinition {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

export interface TextBlock {
  type: 'text';
  text: string;
  cache_control?: CacheControl;
  citations?: unknown[];
}

export interface ImageBlock {
  type: 'image';
  source:
    | { type: 'base64'; media_type: string; data: string }
    | { type: 'url'; url: string }
    | Record<string, unknown>;
  cache_control?: CacheControl;
}

export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: Record<string, unknown>;
  cache_control?: CacheControl;
}

export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content: string | Array<TextBlock | ImageBlock>;
  is_error?: boolean;
  cache_control?: CacheControl;
}

export interface ThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature: string;
}

export interface RedactedThinkingBlock {
  type: 'redacted_thinking';
  data: string;
}

export type ContentBlock =
  | TextBlock
  | ImageBlock
  | ToolUseBlock
  | ToolResultBlock
  | ThinkingBlock
  | RedactedThinkingBlock;

export type Role = 'user' | 'assistant';

export interface ApiMessage {
  role: Role;
  content: string | ContentBlock[];
}

/** Usage as the API reports it (snake_case), stored on assistant transcript entries as Claude Code does. */
export interface ApiUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

/** The SDK's stop reasons, open to ones a newer API adds. */
export type StopReason = SdkStopReason | (string & {});
