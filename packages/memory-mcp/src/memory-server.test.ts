import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryServer, MEMORY_INDEX_URI } from './memory-server.js';

let memoryDir: string;
let client: Client;

async function connect(selector?: Parameters<typeof createMemoryServer>[0]['selector']) {
  const server = createMemoryServer({ memoryDir, ...(selector ? { selector } : {}) });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  client = new Client({ name: 'test', version: '0' });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
}

function payload(result: Awaited<ReturnType<Client['callTool']>>): Record<string, unknown> {
  const [first] = result.content as { type: string; text: string }[];
  return JSON.parse(first!.text) as Record<string, unknown>;
}

const deploy = {
  file: 'deploy.md',
  name: 'Deploy with blue-green',
  description: 'Production deploys use the blue-green switch',
  type: 'project',
  body: 'Deploys to production go through the blue-green switch in ops/deploy.sh.\n',
};

beforeEach(async () => {
  memoryDir = await fs.mkdtemp(join(tmpdir(), 'engram-mcp-'));
});
afterEach(async () => {
  await client?.close();
  await fs.rm(memoryDir, { recursive: true, force: true });
});

describe('engram MCP server (real MCP client)', () => {
  it('lists the five tools and the MEMORY.md resource', async () => {
    await connect();
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'forget_memory',
      'list_memories',
      'read_memory',
      'save_memory',
      'search_memories',
    ]);
    const { resources } = await client.listResources();
    expect(resources.map((r) => r.uri)).toEqual([MEMORY_INDEX_URI]);
  });

  it('save writes the file and its index pointer; list, read, search and the resource see it; forget removes both', async () => {
    await connect();
    const saved = await client.callTool({ name: 'save_memory', arguments: deploy });
    expect(saved.isError).toBeFalsy();
    expect(payload(saved)).toMatchObject({ file: 'deploy.md', created: true, indexUpdated: true });
    const onDisk = await fs.readFile(join(memoryDir, 'deploy.md'), 'utf8');
    expect(onDisk).toContain('name: Deploy with blue-green');
    expect(onDisk).toContain('blue-green switch in ops/deploy.sh');

    const index = await client.readResource({ uri: MEMORY_INDEX_URI });
    expect((index.contents[0] as { text: string }).text).toContain('(deploy.md)');

    const listed = payload(await client.callTool({ name: 'list_memories', arguments: {} }));
    expect(listed.memories).toEqual([expect.objectContaining({ file: 'deploy.md', type: 'project' })]);

    const read = payload(await client.callTool({ name: 'read_memory', arguments: { file: 'deploy.md' } }));
    expect(read).toMatchObject({ name: 'Deploy with blue-green', type: 'project' });
    expect(read.body).toContain('ops/deploy.sh');

    const found = payload(
      await client.callTool({
        name: 'search_memories',
        arguments: { query: 'how do production deploys work?' },
      }),
    );
    expect(found).toMatchObject({
      via: 'lexical',
      memories: [expect.objectContaining({ file: 'deploy.md' })],
    });

    const forgot = payload(
      await client.callTool({ name: 'forget_memory', arguments: { file: 'deploy.md' } }),
    );
    expect(forgot).toEqual({ fileRemoved: true, indexLinesRemoved: 1 });
    await expect(fs.stat(join(memoryDir, 'deploy.md'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await fs.readFile(join(memoryDir, 'MEMORY.md'), 'utf8')).not.toContain('deploy.md');
  });

  it('search uses the injected recall selector, and falls back to lexical ranking when it throws', async () => {
    await client?.close();
    await connect(async (_query, headers) => headers.map((h) => h.filename));
    await client.callTool({ name: 'save_memory', arguments: deploy });
    await client.callTool({
      name: 'save_memory',
      arguments: {
        ...deploy,
        file: 'style.md',
        name: 'Tabs',
        description: 'The user prefers tabs',
        type: 'user',
      },
    });
    const viaSelector = payload(
      await client.callTool({ name: 'search_memories', arguments: { query: 'anything' } }),
    );
    expect(viaSelector.via).toBe('selector');
    expect((viaSelector.memories as unknown[]).length).toBe(2);
    await client.close();
    await connect(async () => {
      throw new Error('selector down');
    });
    const fallback = payload(
      await client.callTool({
        name: 'search_memories',
        arguments: { query: 'production deploys blue-green' },
      }),
    );
    expect(fallback).toMatchObject({
      via: 'lexical',
      memories: [expect.objectContaining({ file: 'deploy.md' })],
    });
  });

  it('save refuses a secret with a typed tool error and writes nothing', async () => {
    await connect();
    const result = await client.callTool({
      name: 'save_memory',
      arguments: { ...deploy, body: 'The deploy key is ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R.\n' },
    });
    expect(result.isError).toBe(true);
    expect(payload(result)).toMatchObject({ code: 'SECRET_IN_MEMORY', retryable: false });
    expect(await fs.readdir(memoryDir)).toEqual([]);
  });

  it('save and read refuse a path outside the memory directory; the same call inside succeeds', async () => {
    await connect();
    const outside = join(memoryDir, '..', `escape-${Date.now()}.md`);
    for (const file of ['../escape.md', outside, 'sub/../../escape.md', '.history/x.md', 'MEMORY.md']) {
      const result = await client.callTool({ name: 'save_memory', arguments: { ...deploy, file } });
      expect(result.isError, file).toBe(true);
      expect(payload(result).code, file).toBe('INVALID_MEMORY_FILE');
    }
    await expect(fs.stat(outside)).rejects.toMatchObject({ code: 'ENOENT' });
    const read = await client.callTool({ name: 'read_memory', arguments: { file: '../../etc/passwd.md' } });
    expect(payload(read).code).toBe('INVALID_MEMORY_FILE');
    const inside = await client.callTool({
      name: 'save_memory',
      arguments: { ...deploy, file: 'ops/deploy.md' },
    });
    expect(inside.isError).toBeFalsy();
  });

  it('save refuses a symlink inside the memory directory that leads out (the write policy decides)', async () => {
    const elsewhere = await fs.mkdtemp(join(tmpdir(), 'engram-mcp-out-'));
    await fs.symlink(elsewhere, join(memoryDir, 'linked'));
    await connect();
    const result = await client.callTool({
      name: 'save_memory',
      arguments: { ...deploy, file: 'linked/x.md' },
    });
    expect(result.isError).toBe(true);
    expect(String(payload(result).code)).toMatch(/OUTSIDE_MEMORY_DIR|WRITE_DENIED/);
    expect(await fs.readdir(elsewhere)).toEqual([]);
    await fs.rm(elsewhere, { recursive: true, force: true });
  });

  it('a call with arguments that fail the zod schema is a tool error naming the field', async () => {
    await connect();
    const result = await client.callTool({
      name: 'save_memory',
      arguments: { ...deploy, type: 'secretive' },
    });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain('type');
  });
});
