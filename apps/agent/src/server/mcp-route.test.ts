import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { TenantStore } from '@engram/tenants/tenant-store';
import { uniquePrefix } from '@engram/testkit/bullmq-helpers';
import { type ModelServer, startModelServer } from '@engram/testkit/model-server';
import { jsonReply } from '@engram/testkit/replies';
import { startTestWorkerService } from '@engram/worker-service/testing/service.test-helpers';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { type RunningServer, startServer } from '../commands/serve.js';
import { loadAgentConfig } from '../config.js';

// `/mcp` on a real `engram serve` (real Redis for its queue engine), driven by the real MCP SDK client over
// Streamable HTTP with tenant keys.

const servers: RunningServer[] = [];
const clients: Client[] = [];
const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
  for (const s of servers.splice(0)) await s.stop();
  for (const stop of stops.splice(0)) await stop();
});

async function setup() {
  const base = mkdtempSync(join(tmpdir(), 'engram-mcp-http-'));
  const engramHome = join(base, 'home');
  const env = {
    PATH: process.env.PATH,
    HOME: join(base, 'operator-home'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: uniquePrefix('mcp'),
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
  };
  const ws = (name: string) => {
    const dir = join(base, 'workspaces', name);
    mkdirSync(dir, { recursive: true });
    return dir;
  };
  const store = new TenantStore(engramHome);
  const acme = await store.add('acme', ws('acme'));
  const rival = await store.add('rival', ws('rival'));
  const server = await startServer(loadAgentConfig(env), { port: 0, host: '127.0.0.1' }, env);
  servers.push(server);
  return { server, acme, rival, store, engramHome, namespace: env.ENGRAM_NAMESPACE };
}

async function connect(url: string, key: string, cwd: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp?cwd=${encodeURIComponent(cwd)}`), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  const client = new Client({ name: 'http-test', version: '0' });
  await client.connect(transport);
  clients.push(client);
  return client;
}

const fact = {
  file: 'deploys.md',
  name: 'Deploys',
  description: 'Deploys go through blue-green',
  type: 'project',
  body: 'acme deploys with blue-green.\n',
};

describe('/mcp on engram serve', () => {
  it('a wrong or missing key gets 401 before any MCP handling', async () => {
    const { server, acme } = await setup();
    for (const auth of ['Bearer egk.acme.wrong', undefined]) {
      const res = await fetch(`${server.url}/mcp?cwd=${encodeURIComponent(acme.tenant.workspace)}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(auth ? { authorization: auth } : {}),
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(res.status).toBe(401);
    }
  });

  it("tenant A saves and reads its memory (positive control); tenant B sees none of it and cannot point cwd at A's workspace", async () => {
    const { server, acme, rival } = await setup();
    const a = await connect(server.url, acme.key, acme.tenant.workspace);
    const saved = await a.callTool({ name: 'save_memory', arguments: fact });
    expect(saved.isError).toBeFalsy();
    const readBack = await a.callTool({ name: 'read_memory', arguments: { file: 'deploys.md' } });
    expect(JSON.stringify(readBack.content)).toContain('acme deploys with blue-green');
    const { memoryDir } = await resolveEngramPaths({
      engramHome: acme.tenant.home,
      cwd: acme.tenant.workspace,
    });
    expect(readFileSync(join(memoryDir, 'deploys.md'), 'utf8')).toContain('blue-green');

    const b = await connect(server.url, rival.key, rival.tenant.workspace);
    const bRead = await b.callTool({ name: 'read_memory', arguments: { file: 'deploys.md' } });
    expect(bRead.isError).toBe(true);
    expect(JSON.stringify(bRead.content)).toContain('ENOENT');
    const bList = await b.callTool({ name: 'list_memories', arguments: {} });
    expect(JSON.stringify(bList.content)).not.toContain('deploys.md');
    const bSearch = await b.callTool({
      name: 'search_memories',
      arguments: { query: 'how does acme deploy blue-green' },
    });
    expect(JSON.stringify(bSearch.content)).not.toContain('deploys.md');

    const res = await fetch(`${server.url}/mcp?cwd=${encodeURIComponent(acme.tenant.workspace)}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${rival.key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('CWD_OUTSIDE_WORKSPACE');
  });

  it("search_memories asks the workers' recall selector with a job of the authenticated tenant's", async () => {
    const { server, acme, rival, engramHome, namespace } = await setup();
    const model: ModelServer = await startModelServer();
    stops.push(() => model.close());
    const manifests: string[] = [];
    model.respond((r) => {
      const manifest = JSON.stringify(r.body.messages);
      manifests.push(manifest);
      return jsonReply({ selected_memories: manifest.includes('deploys.md') ? ['deploys.md'] : [] });
    });
    const workers = await startTestWorkerService({
      modelUrl: model.url,
      engramHome,
      queues: 'recall',
      namespace,
    });
    stops.push(() => workers.stop('test'));
    const a = await connect(server.url, acme.key, acme.tenant.workspace);
    expect((await a.callTool({ name: 'save_memory', arguments: fact })).isError).toBeFalsy();
    const found = await a.callTool({
      name: 'search_memories',
      arguments: { query: 'how do we ship to production' },
    });
    // The selector picked it (a lexical ranking of this query would not: no word in common).
    expect(found.structuredContent).toMatchObject({ via: 'selector', memories: [{ file: 'deploys.md' }] });
    expect(manifests.some((m) => m.includes('deploys.md'))).toBe(true);

    const b = await connect(server.url, rival.key, rival.tenant.workspace);
    const none = await b.callTool({
      name: 'search_memories',
      arguments: { query: 'how do we ship to production' },
    });
    expect(JSON.stringify(none.content)).not.toContain('deploys.md');
    // The rival's recall job saw the rival's (empty) memory directory, never acme's manifest.
    expect(manifests.filter((m) => m.includes('deploys.md'))).toHaveLength(1);
  }, 60_000);
});
