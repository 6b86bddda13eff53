// Team sync benchmark (issue 16). What the delta rules save, measured against the full transfer in the same
// run, through the real client, the real service (node:http) and an embedded PostgreSQL:
//   - push after one edit in a 500-file team directory (one entry sent) vs a first push of the same
//     directory to an empty repository (the probe plus every entry, in ≤200,000-byte batches);
//   - session-start pull when nothing changed (If-None-Match → 304) vs a full pull of the same content
//     (every entry downloaded and compared; identical files are not rewritten).
// Samples alternate between the two sides of each pair; medians and their ratio are printed.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { TeamMemoryHttpClient } from '@engram/team-memory/client/http-client';
import { pullTeamMemory, pushTeamMemory, type SyncTarget } from '@engram/team-memory/client/sync';
import { TeamSyncStateFile } from '@engram/team-memory/client/sync-state';
import { startTeamMemoryTestServer } from '@engram/team-memory/testing/server.test-helpers';
import { provisionPostgres } from '@engram/testkit/postgres';
import { median, ms } from './lib/stats.js';

const FILES = 500;
const SAMPLES = 15;

const pg = await provisionPostgres();
const server = await startTeamMemoryTestServer({ postgresUrl: pg.url });
const apiKey = await server.issueKey('bench');
const root = mkdtempSync(join(tmpdir(), 'engram-bench-team-'));

function target(name: string, repo: string): SyncTarget {
  const dir = join(root, name);
  mkdirSync(join(dir, 'team'), { recursive: true });
  return {
    teamDir: join(dir, 'team'),
    repo,
    http: new TeamMemoryHttpClient({ baseUrl: server.url, apiKey, maxRetries: 0 }),
    state: new TeamSyncStateFile(join(dir, 'team-sync.json')),
  };
}

const paragraph =
  'Deploys go through the blue pipeline; the staging database is reset nightly at 02:00 UTC.\n';
function fill(t: SyncTarget): void {
  for (let i = 0; i < FILES; i++) {
    const sub = join(t.teamDir, `area-${i % 10}`);
    mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `note-${i}.md`), `---\nname: note ${i}\n---\n${paragraph.repeat(16)}`);
  }
}

async function time(fn: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

try {
  const main = target('main', 'bench/main');
  fill(main);
  const first = await pushTeamMemory(main);
  const reader = target('reader', 'bench/main');
  await pullTeamMemory(reader);

  const incremental: number[] = [];
  const full: number[] = [];
  const notModified: number[] = [];
  const fullPull: number[] = [];
  let sent = 0;
  for (let s = 0; s < SAMPLES + 2; s++) {
    // Incremental: one file edited since the last sync.
    writeFileSync(join(main.teamDir, 'area-3', 'note-3.md'), `edit ${s}\n${paragraph}`);
    const inc = await time(async () => {
      const r = await pushTeamMemory(main);
      sent = r.pushed.length;
    });
    // Full: the same directory pushed to a new, empty repository with no state.
    const fresh = {
      ...main,
      repo: `bench/full-${s}`,
      state: new TeamSyncStateFile(join(root, `full-${s}.json`)),
    };
    const fu = await time(() => pushTeamMemory(fresh));
    await pullTeamMemory(reader); // take the edit, so the next pull is a 304
    const nm = await time(async () => {
      const r = await pullTeamMemory(reader);
      if (r.outcome !== 'not-modified') throw new Error(`expected a 304, got ${r.outcome}`);
    });
    const fp = await time(() => pullTeamMemory(reader, { skipEtagCache: true }));
    if (s < 2) continue; // warm-up
    incremental.push(inc);
    full.push(fu);
    notModified.push(nm);
    fullPull.push(fp);
  }
  const line = (label: string, a: number[], b: number[]) =>
    console.log(`${label}: ${ms(median(a))} vs ${ms(median(b))} → ${(median(a) / median(b)).toFixed(3)}×`);
  console.log(
    `team sync, ${FILES} files (${(first.bytes / 1024).toFixed(0)} KiB, ${first.batches} PUT batches on a full push), ` +
      `${SAMPLES} samples, nproc ${cpus().length}, Node ${process.version}`,
  );
  line(`push after one edit (${sent} entry sent) vs full push`, incremental, full);
  line('unchanged pull (304) vs full pull (identical files skipped)', notModified, fullPull);
} finally {
  await server.close();
  await pg.stop();
  rmSync(root, { recursive: true, force: true });
}
