import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterEach, describe, expect, it } from 'vitest';

// `engram mcp` spawned from source by the real MCP SDK stdio client, as Claude Code's plugin runs it.
const ENGRAM_SOURCE = fileURLToPath(new URL('./bin/engram.ts', import.meta.url));

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
});

describe('engram mcp (stdio)', () => {
  it('serves the project memory directory: save through a tool lands in the dir `engram memory` uses, and reads back', async () => {
    const home = await fs.mkdtemp(join(tmpdir(), 'engram-mcp-home-'));
    const project = await fs.mkdtemp(join(tmpdir(), 'engram-mcp-project-'));
    dirs.push(home, project);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--conditions=source', '--import', 'tsx', ENGRAM_SOURCE, 'mcp', '--cwd', project],
      env: { PATH: process.env.PATH ?? '', HOME: home, ENGRAM_HOME: home },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'stdio-test', version: '0' });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain('save_memory');
      const saved = await client.callTool({
        name: 'save_memory',
        arguments: {
          file: 'testing.md',
          name: 'Tests run on real Redis',
          description: 'Integration tests use a real Redis, never a mock',
          type: 'feedback',
          body: 'Queue tests start a private Redis; do not mock BullMQ.\n',
        },
      });
      expect(saved.isError).toBeFalsy();
      const { memoryDir } = await resolveEngramPaths({ engramHome: home, cwd: project });
      expect(await fs.readFile(join(memoryDir, 'testing.md'), 'utf8')).toContain('do not mock BullMQ');
      expect(await fs.readFile(join(memoryDir, 'MEMORY.md'), 'utf8')).toContain('(testing.md)');
      const read = await client.callTool({ name: 'read_memory', arguments: { file: 'testing.md' } });
      expect(JSON.stringify(read.content)).toContain('do not mock BullMQ');
      const index = await client.readResource({ uri: 'memory://MEMORY.md' });
      expect(JSON.stringify(index.contents)).toContain('testing.md');
    } finally {
      await client.close();
    }
  });
});
