import type { ContentBlock } from '../model/types.js';
import {
  type ChainEntry,
  createAssistantEntry,
  createUserEntry,
  type EntryStamp,
} from '../transcript/entry.js';

// Builds linked transcript chains for compaction tests: user prompts, assistant replies (text and/or tool
// calls, with usage and message ids), and tool-result messages, each parented on the previous entry.

export class ChainBuilder {
  readonly entries: ChainEntry[] = [];
  private n = 0;
  private replies = 0;

  constructor(
    readonly sessionId = 'sess-1',
    readonly cwd = '/work/project',
  ) {}

  private stamp(): EntryStamp {
    const i = this.n++;
    return {
      sessionId: this.sessionId,
      cwd: this.cwd,
      parentUuid: this.entries.at(-1)?.uuid ?? null,
      uuid: () => `e${String(i).padStart(4, '0')}`,
      now: () => new Date(Date.UTC(2026, 0, 1, 0, 0, i)),
    };
  }

  user(text: string): ChainEntry {
    const e = createUserEntry(this.stamp(), text);
    this.entries.push(e);
    return e;
  }

  /** An assistant reply with optional text and tool calls (ids returned for the results). */
  assistant(
    opts: { text?: string; tools?: number; messageId?: string; usageTokens?: number } = {},
  ): ChainEntry {
    const reply = this.replies++;
    const content: ContentBlock[] = [];
    if (opts.text !== undefined) content.push({ type: 'text', text: opts.text });
    for (let t = 0; t < (opts.tools ?? 0); t++) {
      content.push({
        type: 'tool_use',
        id: `tu_${reply}_${t}`,
        name: 'Read',
        input: { file_path: `/f${t}` },
      });
    }
    const e = createAssistantEntry(this.stamp(), {
      id: opts.messageId ?? `msg_${reply}`,
      content,
      stop_reason: opts.tools ? 'tool_use' : 'end_turn',
      ...(opts.usageTokens !== undefined
        ? { usage: { input_tokens: opts.usageTokens, output_tokens: 0 } }
        : {}),
    });
    this.entries.push(e);
    return e;
  }

  /** The results for every tool call of `assistant`, each `chars` long. */
  results(assistant: ChainEntry, chars = 10): ChainEntry {
    const ids = (assistant.message!.content as ContentBlock[]).flatMap((b) =>
      b.type === 'tool_use' ? [b.id] : [],
    );
    const e = createUserEntry(
      this.stamp(),
      ids.map((id) => ({ type: 'tool_result' as const, tool_use_id: id, content: 'r'.repeat(chars) })),
      { sourceToolAssistantUUID: assistant.uuid },
    );
    this.entries.push(e);
    return e;
  }

  /** A text exchange: a prompt of `chars` characters and a reply of `chars` characters. */
  exchange(chars: number, label = ''): void {
    this.user(`${label}${'u'.repeat(Math.max(0, chars - label.length))}`);
    this.assistant({ text: 'a'.repeat(chars) });
  }
}
