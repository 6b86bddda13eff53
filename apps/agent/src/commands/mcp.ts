import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { createMemoryServer } from '@engram/memory-mcp/memory-server';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { AgentConfig } from '../config.js';
import { EXIT } from './output.js';

// `engram mcp`: the memory MCP server (packages/memory-mcp) over stdio for one project's memory directory,
// the one `engram memory` commands use. stdout carries the protocol only; the command returns when the
// client closes the stream.

export async function mcpCommand(config: AgentConfig, opts: { cwd: string }): Promise<number> {
  const paths = await resolveEngramPaths({
    engramHome: config.engramHome,
    cwd: opts.cwd,
    ...(config.memoryDirOverride ? { memoryDirOverride: config.memoryDirOverride } : {}),
  });
  const server = createMemoryServer({ memoryDir: paths.memoryDir });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = resolve;
    process.stdin.once('end', resolve);
  });
  await server.connect(transport);
  await closed;
  await server.close();
  return EXIT.ok;
}
