import type { StateStore } from './state-store.js';

// The per-tenant cost ledger: tokens per job kind (the foreground `turn`, and each background kind the
// workers run: extract, recall, session-memory, dream) and token type, shared by every replica and worker.
// One set of integer counters per tenant (`<kind>.<type>`), advanced by the store's atomic addCounters: one
// round trip per call whatever the number of concurrent recorders (a compare-and-set record retried under
// contention — a hundred concurrent forks of one tenant — cost many round trips per call and could give up).

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

const TYPES = ['input', 'output', 'cache_read', 'cache_write', 'count'] as const;

function countersKey(tenant: string): string {
  return `cost:${tenant}`;
}

/** Where ledgers were kept before the counters: one versioned record per tenant, still read and added in. */
function legacyLedgerKey(tenant: string): string {
  return `ledger:${tenant}`;
}

export async function readCostLedger(store: StateStore, tenant: string): Promise<CostLedger> {
  const [counters, legacy] = await Promise.all([
    store.getCounters(countersKey(tenant)),
    store.getVersioned<CostLedger>(legacyLedgerKey(tenant)),
  ]);
  const ledger: CostLedger = {};
  const row = (kind: string) => {
    ledger[kind] ??= { input: 0, output: 0, cache_read: 0, cache_write: 0, count: 0 };
    return ledger[kind];
  };
  for (const [kind, tokens] of Object.entries(legacy?.value ?? {})) {
    const r = row(kind);
    for (const type of TYPES) r[type] += tokens[type] ?? 0;
  }
  for (const [field, n] of Object.entries(counters)) {
    const dot = field.lastIndexOf('.');
    const type = field.slice(dot + 1) as (typeof TYPES)[number];
    if (dot <= 0 || !TYPES.includes(type)) continue;
    row(field.slice(0, dot))[type] += n;
  }
  return ledger;
}

/** Adds one call's usage to the tenant's ledger (one atomic round trip). */
export async function recordCost(
  store: StateStore,
  tenant: string,
  kind: string,
  usage: UsageLike,
): Promise<boolean> {
  await store.addCounters(countersKey(tenant), {
    [`${kind}.input`]: usage.inputTokens,
    [`${kind}.output`]: usage.outputTokens,
    [`${kind}.cache_read`]: usage.cacheReadInputTokens,
    [`${kind}.cache_write`]: usage.cacheCreationInputTokens,
    [`${kind}.count`]: 1,
  });
  return true;
}
