// Tenant key lookup, known vs unknown id (issue 25): `authenticateKey` does the same steps for both (one `stat`
// of the record once warm, one sha256, the same constant-time compares; tests count them). This measures the
// time side by side in one run: a known tenant with a wrong secret (the enumeration probe), a known tenant
// with its right key, an unknown id and a revoked one; 4,000 alternating samples each, record cache warm
// (records aged past the 2 s settle window), 50 tenants on disk. Ratio: unknown / known-wrong (target ~1.0×).
import { mkdirSync, mkdtempSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TenantStore } from '@engram/tenants/tenant-store';
import { median, ms, percentile } from './lib/stats.js';

const SAMPLES = 4_000;
const now = () => Number(process.hrtime.bigint()) / 1e6;
const base = mkdtempSync(join(tmpdir(), 'engram-bench-lookup-'));
try {
  const store = new TenantStore(join(base, 'home'));
  let key = '';
  for (let i = 0; i < 50; i++) {
    const ws = join(base, 'ws', `t${i}`);
    mkdirSync(ws, { recursive: true });
    const added = await store.add(`t${i}`, ws);
    if (i === 7) key = added.key;
  }
  await store.revoke('t9');
  const old = new Date(Date.now() - 60_000);
  for (let i = 0; i < 50; i++) utimesSync(join(store.root, `t${i}`, 'tenant.json'), old, old);
  const secret = key.split('.')[2]!;
  const probes = {
    'known, right key': key,
    'known, wrong secret': `egk.t7.${'0'.repeat(64)}`,
    'unknown id': `egk.nobody.${secret}`,
    'revoked id': `egk.t9.${secret}`,
  };
  const times = Object.fromEntries(Object.keys(probes).map((k) => [k, [] as number[]]));
  for (const k of Object.values(probes)) await store.authenticateKey(k); // warm
  for (let i = 0; i < SAMPLES; i++) {
    for (const [name, k] of Object.entries(probes)) {
      const t = now();
      await store.authenticateKey(k);
      times[name]!.push(now() - t);
    }
  }
  const wrong = median(times['known, wrong secret']!);
  for (const [name, t] of Object.entries(times)) {
    console.log(
      `${name.padEnd(20)} p50 ${ms(median(t))} (p99 ${ms(percentile(t, 99))}) → ${(median(t) / wrong).toFixed(3)}× known-wrong`,
    );
  }
} finally {
  rmSync(base, { recursive: true, force: true });
}
