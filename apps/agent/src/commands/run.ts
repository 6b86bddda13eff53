import { ATTENDED } from '@engram/agent-runtime/sandbox/boundary';
import { AgentSession } from '@engram/agent-session/agent-session';
import {
  type ExtractionOutcome,
  followExtraction,
  memoryWorkFailed,
} from '@engram/agent-session/extraction-outcome';
import { describeRecall } from '@engram/agent-session/memory/recall-prefetch';
import { mainAgentPolicy, parseAllowedTools } from '@engram/agent-session/permissions';
import type { AgentConfig } from '../config.js';
import { createAgentRuntime } from '../runtime.js';
import { describeExtraction } from './memory-status.js';
import { EXIT, type Output } from './output.js';

// `engram run -p "<prompt>"`: one non-interactive turn, then a bounded wait for this session's extraction so a
// short-lived process does not lose it. The exit code tells a script whether the memory work made it:
// EXIT.memory when it was lost (could not be queued nor kept in the session's outbox, or its job failed for
// good); work kept in the outbox (the queue engine is down) is durable, so the turn exits 0 with a stderr line.

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
    if (opts.outputFormat === 'text') {
      if (config.scriptedModel)
        io.err(
          'engram: using the scripted playground model of `engram dev --scripted-model` (no API key set).',
        );
      for (const notice of session.notices) io.err(`engram: ${notice}`);
    }
    const turn = await session.runTurn(opts.prompt, {
      boundary: ATTENDED,
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

    const extract = turn.memory.extract;
    const outcome: ExtractionOutcome =
      extract.status === 'queued' && config.drainTimeoutMs === 0
        ? { status: 'pending', waitedMs: 0 }
        : await followExtraction(runtime.memory, session, extract, turn.leaf.leafSeq, config.drainTimeoutMs);
    if (outcome.status === 'done') await session.recordReceipts(outcome.receipts);
    // Work kept in the outbox exits 0: say so on stderr in both formats, so a script that reads only the exit
    // code and stdout's JSON still leaves a trace of it.
    const kept = outcome.status === 'not-queued' && outcome.kept === true;
    if (opts.outputFormat === 'text' || kept) {
      const line = describeExtraction(outcome);
      if (line) io.err(line);
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
          ...(config.scriptedModel ? { model: 'scripted-playground' } : {}),
          ...(turn.compaction ? { compaction: turn.compaction } : {}),
          memory: {
            /** done | failed | retrying | pending | not-queued | skipped | disabled */
            status: outcome.status,
            ...('reason' in outcome ? { reason: outcome.reason } : {}),
            ...('kept' in outcome && outcome.kept ? { kept: true } : {}),
            ...('lastError' in outcome ? { lastError: outcome.lastError } : {}),
            ...('attempts' in outcome ? { attempts: outcome.attempts } : {}),
            recall: turn.memory.recall,
            dream: turn.memory.dream,
            sessionMemoryUpdates: turn.memory.sessionMemoryUpdates,
            extract,
            drained: outcome.status === 'done',
            receipts: outcome.status === 'done' ? outcome.receipts : [],
          },
        }),
      );
    }
    return memoryWorkFailed(outcome) ? EXIT.memory : EXIT.ok;
  } finally {
    await runtime.close();
  }
}
