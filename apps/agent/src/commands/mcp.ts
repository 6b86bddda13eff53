import { randomUUID } from 'node:crypto';
import { MemoryQueue } from '@engram/memory-client/memory-queue';
import { queuedRecallSelector } from '@engram/memory-client/queued-recall';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { createMemoryServer } from '@engram/memory-mcp/memory-server';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { AgentConfig } from '../config.js';
import { EXIT } from './output.js';

// `engram mcp`: the memory MCP server (packages/memory-mcp) over stdio for one project's memory directory,
// the one `engram memory` commands use. stdout carries the protocol only; the command returns when the
// client closes the stream. With a queue configured, search_memories asks the workers' recall selector (a
// recall job, waited for at most MCP_RECALL_WAIT_MS) and ranks lexically when there is no answer.

export const MCP_RECALL_WAIT_MS = 4_000;

export async function mcpCommand(config: AgentConfig, opts: { cwd: string }): Promise<number> {
  const paths = await resolveEngramPaths({
    engramHome: config.engramHome,
    cwd: opts.cwd,
    ...(config.memoryDirOverride ? { memoryDirOverride: config.memoryDirOverride } : {}),
  });
  // An MCP client names no session; the recall jobs of this server share one id of their own.
  const memory = config.backend.implicit ? undefined : new MemoryQueue(config);
  const selector = memory
    ? queuedRecallSelector(memory, { sessionId: randomUUID(), paths }, MCP_RECALL_WAIT_MS)
    : undefined;
  const server = createMemoryServer({ memoryDir: paths.memoryDir, ...(selector ? { selector } : {}) });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = resolve;
    process.stdin.once('end', resolve);
  });
  await server.connect(transport);
  await closed;
  await server.close();
  await memory?.close().catch(() => {});
  return EXIT.ok;
}
