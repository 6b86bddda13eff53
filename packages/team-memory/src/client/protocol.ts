// Which protocol a project's team directory syncs with (docs/team-memory.md "Protocols"):
// - `team-memory`: the seed documents' `/api/claude_code/team_memory` (the default);
// - `memory-store`: a memory store (`/v1/memory_stores/{id}`), as ENGRAM_TEAM_MEMORY_STORE binds it — either one
//   store id for every project (`memstore_…`) or per repository (`owner/name=memstore_…,owner2/name2=memstore_…`;
//   a repository not named keeps the seed protocol). Same service URL and key (ENGRAM_TEAM_SYNC_URL / _KEY).

export type TeamProtocol = { kind: 'team-memory' } | { kind: 'memory-store'; storeId: string };

const STORE_ID = /^memstore_[A-Za-z0-9]{1,64}$/;
const REPO = /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/;

export interface StoreBindings {
  all?: string;
  byRepo: Record<string, string>;
}

/** Parses ENGRAM_TEAM_MEMORY_STORE; a message naming the bad part when it is malformed. */
export function parseStoreBindings(value: string | undefined): StoreBindings | { error: string } {
  const bindings: StoreBindings = { byRepo: {} };
  if (value === undefined || value.trim() === '') return bindings;
  const text = value.trim();
  if (!text.includes('=')) {
    if (!STORE_ID.test(text)) return { error: `${JSON.stringify(text)} is not a store id (memstore_…)` };
    return { all: text, byRepo: {} };
  }
  for (const part of text.split(',')) {
    const [repo, id, ...rest] = part.trim().split('=');
    if (rest.length > 0 || !repo || !id || !REPO.test(repo) || !STORE_ID.test(id))
      return { error: `${JSON.stringify(part.trim())} is not owner/name=memstore_…` };
    bindings.byRepo[repo.toLowerCase()] = id;
  }
  return bindings;
}

export function teamProtocolFor(bindings: StoreBindings | undefined, repo: string): TeamProtocol {
  const storeId = bindings?.byRepo[repo.toLowerCase()] ?? bindings?.all;
  return storeId ? { kind: 'memory-store', storeId } : { kind: 'team-memory' };
}
