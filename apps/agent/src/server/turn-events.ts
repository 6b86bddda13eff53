import type { ChainEntry } from '@engram/agent-runtime/transcript/entry';
import { RELEVANT_MEMORIES_ATTACHMENT_KIND } from '@engram/memory-core/recall/prefetch';

// The events of a served turn, in the order they happen (docs/hosted-api.md lists them). Streamed as
// Server-Sent Events (`event: <name>`, `data: <JSON>`) when the client accepts text/event-stream; returned as
// `events` in the JSON answer otherwise. They are derived from the transcript entries the turn appends, so
// a stream shows exactly what the transcript records — except `text_delta`, the live view of the model's
// streamed reply, which only the SSE stream carries (its block then follows as one `text` event).

export type TurnStreamEvent =
  | { event: 'turn.started'; data: { sessionId: string; resumed: boolean } }
  /**
   * A piece of a text block as the model streams it (SSE only). `turn` is the model call within this turn
   * (0-based), `index` the block within that reply; the block's `text` event follows once it is complete.
   */
  | { event: 'text_delta'; data: { turn: number; index: number; text: string } }
  /** A complete text block of a model reply, once the reply is recorded in the transcript. */
  | { event: 'text'; data: { text: string } }
  | { event: 'tool_use'; data: { id: string; name: string; input: unknown } }
  | {
      event: 'tool_result';
      data: { toolUseId: string; isError: boolean; content: string; truncated: boolean };
    }
  /** Memories recall injected into the turn (paths relative to the memory directory). */
  | { event: 'recall.injected'; data: { memories: string[] } }
  | { event: 'recall'; data: unknown }
  | { event: 'memory'; data: unknown }
  | { event: 'done'; data: unknown }
  | { event: 'error'; data: { code: string; message: string } };

const MAX_RESULT_CHARS = 4_000;

type Block = { type: string; text?: string; id?: string; name?: string; input?: unknown } & Record<
  string,
  unknown
>;

function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((b: Block) => (b.type === 'text' ? String(b.text ?? '') : `[${b.type}]`)).join('\n');
  }
  return '';
}

export function turnEventsOf(entry: ChainEntry): TurnStreamEvent[] {
  const out: TurnStreamEvent[] = [];
  const content = entry.message?.content;
  if (entry.type === 'attachment' && entry.attachmentKind === RELEVANT_MEMORIES_ATTACHMENT_KIND) {
    const memories = Array.isArray(entry.memories) ? (entry.memories as Array<{ path?: unknown }>) : [];
    out.push({ event: 'recall.injected', data: { memories: memories.map((m) => String(m.path)) } });
    return out;
  }
  if (!Array.isArray(content)) return out;
  for (const block of content as Block[]) {
    if (entry.type === 'assistant' && block.type === 'text' && block.text?.trim()) {
      out.push({ event: 'text', data: { text: block.text } });
    } else if (entry.type === 'assistant' && block.type === 'tool_use') {
      out.push({
        event: 'tool_use',
        data: { id: String(block.id), name: String(block.name), input: block.input },
      });
    } else if (entry.type === 'user' && block.type === 'tool_result') {
      const text = resultText(block.content);
      out.push({
        event: 'tool_result',
        data: {
          toolUseId: String(block.tool_use_id),
          isError: block.is_error === true,
          content: text.slice(0, MAX_RESULT_CHARS),
          truncated: text.length > MAX_RESULT_CHARS,
        },
      });
    }
  }
  return out;
}
