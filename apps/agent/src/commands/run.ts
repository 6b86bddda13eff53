import type { AgentConfig } from '../config.js';
import { describeRecall } from '../memory/recall-prefetch.js';
import { createAgentRuntime } from '../runtime.js';
import { AgentSession, describeReceipts } from '../session/agent-session.js';
import { mainAgentPolicy, parseAllowedTools } from '../session/permissions.js';
import { EXIT, type Output } from './output.js';

// `engram run -p "<prompt>"`: one non-interactive turn, then a bounded wait for this session's extraction so a
// short-lived process does not lose it.

export interface RunOptions {
  prompt: string;
  session?: string;
  cwd: string;
  outputFormat: 'text' | 'json';
  allowedTools?: string;
}

export async function runCommand(config: AgentConfig, opts: RunOptions, io: Output): Promise<number> {
  const runtime = createAgentRuntime(config);
  try {
    const session = await AgentSession.open(runtime, {
      cwd: opts.cwd,
      ...(opts.session ? { sessionId: opts.session } : {}),
    });
    if (opts.outputFormat === 'text') for (const notice of session.notices) io.err(`engram: ${notice}`);
    const turn = await session.runTurn(opts.prompt, {
      canUseTool: mainAgentPolicy({
        paths: session.paths,
        allowedTools: parseAllowedTools(opts.allowedTools),
      }),
    });
    if (opts.outputFormat === 'text') {
      const recalled = describeRecall(turn.memory.recall);
      if (recalled) io.err(recalled);
      io.out(turn.answer);
    }

    let drain: { done: boolean; waitedMs: number; receipts: unknown[] } | undefined;
    const extract = turn.memory.extract;
    if (runtime.memory && extract.status === 'queued' && config.drainTimeoutMs > 0) {
      const result = await runtime.memory.drainExtraction(session, turn.leaf.leafSeq, config.drainTimeoutMs);
      drain = result;
      await session.recordReceipts(result.receipts);
      if (opts.outputFormat === 'text') {
        if (result.receipts.some((r) => r.memories.length)) io.err(describeReceipts(result.receipts));
        else if (!result.done)
          io.err(
            `engram: memory extraction still pending after ${result.waitedMs} ms; it continues in the workers.`,
          );
      }
    } else if (extract.status === 'not-queued' && opts.outputFormat === 'text') {
      io.err(`engram: memory work was not queued: ${extract.reason}`);
    }

    if (opts.outputFormat === 'json') {
      io.out(
        JSON.stringify({
          answer: turn.answer,
          sessionId: turn.sessionId,
          usage: turn.usage,
          turns: turn.turns,
          endReason: turn.endReason,
          deniedToolCalls: turn.deniedCalls,
          notices: session.notices,
          ...(turn.compaction ? { compaction: turn.compaction } : {}),
          memory: {
            recall: turn.memory.recall,
            dream: turn.memory.dream,
            sessionMemoryUpdates: turn.memory.sessionMemoryUpdates,
            extract,
            drained: drain?.done ?? false,
            receipts: drain?.receipts ?? [],
          },
        }),
      );
    }
    return EXIT.ok;
  } finally {
    await runtime.close();
  }
}
