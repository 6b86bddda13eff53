import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TenantStore } from '@engram/tenants/tenant-store';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type RunningServer, startServer } from '../commands/serve.js';
import { loadAgentConfig } from '../config.js';
import { ROUTES } from './openapi.js';

// The OpenAPI document's Memory Stores and /mcp entries are true to the server: every operation, called on a
// running `engram serve` (real PostgreSQL for the stores), answers with a status the document lists and a
// body the schema it documents for that status accepts.

let base: string;
let server: RunningServer;
let key: string;
let workspace: string;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'engram-memstores-openapi-'));
  const engramHome = join(base, 'home');
  workspace = join(base, 'ws');
  mkdirSync(workspace, { recursive: true });
  key = (await new TenantStore(engramHome).add('alpha', workspace)).key;
  const env = {
    PATH: process.env.PATH,
    HOME: join(base, 'operator-home'),
    ENGRAM_HOME: engramHome,
    ENGRAM_NAMESPACE: `mso${randomBytes(4).toString('hex')}`,
    REDIS_URL: inject('redisUrl'),
    ANTHROPIC_API_KEY: 'test',
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
    ENGRAM_MANAGED_CLAUDE_MD: '/nonexistent/CLAUDE.md',
    ENGRAM_TEAM_MEMORY_DATABASE_URL: inject('postgresUrl'),
    ENGRAM_TEAM_MEMORY_SCHEMA: `mso_${randomBytes(5).toString('hex')}`,
  };
  server = await startServer(loadAgentConfig(env), { port: 0, host: '127.0.0.1' }, env);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  rmSync(base, { recursive: true, force: true });
});

interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API under test
  body: any;
  contentType: string;
}

async function call(
  path: string,
  opts: { method?: string; body?: unknown; key?: string | null; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const res = await fetch(`${server.url}${path}`, {
    method: opts.method ?? (opts.body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(opts.key === null ? {} : { authorization: `Bearer ${opts.key ?? key}` }),
      ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...opts.headers,
    },
    ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, body, contentType: res.headers.get('content-type') ?? '' };
}

const checked = new Set<string>();
function check(operationId: string, status: number, answer: Answer) {
  const route = ROUTES.find((r) => r.operationId === operationId);
  expect(route, operationId).toBeDefined();
  const documented = route?.responses[status as keyof typeof route.responses];
  expect(answer.status, `${operationId}: ${JSON.stringify(answer.body)}`).toBe(status);
  expect(documented, `${operationId} documents ${status}`).toBeDefined();
  if (documented?.schema) {
    const parsed = documented.schema.safeParse(answer.body);
    expect(parsed.success, `${operationId} ${status}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
  } else if (documented?.contentType) {
    expect(answer.contentType).toContain(documented.contentType);
  } else if (documented?.empty) {
    expect(answer.body).toBeUndefined();
  }
  checked.add(operationId);
}

describe('the OpenAPI document is true to the Memory Stores API and /mcp', () => {
  it('every memory-store operation answers with a body its documented schema accepts', async () => {
    const S = '/v1/memory_stores';
    const store = await call(S, { body: { name: 'docs', metadata: { owner: 'ops' } } });
    check('createMemoryStore', 200, store);
    const id = store.body.id as string;
    check('createMemoryStore', 400, await call(S, { body: { name: '' } }));
    check('createMemoryStore', 401, await call(S, { body: { name: 'x' }, key: null }));
    check('listMemoryStores', 200, await call(`${S}?limit=10`));
    check('getMemoryStore', 200, await call(`${S}/${id}`));
    check('getMemoryStore', 404, await call(`${S}/memstore_nope`));
    check('updateMemoryStore', 200, await call(`${S}/${id}`, { body: { metadata: { owner: null } } }));

    const created = await call(`${S}/${id}/memories?view=full`, {
      body: { path: '/notes/a.md', content: 'first', precondition: { type: 'not_exists' } },
    });
    check('createStoreMemory', 200, created);
    check(
      'createStoreMemory',
      409,
      await call(`${S}/${id}/memories`, {
        body: { path: '/notes/a.md', content: 'again', precondition: { type: 'not_exists' } },
      }),
    );
    const memId = created.body.id as string;
    check('listStoreMemories', 200, await call(`${S}/${id}/memories?depth=1`));
    check('listStoreMemories', 200, await call(`${S}/${id}/memories?view=full&order_by=path&order=asc`));
    check('exportStoreMemories', 200, await call(`${S}/${id}/memories/export`));
    check('getStoreMemory', 200, await call(`${S}/${id}/memories/${memId}`));
    check(
      'updateStoreMemory',
      200,
      await call(`${S}/${id}/memories/${memId}`, {
        body: {
          content: 'second',
          precondition: { type: 'content_sha256', content_sha256: created.body.content_sha256 },
        },
      }),
    );
    const versions = await call(`${S}/${id}/memory_versions?view=full`);
    check('listMemoryVersions', 200, versions);
    const oldest = versions.body.data.at(-1).id as string;
    check('getMemoryVersion', 200, await call(`${S}/${id}/memory_versions/${oldest}`));
    check(
      'redactMemoryVersion',
      200,
      await call(`${S}/${id}/memory_versions/${oldest}/redact`, { method: 'POST' }),
    );
    check('getMemoryVersion', 200, await call(`${S}/${id}/memory_versions/${oldest}`));
    check('deleteStoreMemory', 200, await call(`${S}/${id}/memories/${memId}`, { method: 'DELETE' }));
    check('listMemoryVersions', 200, await call(`${S}/${id}/memory_versions`));
    check('archiveMemoryStore', 200, await call(`${S}/${id}/archive`, { method: 'POST' }));
    check('deleteMemoryStore', 200, await call(`${S}/${id}`, { method: 'DELETE' }));
    check('getMemoryStore', 404, await call(`${S}/${id}`));

    const storeOps = ROUTES.filter((r) => r.tag === 'Memory stores').map((r) => r.operationId);
    expect(storeOps.filter((op) => !checked.has(op))).toEqual([]);
  });

  it('every /mcp operation answers as documented', async () => {
    const accept = { accept: 'application/json, text/event-stream' };
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'openapi-test', version: '1' },
      },
    };
    const mcp = `/mcp?cwd=${encodeURIComponent(workspace)}`;
    const init = await call(mcp, { body: initialize, headers: accept });
    check('postMcpMessage', 200, init);
    expect(init.body.result.serverInfo).toBeDefined();
    check(
      'postMcpMessage',
      202,
      await call(mcp, { body: { jsonrpc: '2.0', method: 'notifications/initialized' }, headers: accept }),
    );
    check('postMcpMessage', 400, await call('/mcp', { body: initialize, headers: accept }));
    check('postMcpMessage', 401, await call(mcp, { body: initialize, headers: accept, key: null }));
    check('postMcpMessage', 403, await call('/mcp?cwd=/', { body: initialize, headers: accept }));
    check('openMcpStream', 406, await call(mcp, { headers: { accept: 'application/json' } }));
    check('closeMcpSession', 200, await call(mcp, { method: 'DELETE' }));
  });
});
