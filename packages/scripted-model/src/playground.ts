import type { RecordedRequest, Responder } from './model-server.js';
import { jsonReply, reply, type ScriptStep, text, textReply, toolUse } from './replies.js';

// The keyless playground model of `engram dev --scripted-model`: canned, rule-based replies that let a newcomer
// watch Engram's memory loop with their own prompts and no API key. It is not a language model and says so in
// every answer. What it does:
// - the extraction fork: a user message that states a preference, a rule or a fact about the user or the
//   project ("always …", "never …", "I prefer …", "remember …", "I am …", "we use …") becomes one memory file,
//   written with the fork's Write tool into the memory directory named in its system prompt;
// - the recall selector (structured output): picks the listed memories that share a word with the query;
// - everything else (the main agent, session notes, consolidation): a short text reply that quotes any memory
//   recalled into the conversation, so a recall is visible on screen.

export const PLAYGROUND_LABEL = '[scripted playground model — canned replies, not Claude]';

const EXTRACTION_MARKER = 'You are now the memory extraction subagent';
const MEMORY_DIR = /persistent, file-based memory at `([^`]+)`/;

type Block = Record<string, unknown>;

function blocksOf(content: string | Block[]): Block[] {
  return typeof content === 'string' ? [{ type: 'text', text: content }] : content;
}

function textOf(content: string | Block[]): string {
  return blocksOf(content)
    .map((b) => {
      if (typeof b.text === 'string') return b.text;
      if (b.type === 'tool_result') {
        const c = b.content;
        return typeof c === 'string' ? c : Array.isArray(c) ? textOf(c as Block[]) : '';
      }
      return '';
    })
    .join('\n');
}

function withoutReminders(value: string): string {
  return value.replace(/<system-reminder>[\s\S]*?<\/system-reminder>/g, '').trim();
}

/** The user's own words in the conversation, newest last (tool results and reminders left out). */
function userStatements(r: RecordedRequest): string[] {
  const out: string[] = [];
  for (const m of r.body.messages) {
    if (m.role !== 'user') continue;
    const words = withoutReminders(
      blocksOf(m.content)
        .filter((b) => b.type === 'text' && typeof b.text === 'string')
        .map((b) => b.text as string)
        .join('\n'),
    );
    if (words && !words.includes(EXTRACTION_MARKER)) out.push(words);
  }
  return out;
}

const FEEDBACK = /\b(always|never|prefer|don'?t|do not|from now on|stop|instead of|please use|avoid)\b/i;
const USER = /\b(i am|i'm|my role|i work|my name|i use)\b/i;
const PROJECT = /\b(we use|our|this (repo|project|codebase)|the project|deadline|remember)\b/i;

export interface PlaygroundMemory {
  file: string;
  content: string;
}

function slugOf(words: string): string {
  const slug = words
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, ' ')
    .trim()
    .split(' ')
    .filter((w) => w.length > 2 && !['the', 'and', 'for', 'you', 'from', 'now', 'this', 'that'].includes(w))
    .slice(0, 4)
    .join('_');
  return slug || 'note';
}

/** The memory the playground saves for a user statement, or undefined when nothing is worth keeping. */
export function playgroundMemory(statement: string): PlaygroundMemory | undefined {
  const sentence = statement.replace(/\s+/g, ' ').trim();
  // Questions are not statements worth keeping.
  if (sentence.length < 8 || sentence.endsWith('?')) return undefined;
  const type = FEEDBACK.test(sentence)
    ? 'feedback'
    : USER.test(sentence)
      ? 'user'
      : PROJECT.test(sentence)
        ? 'project'
        : undefined;
  if (!type) return undefined;
  const short = sentence.length > 120 ? `${sentence.slice(0, 117)}…` : sentence;
  const name = sentence
    .split(/\s+/)
    .slice(0, 6)
    .join(' ')
    .replace(/[.:;,!?]+$/, '');
  const file = `${type}_${slugOf(sentence)}.md`;
  const content = [
    '---',
    `name: ${JSON.stringify(name)}`,
    `description: ${JSON.stringify(short)}`,
    `type: ${type}`,
    '---',
    sentence,
    '',
    `**Why:** the user said so (saved by the scripted playground model).`,
    '',
  ].join('\n');
  return { file, content };
}

function words(value: string): Set<string> {
  return new Set(
    value
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter((w) => w.length > 3),
  );
}

/** The recall selector: each listed memory ("- [type] file (time): description") sharing a word with the query. */
function select(r: RecordedRequest): ScriptStep {
  const message = textOf(r.body.messages.at(-1)?.content ?? '');
  const wanted = words(selectorQuery(r));
  const chosen: string[] = [];
  for (const line of message.split('\n')) {
    const m = /^- (?:\[[a-z]+\] )?(\S+\.md) \([^)]*\)(?:: (.*))?$/.exec(line);
    if (!m?.[1]) continue;
    const about = words(`${m[1].replace(/[_.-]/g, ' ')} ${m[2] ?? ''}`);
    if ([...about].some((w) => wanted.has(w))) chosen.push(m[1]);
    if (chosen.length === 5) break;
  }
  return jsonReply({ selected_memories: chosen });
}

function extract(r: RecordedRequest): ScriptStep {
  const last = textOf(r.body.messages.at(-1)?.content ?? '');
  if (!last.includes(EXTRACTION_MARKER)) {
    // The fork's second turn, after its Write: done.
    return textReply('Done.');
  }
  const system = JSON.stringify(r.body.system ?? '');
  const dir = MEMORY_DIR.exec(system)?.[1];
  const statement = userStatements(r).at(-1);
  const memory = statement ? playgroundMemory(statement) : undefined;
  if (!dir || !memory) return textReply('Nothing in this turn is worth remembering.');
  return reply(
    text(`Saving what the user said as a ${memory.file.split('_')[0]} memory.`),
    toolUse('Write', { file_path: `${dir.replace(/\/+$/, '')}/${memory.file}`, content: memory.content }),
  );
}

/** Memories recalled into the conversation: the body of each `<system-reminder>` that holds a memory file. */
function recalledMemories(r: RecordedRequest): string[] {
  const all = r.body.messages.map((m) => textOf(m.content)).join('\n');
  const out: string[] = [];
  for (const block of all.matchAll(/<system-reminder>\n(Memory[^\n]*)\n\n([\s\S]*?)\n<\/system-reminder>/g)) {
    const body = (block[2] ?? '').replace(/^---[\s\S]*?---\n/, '').trim();
    const first = body.split('\n').find((l) => l.trim());
    if (first && !out.includes(first)) out.push(first);
  }
  return out;
}

function answer(r: RecordedRequest): ScriptStep {
  const said = userStatements(r).at(-1) ?? '';
  const recalled = recalledMemories(r);
  const lines = [PLAYGROUND_LABEL];
  if (said) lines.push(`You said: “${said.length > 200 ? `${said.slice(0, 197)}…` : said}”`);
  if (recalled.length) lines.push(...recalled.map((m) => `From memory: ${m}`));
  else lines.push('No memory was recalled for this prompt.');
  return textReply(lines.join('\n'));
}

/** Does the conversation's context carry a MEMORY.md index with at least one entry? */
function hasIndexEntries(r: RecordedRequest): boolean {
  const first = r.body.messages[0];
  return !!first && /\]\([^)\s]+\.md\)/.test(textOf(first.content));
}

function isNewPrompt(r: RecordedRequest): boolean {
  const last = r.body.messages.at(-1);
  return !!last && last.role === 'user' && blocksOf(last.content).every((b) => b.type !== 'tool_result');
}

/**
 * A prompt and its selector query, compared by their opening: the query is the prompt capped (head and tail)
 * and redacted, so only its start is the prompt's own text in the common case.
 */
function promptKey(value: string): string {
  return value.replace(/\s+/g, ' ').trim().slice(0, 48);
}

/** The query of a recall selector request ("Query: …" before the manifest). */
function selectorQuery(r: RecordedRequest): string {
  const message = textOf(r.body.messages.at(-1)?.content ?? '');
  return /Query: ([\s\S]*?)\n\nAvailable memories:/.exec(message)?.[1] ?? '';
}

/** How many selector answers the responder remembers for prompts whose main request has not arrived yet. */
const ANSWERED_KEPT = 256;

/** The playground's responder for a `startModelServer({ fallback })`. */
export function playgroundResponder(options: { recallWaitMs?: number } = {}): Responder {
  // Recall runs beside the main model and is injected before the agent's next model call. A real model is
  // slower than the small one; the playground's first reply to a prompt waits (bounded) for the selector and
  // then looks around once (a Glob), so the recalled memory is in context when it answers.
  // The selector often answers before the main request arrives (they are sent together), so its answer is
  // remembered by query: a prompt whose selector already answered does not wait at all.
  const answered = new Map<string, number>();
  let waiters: Array<{ key: string; resolve: () => void }> = [];
  const selectorAnswered = (key: string) => {
    const waiting = waiters.find((w) => w.key === key);
    if (waiting) {
      waiters = waiters.filter((w) => w !== waiting);
      waiting.resolve();
      return;
    }
    answered.set(key, (answered.get(key) ?? 0) + 1);
    while (answered.size > ANSWERED_KEPT) answered.delete(answered.keys().next().value as string);
  };
  const takeAnswered = (key: string): boolean => {
    const count = answered.get(key);
    if (!count) return false;
    if (count === 1) answered.delete(key);
    else answered.set(key, count - 1);
    return true;
  };
  return async (r: RecordedRequest) => {
    if (r.body.output_config?.format) {
      const key = promptKey(selectorQuery(r));
      setTimeout(() => selectorAnswered(key), 0);
      return select(r);
    }
    if (JSON.stringify(r.body.messages).includes(EXTRACTION_MARKER)) return extract(r);
    if (isNewPrompt(r) && hasIndexEntries(r) && recalledMemories(r).length === 0 && r.body.tools?.length) {
      const key = promptKey(userStatements(r).at(-1) ?? '');
      if (!takeAnswered(key)) {
        let waiter: { key: string; resolve: () => void } | undefined;
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          new Promise<void>((resolve) => {
            waiter = { key, resolve };
            waiters.push(waiter);
          }),
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, options.recallWaitMs ?? 5_000);
          }),
        ]);
        clearTimeout(timer);
        waiters = waiters.filter((w) => w !== waiter);
      }
      return {
        ...reply(text('Let me look at the project first.'), toolUse('Glob', { pattern: '*' })),
        latencyMs: 300,
      };
    }
    return answer(r);
  };
}
