import { createInterface, type Interface } from 'node:readline';
import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { AgentSession, describeReceipts } from '@engram/agent-session/agent-session';
import { describeDreamReceipt, takeNewDreamReceipt } from '@engram/agent-session/memory/dream-trigger';
import { describeRecall } from '@engram/agent-session/memory/recall-prefetch';
import { mainAgentPolicy } from '@engram/agent-session/permissions';
import { listMemories } from '@engram/memory-core/memdir/memory-files';
import type { AgentConfig } from '../config.js';
import { createAgentRuntime } from '../runtime.js';
import { EXIT, type Output } from './output.js';

// `engram chat`: an interactive session. Asks before any write or non-read-only Bash outside the memory
// directory; shows memory receipts as workers report them, between prompts.

const HELP =
  'Commands: /memory (list memories), /compact (compact the context now), /clear (start a new session), /exit (quit), /help';

export async function chatCommand(
  config: AgentConfig,
  opts: { cwd: string; session?: string; input?: NodeJS.ReadableStream; output?: NodeJS.WritableStream },
  io: Output,
): Promise<number> {
  const runtime = createAgentRuntime(config);
  const output = opts.output ?? process.stdout;
  const rl: Interface = createInterface({ input: opts.input ?? process.stdin, terminal: false });
  // One buffered line reader for prompts and approvals alike: piped input is never dropped between questions.
  const lines = rl[Symbol.asyncIterator]();
  // The prompt being shown while we wait for a line: a background notice (a receipt) arriving meanwhile is
  // printed on its own line and the prompt is drawn again, instead of landing on the prompt line.
  let showing: string | undefined;
  const nextLine = async (prompt: string): Promise<string | undefined> => {
    output.write(prompt);
    showing = prompt;
    try {
      const next = await lines.next();
      return next.done ? undefined : String(next.value);
    } finally {
      showing = undefined;
    }
  };
  const notify = (line: string) => {
    if (showing === undefined) return io.err(line);
    output.write('\n');
    io.err(line);
    output.write(showing);
  };
  const ask = async (question: string) =>
    /^y(es)?$/i.test(((await nextLine(`${question} [y/N] `)) ?? '').trim());
  let session = await AgentSession.open(runtime, {
    cwd: opts.cwd,
    ...(opts.session ? { sessionId: opts.session } : {}),
  });
  const pending = new Set<Promise<void>>();
  const watchReceipts = (s: AgentSession, leafSeq: number) => {
    if (!runtime.memory) return;
    const p = runtime.memory.drainExtraction(s, leafSeq, config.drainTimeoutMs).then(async (result) => {
      await s.recordReceipts(result.receipts);
      if (result.receipts.some((r) => r.memories.length)) notify(`· ${describeReceipts(result.receipts)}`);
    });
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };
  try {
    io.err(`engram chat — session ${session.sessionId}${session.resumed ? ' (resumed)' : ''}. ${HELP}`);
    if (config.scriptedModel)
      io.err(
        'engram: using the scripted playground model of `engram dev --scripted-model` (no API key set).',
      );
    for (const notice of session.notices) io.err(`engram: ${notice}`);
    if (runtime.memory) {
      // The last consolidation of this project, shown once to the next chat session.
      const receipt = await takeNewDreamReceipt(runtime.memory, session).catch(() => undefined);
      if (receipt) io.err(`· ${describeDreamReceipt(receipt)}`);
    }
    while (true) {
      const read = await nextLine('> ');
      if (read === undefined) break; // input closed
      const line = read.trim();
      if (!line) continue;
      if (line === '/exit' || line === '/quit') break;
      if (line === '/help') {
        io.err(HELP);
        continue;
      }
      if (line === '/memory') {
        const { memories } = await listMemories(session.paths.memoryDir);
        if (memories.length === 0) io.out(`No memories yet in ${session.paths.memoryDir}`);
        for (const m of memories)
          io.out(`  [${m.type ?? '-'}] ${m.file} (${m.age}) — ${m.description ?? ''}`);
        continue;
      }
      if (line === '/compact') {
        const outcome = await session.compact();
        io.err(
          outcome.compacted
            ? `Compacted the conversation ${outcome.via === 'session-memory' ? 'from the session notes (no model call)' : 'with a model-written summary'}.`
            : `Nothing compacted (${outcome.reason}).`,
        );
        continue;
      }
      if (line === '/clear') {
        session = await AgentSession.open(runtime, { cwd: opts.cwd });
        io.err(`Started a new session ${session.sessionId}; memory and instructions reloaded.`);
        continue;
      }
      if (line.startsWith('/')) {
        io.err(`Unknown command ${line.split(/\s/)[0]}. ${HELP}`);
        continue;
      }
      try {
        const turn = await session.runTurn(line, {
          boundary: ATTENDED,
          canUseTool: mainAgentPolicy({ paths: session.paths, allowedTools: new Set(), ask }),
          onEvent: (e) => {
            if (e.type === 'tool_use') io.err(`· ${e.text}`);
          },
        });
        const recalled = describeRecall(turn.memory.recall);
        if (recalled) io.err(`· ${recalled}`);
        io.out(turn.answer);
        if (turn.memory.extract.status === 'queued') watchReceipts(session, turn.leaf.leafSeq);
        else if (turn.memory.extract.status === 'not-queued')
          io.err(`· memory work was not queued: ${turn.memory.extract.reason}`);
      } catch (error) {
        io.err(`engram: ${(error as Error).message}`);
      }
    }
    // Let a just-queued extraction land before the process goes (bounded by the drain timeout).
    await Promise.allSettled([...pending]);
    return EXIT.ok;
  } finally {
    rl.close();
    await runtime.close();
  }
}
