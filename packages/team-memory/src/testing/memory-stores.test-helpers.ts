import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { createMemoryStoresHandler } from '../memory-stores/api.js';
import { JOB_AUTHOR_HEADER, memoryStoreActor } from '../memory-stores/job-author.js';
import { MemoryStoresRepo } from '../memory-stores/repo.js';

// A real Memory Stores API for tests of packages that cannot start `engram serve` (the worker service): the
// production handler and repository on a fresh PostgreSQL schema, behind a node:http host that authenticates
// issued keys (`x-api-key` or `Authorization: Bearer`) and builds the actor with the production rule
// (`memoryStoreActor`, the job header) — the same two seams `engram serve`'s hosted app fills.

export interface MemoryStoresTestServer {
  url: string;
  repo: MemoryStoresRepo;
  issueKey(tenantId: string): string;
  close(): Promise<void>;
}

export async function startMemoryStoresTestServer(opts: {
  postgresUrl: string;
}): Promise<MemoryStoresTestServer> {
  const schema = `ms_${randomBytes(5).toString('hex')}`;
  const repo = await MemoryStoresRepo.open({ connectionString: opts.postgresUrl, schema });
  const handler = createMemoryStoresHandler(repo);
  const keys = new Map<string, string>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
      const key = bearer ?? (req.headers['x-api-key'] as string | undefined);
      const tenant = key ? keys.get(key) : undefined;
      let response: Response;
      if (!tenant) {
        response = Response.json(
          { type: 'error', error: { type: 'authentication_error', message: 'bad key' } },
          { status: 401 },
        );
      } else {
        const actor = memoryStoreActor(tenant, req.headers[JOB_AUTHOR_HEADER] as string | undefined);
        if (!actor.ok) {
          response = Response.json(
            { type: 'error', error: { type: 'invalid_request_error', message: actor.message } },
            { status: 400 },
          );
        } else {
          const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
          const request = new Request(`http://localhost${req.url}`, {
            method: req.method ?? 'GET',
            headers: req.headers as Record<string, string>,
            ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream, duplex: 'half' } : {}),
          } as RequestInit);
          response = await handler(request, { tenant, actor: actor.actor });
        }
      }
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(Buffer.from(await response.arrayBuffer()));
    })().catch((error) => {
      res.writeHead(500).end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    repo,
    issueKey: (tenantId) => {
      const key = `msk_${randomBytes(18).toString('base64url')}`;
      keys.set(key, tenantId);
      return key;
    },
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await repo.close();
    },
  };
}
