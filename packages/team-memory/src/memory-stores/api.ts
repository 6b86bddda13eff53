import { invalid, MemoryStoreApiError, notFound } from './errors.js';
import { LIMITS } from './limits.js';
import type { ListItem, MemoryRow, MemoryStoresRepo, StoreRow, VersionRow, View } from './repo.js';
import {
  type Actor,
  deleteMemoryQuery,
  listMemoriesQuery,
  listStoresQuery,
  listVersionsQuery,
  MEMORY_ID_PATTERN,
  type MemoryPrefixWire,
  type MemoryStoreWire,
  type MemoryVersionWire,
  type MemoryWire,
  memoryCreateBody,
  memoryUpdateBody,
  pageMax,
  parseWire,
  queryObject,
  readQuery,
  STORE_ID_PATTERN,
  storeCreateBody,
  storeUpdateBody,
  VERSION_ID_PATTERN,
  writeQuery,
} from './schemas.js';

// The Memory Stores API (`/v1/memory_stores…`), wire-compatible with @anthropic-ai/sdk's
// `client.beta.memoryStores` and with what Claude Code 2.1.x sends (docs/memory-stores.md). A web-standard
// handler: the host authenticates, then hands over the request with the tenant and the actor it names. Every
// body and query is parsed with the wire schemas of schemas.ts (a refusal names the field and the rule), and
// every answer is typed from them. The `anthropic-beta` header is accepted and not required (Claude Code sends
// none).

export interface MemoryStoresRequestContext {
  tenant: string;
  actor: Actor;
}

const MAX_BODY_BYTES = LIMITS.contentBytes * 2 + 64 * 1024;

const iso = (d: Date) => d.toISOString();
const isoOrNull = (d: Date | null) => (d ? d.toISOString() : null);

function storeJson(s: StoreRow): MemoryStoreWire {
  return {
    type: 'memory_store',
    id: s.id,
    name: s.name,
    description: s.description,
    metadata: s.metadata,
    archived_at: isoOrNull(s.archived_at),
    created_at: iso(s.created_at),
    updated_at: iso(s.updated_at),
  };
}

function memoryJson(m: MemoryRow, view: View): MemoryWire {
  return {
    type: 'memory',
    id: m.id,
    memory_store_id: m.store_id,
    path: m.path,
    content: view === 'full' ? m.content : null,
    content_sha256: m.sha,
    content_size_bytes: m.bytes,
    memory_version_id: m.version_id,
    created_at: iso(m.created_at),
    updated_at: iso(m.updated_at),
  };
}

function versionJson(v: VersionRow, view: View): MemoryVersionWire {
  return {
    type: 'memory_version',
    id: v.id,
    memory_id: v.memory_id,
    memory_store_id: v.store_id,
    operation: v.operation,
    path: v.path,
    content: view === 'full' ? v.content : null,
    content_sha256: v.sha,
    content_size_bytes: v.bytes,
    created_by: v.created_by,
    created_at: iso(v.created_at),
    redacted_at: isoOrNull(v.redacted_at),
    redacted_by: v.redacted_by,
  };
}

function itemJson(item: ListItem, view: View): MemoryWire | MemoryPrefixWire {
  return item.kind === 'prefix' ? { type: 'memory_prefix', path: item.path } : memoryJson(item.row, view);
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

export function errorResponse(error: MemoryStoreApiError): Response {
  return json(error.body(), error.status);
}

// Cursors are opaque to clients: base64url of the last key of the page.
const encodeCursor = (key: string) => Buffer.from(key, 'utf8').toString('base64url');
function decodeCursor(page: string | undefined): string | undefined {
  if (page === undefined || page === '') return undefined;
  return Buffer.from(page, 'base64url').toString('utf8');
}
/** A cursor of a list ordered by sequence number (stores, versions). */
function decodeSeqCursor(page: string | undefined): string | undefined {
  const after = decodeCursor(page);
  if (after !== undefined && !/^\d+$/.test(after)) throw invalid('page: not a cursor this API returned.');
  return after;
}

async function bodyOf(req: Request): Promise<Record<string, unknown>> {
  const declared = Number(req.headers.get('content-length') ?? '0');
  if (declared > MAX_BODY_BYTES)
    throw new MemoryStoreApiError(
      413,
      'request_too_large',
      `The request body exceeds ${MAX_BODY_BYTES} bytes.`,
    );
  const buf = Buffer.from(await req.arrayBuffer());
  if (buf.length > MAX_BODY_BYTES)
    throw new MemoryStoreApiError(
      413,
      'request_too_large',
      `The request body exceeds ${MAX_BODY_BYTES} bytes.`,
    );
  if (buf.length === 0) return {};
  let value: unknown;
  try {
    value = JSON.parse(buf.toString('utf8'));
  } catch (error) {
    throw invalid(`The request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw invalid('The request body must be a JSON object.');
  return value as Record<string, unknown>;
}

function idOf(raw: string, pattern: RegExp, what: string): string {
  let id: string;
  try {
    id = decodeURIComponent(raw);
  } catch {
    throw notFound(`No ${what} with id ${JSON.stringify(raw)}.`);
  }
  // An id of the wrong shape names nothing: the same 404 as an unknown (or another tenant's) id.
  if (!pattern.test(id)) throw notFound(`No ${what} with id ${JSON.stringify(id)}.`);
  return id;
}

export function createMemoryStoresHandler(repo: MemoryStoresRepo) {
  async function route(req: Request, ctx: MemoryStoresRequestContext): Promise<Response> {
    const url = new URL(req.url);
    const query = queryObject(url.searchParams);
    const parts = url.pathname.replace(/\/+$/, '').split('/').slice(1); // v1, memory_stores, …
    if (parts[0] !== 'v1' || parts[1] !== 'memory_stores') throw notFound(`No route ${url.pathname}.`);
    const rest = parts.slice(2);
    const m = req.method;
    const { tenant, actor } = ctx;

    if (rest.length === 0) {
      if (m === 'POST') {
        const body = parseWire(storeCreateBody, await bodyOf(req));
        const store = await repo.createStore(tenant, {
          name: body.name,
          description: body.description ?? '',
          metadata: body.metadata ?? {},
        });
        return json(storeJson(store));
      }
      if (m === 'GET') {
        const q = parseWire(listStoresQuery, query);
        const limit = q.limit ?? LIMITS.defaultPage;
        const rows = await repo.listStores(tenant, {
          limit,
          afterSeq: decodeSeqCursor(q.page),
          includeArchived: q.include_archived,
          ...withDefined('gte', q['created_at[gte]']),
          ...withDefined('lte', q['created_at[lte]']),
        });
        const page = rows.slice(0, limit);
        const last = page.at(-1) as (StoreRow & { seq: string }) | undefined;
        return json({
          data: page.map(storeJson),
          next_page: rows.length > limit && last ? encodeCursor(last.seq) : null,
        });
      }
      throw methodNotAllowed(m);
    }

    const storeId = idOf(rest[0]!, STORE_ID_PATTERN, 'memory store');
    if (rest.length === 1) {
      if (m === 'GET') return json(storeJson(await repo.getStore(tenant, storeId)));
      if (m === 'POST') {
        const body = parseWire(storeUpdateBody, await bodyOf(req));
        const store = await repo.updateStore(tenant, storeId, {
          ...withDefined('name', body.name ?? undefined),
          ...withDefined('description', body.description ?? undefined),
          ...withDefined('metadata', body.metadata ?? undefined),
        });
        return json(storeJson(store));
      }
      if (m === 'DELETE') {
        await repo.deleteStore(tenant, storeId);
        return json({ type: 'memory_store_deleted', id: storeId });
      }
      throw methodNotAllowed(m);
    }

    if (rest[1] === 'archive' && rest.length === 2) {
      if (m !== 'POST') throw methodNotAllowed(m);
      return json(storeJson(await repo.archiveStore(tenant, storeId)));
    }

    if (rest[1] === 'memories') {
      if (rest.length === 2) {
        if (m === 'POST') {
          const { view } = parseWire(writeQuery, query);
          const body = parseWire(memoryCreateBody, await bodyOf(req));
          const row = await repo.createMemory(tenant, storeId, {
            path: body.path,
            content: body.content ?? '',
            actor,
            ...withDefined('precondition', body.precondition ?? undefined),
          });
          return json(memoryJson(row, view));
        }
        if (m === 'GET') {
          const q = parseWire(listMemoriesQuery, query);
          const limit = q.limit ?? Math.min(LIMITS.defaultPage, pageMax(q.view));
          const { items, more } = await repo.listMemories(tenant, storeId, {
            pathPrefix: q.path_prefix,
            depth: q.depth,
            limit,
            after: decodeCursor(q.page),
            view: q.view,
          });
          const last = items.at(-1);
          return json({
            data: items.map((i) => itemJson(i, q.view)),
            next_page: more && last ? encodeCursor(last.kind === 'prefix' ? last.path : last.row.path) : null,
          });
        }
        throw methodNotAllowed(m);
      }
      if (rest[2] === 'export' && rest.length === 3) {
        if (m !== 'GET') throw methodNotAllowed(m);
        return exportStream(tenant, storeId, parseWire(readQuery, query).view);
      }
      const memoryId = idOf(rest[2]!, MEMORY_ID_PATTERN, 'memory');
      if (rest.length !== 3) throw notFound(`No route ${url.pathname}.`);
      if (m === 'GET')
        return json(
          memoryJson(await repo.getMemory(tenant, storeId, memoryId), parseWire(readQuery, query).view),
        );
      if (m === 'POST') {
        const { view } = parseWire(writeQuery, query);
        const body = parseWire(memoryUpdateBody, await bodyOf(req));
        const row = await repo.updateMemory(tenant, storeId, memoryId, {
          actor,
          ...withDefined('path', body.path ?? undefined),
          ...withDefined('content', body.content ?? undefined),
          ...withDefined('precondition', body.precondition ?? undefined),
        });
        return json(memoryJson(row, view));
      }
      if (m === 'DELETE') {
        const q = parseWire(deleteMemoryQuery, query);
        await repo.deleteMemory(tenant, storeId, memoryId, {
          actor,
          ...withDefined('expectedSha', q.expected_content_sha256),
        });
        return json({ type: 'memory_deleted', id: memoryId });
      }
      throw methodNotAllowed(m);
    }

    if (rest[1] === 'memory_versions') {
      if (rest.length === 2) {
        if (m !== 'GET') throw methodNotAllowed(m);
        const q = parseWire(listVersionsQuery, query);
        const limit = q.limit ?? Math.min(LIMITS.defaultPage, pageMax(q.view));
        const rows = await repo.listVersions(tenant, storeId, {
          limit,
          beforeSeq: decodeSeqCursor(q.page),
          ...withDefined('memoryId', q.memory_id),
          ...withDefined('operation', q.operation),
          ...withDefined('sessionId', q.session_id),
          ...withDefined('apiKeyId', q.api_key_id),
          ...withDefined('serviceAccountId', q.service_account_id),
          ...withDefined('gte', q['created_at[gte]']),
          ...withDefined('lte', q['created_at[lte]']),
        });
        const page = rows.slice(0, limit);
        return json({
          data: page.map((v) => versionJson(v, q.view)),
          next_page: rows.length > limit ? encodeCursor(page.at(-1)!.seq) : null,
        });
      }
      const versionId = idOf(rest[2]!, VERSION_ID_PATTERN, 'memory version');
      if (rest.length === 3) {
        if (m !== 'GET') throw methodNotAllowed(m);
        return json(
          versionJson(await repo.getVersion(tenant, storeId, versionId), parseWire(readQuery, query).view),
        );
      }
      if (rest.length === 4 && rest[3] === 'redact') {
        if (m !== 'POST') throw methodNotAllowed(m);
        return json(versionJson(await repo.redactVersion(tenant, storeId, versionId, actor), 'full'));
      }
    }
    throw notFound(`No route ${url.pathname}.`);
  }

  /** Claude Code's bulk pull: one JSON object per line — the store, each memory, then a completion line. */
  async function exportStream(tenant: string, storeId: string, view: View): Promise<Response> {
    const store = await repo.getStore(tenant, storeId);
    const lines: string[] = [JSON.stringify({ ...storeJson(store), type: 'store', view })];
    let after: string | undefined;
    let count = 0;
    for (;;) {
      const { items, more } = await repo.listMemories(tenant, storeId, {
        pathPrefix: '/',
        depth: 0,
        limit: 500,
        after,
        view,
      });
      for (const item of items) {
        if (item.kind !== 'memory') continue;
        lines.push(JSON.stringify(memoryJson(item.row, view)));
        count++;
        after = item.row.path;
      }
      if (!more) break;
    }
    lines.push(JSON.stringify({ type: 'complete', memory_count: count }));
    return new Response(`${lines.join('\n')}\n`, { headers: { 'content-type': 'application/x-ndjson' } });
  }

  return async function handle(req: Request, ctx: MemoryStoresRequestContext): Promise<Response> {
    try {
      return await route(req, ctx);
    } catch (error) {
      if (error instanceof MemoryStoreApiError) return errorResponse(error);
      return errorResponse(
        new MemoryStoreApiError(
          500,
          'api_error',
          `Internal error: ${(error as Error).message ?? String(error)}`,
        ),
      );
    }
  };
}

function methodNotAllowed(method: string) {
  return new MemoryStoreApiError(
    405,
    'invalid_request_error',
    `Method ${method} is not allowed on this route.`,
  );
}

function withDefined<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}
