import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { startTeamMemoryTestServer, type TeamMemoryTestServer } from '../testing/server.test-helpers.js';
import { TeamMemoryHttpClient, TeamSyncHttpError } from './http-client.js';

// A 404 is "no team memory yet" only when the team memory service says so; a server without the route (an
// `engram serve` that did not mount it, a wrong URL) is an error, never an empty repository.

let closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.map((c) => c()));
  closers = [];
});

describe('TeamMemoryHttpClient 404s', () => {
  it('reads the service\'s own "not found yet" as empty', async () => {
    const service: TeamMemoryTestServer = await startTeamMemoryTestServer({
      postgresUrl: inject('postgresUrl'),
    });
    closers.push(() => service.close());
    const client = new TeamMemoryHttpClient({ baseUrl: service.url, apiKey: await service.issueKey('t1') });
    expect(await client.fetchData('o/none')).toEqual({ kind: 'empty' });
    expect(await client.fetchHashes('o/none')).toEqual({ kind: 'empty' });
  });

  it('reports a missing route as an error, not as no data', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'NOT_FOUND', message: 'No route' } }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => server.close(() => r())));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const client = new TeamMemoryHttpClient({ baseUrl: url, apiKey: 'k'.repeat(20), maxRetries: 0 });
    for (const call of [() => client.fetchData('o/r'), () => client.fetchHashes('o/r')]) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TeamSyncHttpError);
      expect((error as TeamSyncHttpError).kind).toBe('route');
      expect((error as TeamSyncHttpError).message).toMatch(/no team memory route/);
    }
  });
});
