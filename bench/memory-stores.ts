// Memory stores benchmark (issue 26). What the API and the client cost over the same work done directly on
// PostgreSQL, in one run, on an embedded PostgreSQL:
//   - listing a 2,000-memory store with view=basic through the SDK (`client.beta.memoryStores.memories.list`,
//     the async iterator over 100-item pages, HTTP to the production handler) vs the same paged SELECTs made
//     by the repository directly (`MemoryStoresRepo.listMemories`, no HTTP, no JSON);
//   - a full sync of 500 changed files through the store client (`syncTeamStore`: one listing, the local walk
//     with the secret scan, 500 conditional updates over HTTP) vs the same 500 conditional updates written
//     directly through the repository (one transaction each, the same row lock and version row).
// Samples alternate between the two sides of each pair; medians and their ratio are printed.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { memoryStoreClient, StoreSyncStateFile, syncTeamStore } from '@engram/team-memory/client/store-sync';
import { sha256 } from '@engram/team-memory/memory-stores/repo';
import { startMemoryStoresTestServer } from '@engram/team-memory/testing/memory-stores.test-helpers';
import { provisionPostgres } from '@engram/testkit/postgres';
import { median, ms } from './lib/stats.js';

const MEMORIES = 2_000;
const FILES = 500;
const LIST_SAMPLES = 9;
const SYNC_SAMPLES = 5;
const TENANT = 'bench';
const actor = { type: 'api_actor' as const, api_key_id: `apikey_${TENANT}` };

const pg = await provisionPostgres();
const server = await startMemoryStoresTestServer({ postgresUrl: pg.url });
const apiKey = server.issueKey(TENANT);
const sdk = new Anthropic({ baseURL: server.url, apiKey, maxRetries: 0 });
const root = mkdtempSync(join(tmpdir(), 'engram-bench-stores-'));
const paragraph =
  'Deploys go through the blue pipeline; the staging database is reset nightly at 02:00 UTC.\n';
const body = (i: number, rev: number) => `---\nname: note ${i}\n---\nrev ${rev}\n${paragraph.repeat(8)}`;

async function time(fn: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

try {
  // 1. Listing.
  const big = await server.repo.createStore(TENANT, { name: 'big', description: '', metadata: {} });
  for (let i = 0; i < MEMORIES; i++)
    await server.repo.createMemory(TENANT, big.id, {
      path: `/area-${i % 20}/note-${String(i).padStart(4, '0')}.md`,
      content: body(i, 0),
      actor,
    });
  const viaSdk: number[] = [];
  const direct: number[] = [];
  let countSdk = 0;
  let countDirect = 0;
  for (let s = 0; s < LIST_SAMPLES + 1; s++) {
    const a = await time(async () => {
      countSdk = 0;
      for await (const m of sdk.beta.memoryStores.memories.list(big.id, { view: 'basic', limit: 100 }))
        if (m.type === 'memory') countSdk++;
    });
    const b = await time(async () => {
      countDirect = 0;
      let after: string | undefined;
      for (;;) {
        const page = await server.repo.listMemories(TENANT, big.id, {
          pathPrefix: '/',
          depth: 0,
          limit: 100,
          after,
          view: 'basic',
        });
        countDirect += page.items.length;
        const last = page.items.at(-1);
        if (!page.more || !last) break;
        after = last.kind === 'memory' ? last.row.path : last.path;
      }
    });
    if (s === 0) continue; // warm-up
    viaSdk.push(a);
    direct.push(b);
  }
  if (countSdk !== MEMORIES || countDirect !== MEMORIES)
    throw new Error(`listed ${countSdk} / ${countDirect}, expected ${MEMORIES}`);

  // 2. Full sync of 500 changed files.
  const syncStore = await sdk.beta.memoryStores.create({ name: 'sync' });
  const teamDir = join(root, 'team');
  const target = {
    teamDir,
    storeId: syncStore.id,
    client: memoryStoreClient({ baseUrl: server.url, apiKey, maxRetries: 0 }),
    state: new StoreSyncStateFile(join(root, 'team-store-sync.json')),
  };
  const writeAll = (rev: number) => {
    for (let i = 0; i < FILES; i++) {
      const sub = join(teamDir, `area-${i % 10}`);
      mkdirSync(sub, { recursive: true });
      writeFileSync(join(sub, `note-${i}.md`), body(i, rev));
    }
  };
  writeAll(0);
  await syncTeamStore(target);
  const directStore = await server.repo.createStore(TENANT, {
    name: 'direct',
    description: '',
    metadata: {},
  });
  const ids: Array<{ id: string; sha: string }> = [];
  for (let i = 0; i < FILES; i++) {
    const m = await server.repo.createMemory(TENANT, directStore.id, {
      path: `/area-${i % 10}/note-${i}.md`,
      content: body(i, 0),
      actor,
    });
    ids.push({ id: m.id, sha: m.sha });
  }
  const syncTimes: number[] = [];
  const directTimes: number[] = [];
  let uploaded = 0;
  for (let s = 1; s <= SYNC_SAMPLES + 1; s++) {
    writeAll(s);
    const a = await time(async () => {
      uploaded = (await syncTeamStore(target)).uploaded.length;
    });
    const b = await time(async () => {
      for (let i = 0; i < FILES; i++) {
        const content = body(i, s);
        const m = await server.repo.updateMemory(TENANT, directStore.id, ids[i]!.id, {
          content,
          precondition: { type: 'content_sha256', content_sha256: ids[i]!.sha },
          actor,
        });
        ids[i]!.sha = m.sha;
      }
    });
    if (uploaded !== FILES || ids[0]!.sha !== sha256(body(0, s)))
      throw new Error(`sync uploaded ${uploaded}, expected ${FILES}`);
    if (s === 1) continue; // warm-up
    syncTimes.push(a);
    directTimes.push(b);
  }

  const lm = median(viaSdk);
  const ld = median(direct);
  const sm = median(syncTimes);
  const sd = median(directTimes);
  console.log(`memory stores (${cpus().length} cores, load ${loadavg()[0]!.toFixed(1)})`);
  console.log(
    `list ${MEMORIES} memories, view=basic: SDK ${ms(lm)} vs repository SELECTs ${ms(ld)} -> ${(lm / ld).toFixed(2)}x (median of ${LIST_SAMPLES})`,
  );
  console.log(
    `full sync of ${FILES} changed files: store client ${ms(sm)} vs direct repository writes ${ms(sd)} -> ${(sm / sd).toFixed(2)}x (median of ${SYNC_SAMPLES})`,
  );
} finally {
  await server.close();
  rmSync(root, { recursive: true, force: true });
  await pg.stop();
}
