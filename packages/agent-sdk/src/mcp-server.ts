import type { McpSdkServerConfigWithInstance } from '@anthropic-ai/claude-agent-sdk';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import {
  createMemoryServer,
  MCP_SERVER_NAME,
  type MemoryServerOptions,
} from '@engram/memory-mcp/memory-server';

// Engram's memory MCP server (packages/memory-mcp) as an in-process server for the Agent SDK's `query()`:
// `options.mcpServers: { engram: await engramMcpServer({ engramHome, cwd }) }`; the model sees its tools as
// `mcp__engram__search_memories`, `mcp__engram__save_memory`, ... The directory is the host's choice (the
// project of `cwd` under `engramHome`, exactly what the hooks and `engram memory path` use); no tool argument
// names one. One server per query: an MCP server instance serves one connection.

export interface EngramMcpServerOptions extends Omit<MemoryServerOptions, 'memoryDir'> {
  /** Claude Code's config directory for the query (CLAUDE_CONFIG_DIR): Engram's home. */
  engramHome: string;
  /** The query's working directory (`options.cwd`): its project decides the memory directory. */
  cwd: string;
  memoryDirOverride?: string;
}

export async function engramMcpServer(opts: EngramMcpServerOptions): Promise<McpSdkServerConfigWithInstance> {
  const { engramHome, cwd, memoryDirOverride, ...server } = opts;
  const paths = await resolveEngramPaths({
    engramHome,
    cwd,
    ...(memoryDirOverride ? { memoryDirOverride } : {}),
  });
  return {
    type: 'sdk',
    name: MCP_SERVER_NAME,
    instance: createMemoryServer({ ...server, memoryDir: paths.memoryDir }),
  };
}
