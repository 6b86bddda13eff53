// Hidden workspaces per served turn (issue 15): a served turn hides every other tenant's workspace from its
// Bash sandbox. Before: `TenantStore.list()` on every turn (a readdir plus one record read and parse per
// tenant). Now: `TenantStore.workspaces()`, one `stat` of the tenants root while nothing changed. Baseline in
// the same run: the old listing; floor: a bare `stat` of the root. Alternating samples at 10, 100 and 300
// tenants (records made by the real `add`, the root's mtime aged past the 2 s settle window).
import { mkdirSync, mkdtempSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TenantStore } from '@engram/tenants/tenant-store';
import { median, ms, percentile } from './lib/stats.js';

const SAMPLES = 300;
const now = () => Number(process.hrtime.bigint()) / 1e6;

for (const count of [10, 100, 300]) {
  const base = mkdtempSync(join(tmpdir(), 'engram-bench-tenants-'));
  try {
    const store = new TenantStore(join(base, 'home'));
    for (let i = 0; i < count; i++) {
      const ws = join(base, 'ws', `t${i}`);
      mkdirSync(ws, { recursive: true });
      await store.add(`t${i}`, ws);
    }
    const old = new Date(Date.now() - 60_000);
    utimesSync(store.root, old, old);
    await store.workspaces(); // warm the cache
    const listed: number[] = [];
    const cached: number[] = [];
    const floor: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      let t = now();
      await store.list();
      listed.push(now() - t);
      t = now();
      const w = await store.workspaces();
      cached.push(now() - t);
      if (w.length !== count) throw new Error(`expected ${count} workspaces, got ${w.length}`);
      t = now();
      statSync(store.root, { bigint: true });
      floor.push(now() - t);
    }
    const [l, c, f] = [median(listed), median(cached), median(floor)];
    console.log(
      `${String(count).padStart(3)} tenants: per turn p50 ${ms(c)} (p99 ${ms(percentile(cached, 99))}) vs ` +
        `list() ${ms(l)} (p99 ${ms(percentile(listed, 99))}) → ${(c / l).toFixed(3)}×; bare stat ${ms(f)} → ` +
        `${(c / f).toFixed(2)}× the floor`,
    );
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}
