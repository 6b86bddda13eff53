import { randomUUID } from 'node:crypto';
import { queuedRecallSelector } from '@engram/memory-client/queued-recall';
import { resolveEngramPaths } from '@engram/memory-core/paths/memory-paths';
import { createMemoryServer } from '@engram/memory-mcp/memory-server';
import { resolveTenantCwd } from '@engram/tenants/tenant-store';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { ExtraRoute } from './hosted-app.js';

// `/mcp` on `engram serve`: the memory MCP server over Streamable HTTP, behind the tenant key like /v1. The
// memory directory comes from the authenticated tenant and a `?cwd=` project inside its workspace (the same
// rule as GET /v1/memory); no tool argument can name another directory. Stateless: one server per request.
// search_memories asks the workers' recall selector with a recall job of the tenant's (lexical fallback).

function refuse(res: import('node:http').ServerResponse, status: number, code: string, message: string) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { code, message } }));
}

/** How long search_memories waits for the workers' recall selector before ranking lexically. */
export const MCP_ROUTE_RECALL_WAIT_MS = 4_000;

const handler: ExtraRoute['handler'] = async (req, res, { tenant, url, memory }) => {
  const cwdParam = url.searchParams.get('cwd');
  if (!cwdParam)
    return refuse(res, 400, 'INVALID_REQUEST', 'Pass the project directory as /mcp?cwd=/abs/path.');
  const cwd = await resolveTenantCwd(tenant, cwdParam);
  if (!cwd) {
    return refuse(
      res,
      403,
      'CWD_OUTSIDE_WORKSPACE',
      `cwd ${cwdParam} is not a directory inside this tenant's workspace.`,
    );
  }
  const paths = await resolveEngramPaths({ engramHome: tenant.home, cwd });
  // The recall job is the tenant's (scope from the authenticated key): its worker reads that tenant's area only.
  const selector = memory
    ? queuedRecallSelector(
        memory,
        { sessionId: randomUUID(), paths, tenant: tenant.id },
        MCP_ROUTE_RECALL_WAIT_MS,
      )
    : undefined;
  const server = createMemoryServer({ memoryDir: paths.memoryDir, ...(selector ? { selector } : {}) });
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
};

export const MCP_ROUTES: readonly ExtraRoute[] = (['POST', 'GET', 'DELETE'] as const).map((method) => ({
  method,
  path: '/mcp',
  handler,
}));
