import type { StateStore } from './state-store.js';

// The per-tenant cost ledger: tokens per job kind (the foreground `turn`, and each background kind the
// workers run: extract, recall, session-memory, dream) and token type, shared by every replica and worker.
// One versioned record per tenant, advanced by compare-and-set on the store's monotonic seq (setIfNewer),
// so it needs no engine-specific counter and holds on Redis and PostgreSQL alike; concurrent recorders
// retry on conflict.

export interface LedgerTokens {
  input: number;
  output: number;
  cache_read: number;
  cache_write: number;
  /** Calls recorded (turns or jobs). */
  count: number;
}

export type CostLedger = Record<string, LedgerTokens>;

export interface UsageLike {
  inputTokens: number;
  outputTokens: number;
  cacheReadInputTokens: number;
  cacheCreationInputTokens: number;
}

/** Tenant key of work that has no tenant (the CLI, the operator's own sessions). */
export const OPERATOR_TENANT = '_operator';

function ledgerKey(tenant: string): string {
  return `ledger:${tenant}`;
}

export async function readCostLedger(store: StateStore, tenant: string): Promise<CostLedger> {
  return (await store.getVersioned<CostLedger>(ledgerKey(tenant)))?.value ?? {};
}

/** Adds one call's usage to the tenant's ledger. Gives up (returns false) after `maxAttempts` conflicts. */
export async function recordCost(
  store: StateStore,
  tenant: string,
  kind: string,
  usage: UsageLike,
  maxAttempts = 50,
): Promise<boolean> {
  const key = ledgerKey(tenant);
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    const current = await store.getVersioned<CostLedger>(key);
    const ledger: CostLedger = { ...(current?.value ?? {}) };
    const row = ledger[kind] ?? { input: 0, output: 0, cache_read: 0, cache_write: 0, count: 0 };
    ledger[kind] = {
      input: row.input + usage.inputTokens,
      output: row.output + usage.outputTokens,
      cache_read: row.cache_read + usage.cacheReadInputTokens,
      cache_write: row.cache_write + usage.cacheCreationInputTokens,
      count: row.count + 1,
    };
    if (await store.setIfNewer(key, (current?.seq ?? 0) + 1, ledger)) return true;
    // Lost the race: back off a little (jittered) and re-read.
    await new Promise((r) => setTimeout(r, Math.random() * Math.min(5 * 2 ** attempt, 200)));
  }
  return false;
}
