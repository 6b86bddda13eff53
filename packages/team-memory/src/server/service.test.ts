import { afterEach, describe, expect, inject, it } from 'vitest';
import { startRouteServer } from './http-server.js';
import { openTeamMemoryService, type TeamMemoryService } from './service.js';

// A host opens the service on a database URL (migrating it), mounts the routes behind its authenticate.

let opened: TeamMemoryService[] = [];
afterEach(async () => {
  await Promise.all(opened.map((s) => s.close()));
  opened = [];
});

describe('openTeamMemoryService', () => {
  it('migrates once, however many replicas open the same schema at the same time', async () => {
    const schema = `tm_open_${process.pid}`;
    opened = await Promise.all(
      [1, 2, 3].map(() => openTeamMemoryService({ databaseUrl: inject('postgresUrl'), schema })),
    );
    const server = await startRouteServer({
      routes: opened[0]!.routes,
      authenticate: async (header) => (header === 'Bearer tenant-one-key-xyz' ? { id: 'one' } : null),
    });
    try {
      const put = await fetch(`${server.url}/api/claude_code/team_memory?repo=o/r`, {
        method: 'PUT',
        headers: { Authorization: 'Bearer tenant-one-key-xyz', 'Content-Type': 'application/json' },
        body: JSON.stringify({ entries: { 'a.md': 'a' } }),
      });
      expect(put.status).toBe(200);
      // Another replica sees the same data.
      expect((await opened[2]!.store.hashes('one', 'o/r'))?.version).toBe(1);
      const wrongMethod = await fetch(`${server.url}/api/claude_code/team_memory?repo=o/r`, {
        method: 'DELETE',
      });
      expect(wrongMethod.status).toBe(405);
      expect(wrongMethod.headers.get('allow')).toBe('GET, PUT');
    } finally {
      await server.close();
    }
  });
});
