import { handleClaudeCodeHook } from '@engram/memory-client/claude-code-hooks';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import {
  additionalContextOutput,
  type HookEvent,
  parseHookInput,
} from '@engram/memory-core/hooks/claude-code-hook';
import type { AgentConfig } from '../config.js';
import { EXIT, type Output } from './output.js';

// `engram hook <event>`: Claude Code's hook commands. Claude Code's home is Engram's home here (ENGRAM_HOME
// defaults to CLAUDE_CONFIG_DIR or ~/.claude for hooks), so the workers read Claude Code's own transcript and
// write Claude Code's own memory directory. A hook never breaks Claude Code: every failure exits 0 with one
// line on stderr (exit 2 would drop the prompt or loop the turn), and durable work waits in the outbox.
// What each event does lives in @engram/memory-client (claude-code-hooks.ts), shared with the Agent SDK's
// in-process hook callbacks (@engram/agent-sdk); this file is the process's stdin/stdout side of it.

export { claudeHome } from './claude-home.js';

export async function readStdin(stream: NodeJS.ReadableStream = process.stdin): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

export interface HookResult {
  /** What the hook printed on stdout (Claude Code's answer channel), possibly empty. */
  stdout: string;
  /** One line for the person (stderr): what happened or why nothing did. */
  note: string;
}

export async function hookCommand(
  config: AgentConfig,
  event: HookEvent,
  inputText: string,
  io: Output,
): Promise<number> {
  let result: HookResult;
  try {
    result = await runHook(config, event, inputText);
  } catch (error) {
    result = { stdout: '', note: `engram hook ${event}: ${(error as Error).message}; nothing done.` };
  }
  if (result.stdout) io.out(result.stdout);
  if (result.note) io.err(`${result.note}\n`);
  return EXIT.ok;
}

export async function runHook(config: AgentConfig, event: HookEvent, inputText: string): Promise<HookResult> {
  const parsed = parseHookInput(inputText, event);
  if (!parsed.ok) return { stdout: '', note: `engram hook ${event}: ${parsed.reason}; nothing done.` };
  const memory = new MemoryQueue(config);
  try {
    const result = await handleClaudeCodeHook(
      {
        engramHome: config.engramHome,
        memoryDirOverride: config.memoryDirOverride,
        memory,
        fork: { model: config.model, maxOutputTokens: config.maxOutputTokens },
        teamSync: config.teamSync,
      },
      event,
      parsed.input,
    );
    return { stdout: additionalContextOutput(event, result.context), note: result.note };
  } finally {
    await memory.close().catch(() => {});
  }
}
