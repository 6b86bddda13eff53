// The soak's scripted model (testkit's server) in a process of its own, so its request parsing, prefix hashing
// and SSE encoding do not share an event loop with the load driver. Started by bench/soak.ts over an IPC
// channel: it sends `{ url }` once listening and answers `{ type: 'stats' }` with its counters
// (`{ type: 'reset' }` zeroes the fork counters).
//   soak mode:    foreground replies after SOAK_MODEL_MS; the extraction fork saves the session's SOAKFACT once
//   extract mode: every extraction fork answers "Nothing to save." after SOAK_EXTRACT_MODEL_MS
import { join } from 'node:path';
import { type RecordedRequest, startModelServer } from '@engram/testkit/model-server';
import { reply, text, textReply, toolUse } from '@engram/testkit/replies';

const mode = process.argv[2] === 'extract' ? 'extract' : 'soak';
const MODEL_MS = Number(process.env.SOAK_MODEL_MS ?? 300);
const EXTRACT_MODEL_MS = Number(process.env.SOAK_EXTRACT_MODEL_MS ?? 500);
const SMALL_MODEL = process.env.SOAK_SMALL_MODEL ?? 'soak-small-model';
export const EXTRACTION = 'You are now the memory extraction subagent';

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return (content as Array<{ text?: string }>).map((b) => b.text ?? '').join('\n');
}
const lastUserText = (r: RecordedRequest) => textOf(r.body.messages.at(-1)?.content ?? '');
/** A fork request: the extraction instruction is one of its user messages (the last, on the fork's first call). */
function isExtraction(r: RecordedRequest): boolean {
  for (let i = r.body.messages.length - 1; i >= 0; i--) {
    const m = r.body.messages[i]!;
    if (m.role === 'user' && textOf(m.content).includes(EXTRACTION)) return true;
  }
  return false;
}

function memoryFile(fact: string) {
  return `---\nname: ${fact}\ndescription: Soak fact ${fact}\ntype: project\n---\n${fact} holds.\n`;
}

let factWrites = 0;
let forkRequests = 0;
let firstForkAt = 0;
let requests = 0;
// Only counters are kept: the server's own request log is capped so a long soak does not grow this process.
const model = await startModelServer({ maxRecorded: 16 });
model.respond((r) => {
  requests++;
  if (r.body.model === SMALL_MODEL) return textReply('{"selected_memories": []}', { latencyMs: 50 });
  if (mode === 'extract') {
    if (!isExtraction(r)) return textReply('ok');
    forkRequests++;
    firstForkAt ||= r.receivedAt;
    return textReply('Nothing to save.', { latencyMs: EXTRACT_MODEL_MS });
  }
  if (isExtraction(r)) {
    forkRequests++;
    const instruction = lastUserText(r);
    if (!instruction.includes(EXTRACTION)) return textReply('Saved.', { latencyMs: 50 });
    const all = JSON.stringify(r.body.messages);
    const fact = /SOAKFACT-\d+/.exec(all)?.[0];
    const dir = /the memory directory `([^`]+)`/.exec(instruction)?.[1];
    if (!fact || !dir) return textReply('Nothing to save.', { latencyMs: 50 });
    // As a real model would: a fact already in the manifest of existing memory files is not saved again.
    if (instruction.includes(`project_${fact.toLowerCase()}_`))
      return textReply('Already saved.', { latencyMs: 50 });
    factWrites++;
    // A new file name per run: an extraction that ran twice for one fact shows up as a double.
    const name = `project_${fact.toLowerCase()}_${Math.random().toString(36).slice(2, 8)}.md`;
    return reply(
      text('Saving.'),
      toolUse('Write', { file_path: join(dir, name), content: memoryFile(fact) }),
    );
  }
  return textReply(`ok ${lastUserText(r).slice(0, 12)}`, { latencyMs: MODEL_MS });
});

process.on('message', (m: { type?: string }) => {
  if (m?.type === 'stats') process.send?.({ type: 'stats', factWrites, forkRequests, firstForkAt, requests });
  if (m?.type === 'reset') {
    forkRequests = 0;
    firstForkAt = 0;
  }
});
process.on('disconnect', () => {
  void model.close().finally(() => process.exit(0));
});
process.send?.({ type: 'ready', url: model.url });
