import { z } from 'zod';

// Claude Code's hook protocol, without I/O: the event JSON a hook command reads on stdin, the answer it prints,
// and which transcript entry a Stop hook may treat as the turn's leaf. Claude Code fires Stop before the turn's
// last entries land in the transcript (they follow ~0.1 s later), so a leaf is "settled" only when the newest
// message is an assistant reply that asks for no tool.

export const HOOK_EVENTS = ['SessionStart', 'UserPromptSubmit', 'Stop', 'PreCompact', 'SessionEnd'] as const;
export type HookEvent = (typeof HOOK_EVENTS)[number];

export const hookInputSchema = z.looseObject({
  session_id: z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, 'session_id must be a Claude Code session id'),
  transcript_path: z.string().min(1),
  cwd: z.string().startsWith('/', 'cwd must be absolute'),
  hook_event_name: z.string(),
  prompt: z.string().optional(),
  source: z.string().optional(),
  trigger: z.string().optional(),
  reason: z.string().optional(),
});
export type HookInput = z.infer<typeof hookInputSchema>;

export type HookInputResult = { ok: true; input: HookInput } | { ok: false; reason: string };

export function parseHookInput(text: string, event: HookEvent): HookInputResult {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, reason: `hook input is not JSON (${(e as Error).message})` };
  }
  const parsed = hookInputSchema.safeParse(value);
  if (!parsed.success) {
    return {
      ok: false,
      reason: parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; '),
    };
  }
  if (parsed.data.hook_event_name !== event) {
    return { ok: false, reason: `hook input is for ${parsed.data.hook_event_name}, not ${event}` };
  }
  return { ok: true, input: parsed.data };
}

/** The JSON answer that adds context to the model request (UserPromptSubmit, SessionStart); empty for none. */
export function additionalContextOutput(event: HookEvent, context: string | undefined): string {
  if (!context) return '';
  return `${JSON.stringify({ hookSpecificOutput: { hookEventName: event, additionalContext: context } })}\n`;
}

interface LeafCandidate {
  type: string;
  uuid?: string | undefined;
  isSidechain?: boolean | undefined;
  message?: { role: string; content: unknown; stop_reason?: unknown } | undefined;
}

export interface StopLeaf {
  leafUuid: string;
  /** 1-based position of the leaf among the transcript's entries: grows as the file grows. */
  leafSeq: number;
  /** The newest message is a finished assistant reply (the turn's entries have landed). */
  settled: boolean;
}

function hasToolUse(content: unknown): boolean {
  return Array.isArray(content) && content.some((b) => (b as { type?: unknown }).type === 'tool_use');
}

/** The newest main-chain message entry of a transcript, and whether the turn it ends looks complete. */
export function pickStopLeaf(entries: readonly LeafCandidate[]): StopLeaf | undefined {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    if (!e.uuid || e.isSidechain || !e.message) continue;
    if (e.type !== 'user' && e.type !== 'assistant') continue;
    const settled = e.type === 'assistant' && !hasToolUse(e.message.content);
    return { leafUuid: e.uuid, leafSeq: i + 1, settled };
  }
  return undefined;
}

/** Is this user entry a prompt the person typed (not a tool result or a meta entry)? */
export function isUserPrompt(e: LeafCandidate & { isMeta?: boolean | undefined }): boolean {
  if (e.type !== 'user' || !e.message || e.isMeta) return false;
  const c = e.message.content;
  if (typeof c === 'string') return true;
  return Array.isArray(c) && !c.some((b) => (b as { type?: unknown }).type === 'tool_result');
}

/** The entries of the last turn: from the newest typed prompt on (what a Stop hook checks for memory writes). */
export function lastTurn<T extends LeafCandidate & { isMeta?: boolean | undefined }>(
  chain: readonly T[],
): T[] {
  for (let i = chain.length - 1; i >= 0; i--) if (isUserPrompt(chain[i]!)) return chain.slice(i);
  return [...chain];
}

// What the UserPromptSubmit hook recalled earlier in the session. Claude Code keeps hook context as an
// `attachment` entry `{type: "hook_additional_context", hookEvent, content: [<text>]}` (measured on 2.1.328), not
// as its own `relevant_memories`, so the prefetch's surfaced set and session budget would not see it. The
// context's first line names the memory directory and the recalled files (JSON), which is what is read back.

const RECALL_CONTEXT_PREFIX = 'Relevant memories from ';

/** The hook's additionalContext for recalled memories (paths relative to `memoryDir`). */
export function recallContext(
  memoryDir: string,
  memories: readonly { path: string; header: string; content: string }[],
): string {
  const body = memories.map((m) => `${m.header}\n${m.content}`).join('\n\n');
  return `${RECALL_CONTEXT_PREFIX}${memoryDir} ${JSON.stringify(memories.map((m) => m.path))}:\n\n${body}`;
}

/** The memories earlier UserPromptSubmit hooks put into this context, and their bytes (the session budget). */
export function hookSurfacedMemories(
  entries: readonly { type?: unknown; attachment?: unknown }[],
  memoryDir: string,
): { paths: Set<string>; bytes: number } {
  const paths = new Set<string>();
  let bytes = 0;
  const lead = `${RECALL_CONTEXT_PREFIX}${memoryDir} `;
  for (const entry of entries) {
    const a = entry.attachment as { type?: unknown; hookEvent?: unknown; content?: unknown } | undefined;
    if (entry.type !== 'attachment' || a?.type !== 'hook_additional_context') continue;
    if (a.hookEvent !== undefined && a.hookEvent !== 'UserPromptSubmit') continue;
    const texts = Array.isArray(a.content) ? a.content : typeof a.content === 'string' ? [a.content] : [];
    for (const text of texts) {
      if (typeof text !== 'string' || !text.startsWith(lead)) continue;
      const first = text.slice(0, text.indexOf('\n') === -1 ? text.length : text.indexOf('\n'));
      let listed: unknown;
      try {
        listed = JSON.parse(first.slice(lead.length, first.endsWith(':') ? -1 : undefined));
      } catch {
        continue;
      }
      if (!Array.isArray(listed)) continue;
      for (const p of listed) if (typeof p === 'string') paths.add(p);
      bytes += Buffer.byteLength(text, 'utf8');
    }
  }
  return { paths, bytes };
}
