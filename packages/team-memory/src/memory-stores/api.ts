import { invalid, MemoryStoreApiError, notFound } from './errors.js';
import { LIMITS } from './limits.js';
import { validateMemoryPath, validatePathPrefix } from './paths.js';
import {
  type Actor,
  type ListItem,
  type MemoryRow,
  type MemoryStoresRepo,
  type Precondition,
  type StoreRow,
  type VersionRow,
  type View,
  validateContent,
  validateSha,
} from './repo.js';

// The Memory Stores API (`/v1/memory_stores…`), wire-compatible with @anthropic-ai/sdk's
// `client.beta.memoryStores` and with what Claude Code 2.1.x sends (docs/memory-stores.md). A web-standard
// handler: the host authenticates, then hands over the request with the tenant and the actor it names. The
// `anthropic-beta` header is accepted and not required (Claude Code sends none).

export interface MemoryStoresRequestContext {
  tenant: string;
  actor: Actor;
}

const MAX_BODY_BYTES = LIMITS.contentBytes * 2 + 64 * 1024;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

function storeJson(s: StoreRow) {
  return {
    type: 'memory_store' as const,
    id: s.id,
    name: s.name,
    description: s.description,
    metadata: s.metadata,
    archived_at: iso(s.archived_at),
    created_at: iso(s.created_at),
    updated_at: iso(s.updated_at),
  };
}

function memoryJson(m: MemoryRow, view: View) {
  return {
    type: 'memory' as const,
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

function versionJson(v: VersionRow, view: View) {
  return {
    type: 'memory_version' as const,
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
    redacted_at: iso(v.redacted_at),
    redacted_by: v.redacted_by,
  };
}

function itemJson(item: ListItem, view: View) {
  return item.kind === 'prefix'
    ? { type: 'memory_prefix' as const, path: item.path }
    : memoryJson(item.row, view);
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

export function errorResponse(error: MemoryStoreApiError): Response {
  return json(error.body(), error.status);
}

// Cursors are opaque to clients: base64url of the last key of the page.
const encodeCursor = (key: string) => Buffer.from(key, 'utf8').toString('base64url');
function decodeCursor(page: string | null): string | undefined {
  if (page === null || page === '') return undefined;
  if (!/^[A-Za-z0-9_-]+$/.test(page)) throw invalid('page: not a cursor this API returned.');
  return Buffer.from(page, 'base64url').toString('utf8');
}

function viewOf(q: URLSearchParams, fallback: View): View {
  const v = q.get('view');
  if (v === null) return fallback;
  if (v !== 'basic' && v !== 'full') throw invalid('view: must be "basic" or "full".');
  return v;
}

function limitOf(q: URLSearchParams, max: number): number {
  const raw = q.get('limit');
  if (raw === null) return Math.min(LIMITS.defaultPage, max);
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw invalid('limit: must be a positive integer.');
  if (n > max) throw invalid(`limit: ${n} exceeds the page-size limit of ${max} items for this view.`);
  return n;
}

function dateOf(q: URLSearchParams, key: string): Date | undefined {
  const raw = q.get(key);
  if (raw === null) return undefined;
  const d = new Date(raw);
  if (Number.isNaN(d.getTime())) throw invalid(`${key}: not an RFC 3339 time.`);
  return d;
}

function boolOf(q: URLSearchParams, key: string): boolean {
  const raw = q.get(key);
  if (raw === null) return false;
  if (raw !== 'true' && raw !== 'false') throw invalid(`${key}: must be true or false.`);
  return raw === 'true';
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

function only(body: Record<string, unknown>, allowed: readonly string[]) {
  for (const k of Object.keys(body))
    if (!allowed.includes(k)) throw invalid(`${k}: unknown field; allowed: ${allowed.join(', ')}.`);
}

function nameOf(v: unknown, field = 'name'): string {
  if (typeof v !== 'string' || v.length < 1 || v.length > LIMITS.nameChars)
    throw invalid(`${field}: must be 1 to ${LIMITS.nameChars} characters.`);
  if (/\p{Cc}/u.test(v)) throw invalid(`${field}: cannot contain control characters.`);
  return v;
}

function descriptionOf(v: unknown): string {
  if (typeof v !== 'string') throw invalid('description: must be a string.');
  if (v.length > LIMITS.descriptionChars)
    throw invalid(`description: exceeds the limit of ${LIMITS.descriptionChars} characters.`);
  return v;
}

function metadataOf(v: unknown, allowNull: boolean): Record<string, string | null> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalid('metadata: must be an object.');
  const out: Record<string, string | null> = {};
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > LIMITS.metadataPairs)
    throw invalid(`metadata: more than the limit of ${LIMITS.metadataPairs} key-value pairs.`);
  for (const [k, val] of entries) {
    if (k.length < 1 || k.length > LIMITS.metadataKeyChars)
      throw invalid(`metadata: key ${JSON.stringify(k)} must be 1 to ${LIMITS.metadataKeyChars} characters.`);
    if (val === null && allowNull) out[k] = null;
    else if (typeof val !== 'string' || val.length > LIMITS.metadataValueChars)
      throw invalid(`metadata.${k}: must be a string of at most ${LIMITS.metadataValueChars} characters.`);
    else out[k] = val;
  }
  return out;
}

function preconditionOf(v: unknown, allowNotExists: boolean): Precondition | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid('precondition: must be an object.');
  const p = v as Record<string, unknown>;
  if (p.type === 'content_sha256')
    return {
      type: 'content_sha256',
      content_sha256: validateSha(p.content_sha256, 'precondition.content_sha256'),
    };
  // Claude Code creates with `not_exists`: an existing path answers 409 with the conflict fields.
  if (p.type === 'not_exists' && allowNotExists) return { type: 'not_exists' };
  throw invalid(`precondition.type: ${JSON.stringify(p.type)} is not supported.`);
}

const STORE_ID = /^memstore_[A-Za-z0-9]{1,64}$/;
const MEMORY_ID = /^mem_[A-Za-z0-9]{1,64}$/;
const VERSION_ID = /^memver_[A-Za-z0-9]{1,64}$/;
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
    const q = url.searchParams;
    const parts = url.pathname.replace(/\/+$/, '').split('/').slice(1); // v1, memory_stores, …
    if (parts[0] !== 'v1' || parts[1] !== 'memory_stores') throw notFound(`No route ${url.pathname}.`);
    const rest = parts.slice(2);
    const m = req.method;
    const { tenant, actor } = ctx;

    if (rest.length === 0) {
      if (m === 'POST') {
        const body = await bodyOf(req);
        only(body, ['name', 'description', 'metadata']);
        const store = await repo.createStore(tenant, {
          name: nameOf(body.name),
          description: body.description === undefined ? '' : descriptionOf(body.description),
          metadata: (body.metadata === undefined ? {} : metadataOf(body.metadata, false)) as Record<
            string,
            string
          >,
        });
        return json(storeJson(store));
      }
      if (m === 'GET') {
        const limit = limitOf(q, LIMITS.basicPageMax);
        const after = decodeCursor(q.get('page'));
        if (after !== undefined && !/^\d+$/.test(after))
          throw invalid('page: not a cursor this API returned.');
        const rows = await repo.listStores(tenant, {
          limit,
          afterSeq: after,
          includeArchived: boolOf(q, 'include_archived'),
          ...withDefined('gte', dateOf(q, 'created_at[gte]')),
          ...withDefined('lte', dateOf(q, 'created_at[lte]')),
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

    const storeId = idOf(rest[0]!, STORE_ID, 'memory store');
    if (rest.length === 1) {
      if (m === 'GET') return json(storeJson(await repo.getStore(tenant, storeId)));
      if (m === 'POST') {
        const body = await bodyOf(req);
        only(body, ['name', 'description', 'metadata']);
        const store = await repo.updateStore(tenant, storeId, {
          ...withDefined('name', body.name == null ? undefined : nameOf(body.name)),
          ...withDefined(
            'description',
            body.description == null ? undefined : descriptionOf(body.description),
          ),
          ...withDefined('metadata', body.metadata == null ? undefined : metadataOf(body.metadata, true)),
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
          const view = viewOf(q, 'basic');
          const body = await bodyOf(req);
          only(body, ['path', 'content', 'precondition']);
          const path = validateMemoryPath(body.path);
          const content = validateContent(body.content === null ? '' : body.content);
          const precondition = preconditionOf(body.precondition, true);
          const row = await repo.createMemory(tenant, storeId, {
            path,
            content,
            actor,
            ...withDefined('precondition', precondition),
          });
          return json(memoryJson(row, view));
        }
        if (m === 'GET') {
          const view = viewOf(q, 'basic');
          const limit = limitOf(q, view === 'full' ? LIMITS.fullPageMax : LIMITS.basicPageMax);
          const depthRaw = q.get('depth') ?? '0';
          const depth = Number(depthRaw);
          if (!Number.isInteger(depth) || depth < 0 || depth > LIMITS.pathSegments)
            throw invalid(`depth: must be an integer from 0 to ${LIMITS.pathSegments}.`);
          // Claude Code adds order_by=path&order=asc: path order is the only order served.
          if ((q.get('order_by') ?? 'path') !== 'path') throw invalid('order_by: only "path" is supported.');
          if ((q.get('order') ?? 'asc') !== 'asc') throw invalid('order: only "asc" is supported.');
          const prefix = validatePathPrefix(q.get('path_prefix') ?? '/');
          const { items, more } = await repo.listMemories(tenant, storeId, {
            pathPrefix: prefix,
            depth,
            limit,
            after: decodeCursor(q.get('page')),
            view,
          });
          const last = items.at(-1);
          return json({
            data: items.map((i) => itemJson(i, view)),
            next_page: more && last ? encodeCursor(last.kind === 'prefix' ? last.path : last.row.path) : null,
          });
        }
        throw methodNotAllowed(m);
      }
      if (rest[2] === 'export' && rest.length === 3) {
        if (m !== 'GET') throw methodNotAllowed(m);
        return exportStream(tenant, storeId, viewOf(q, 'full'));
      }
      const memoryId = idOf(rest[2]!, MEMORY_ID, 'memory');
      if (rest.length !== 3) throw notFound(`No route ${url.pathname}.`);
      if (m === 'GET')
        return json(memoryJson(await repo.getMemory(tenant, storeId, memoryId), viewOf(q, 'full')));
      if (m === 'POST') {
        const view = viewOf(q, 'basic');
        const body = await bodyOf(req);
        only(body, ['path', 'content', 'precondition']);
        const row = await repo.updateMemory(tenant, storeId, memoryId, {
          actor,
          ...withDefined('path', body.path == null ? undefined : validateMemoryPath(body.path)),
          ...withDefined('content', body.content == null ? undefined : validateContent(body.content)),
          ...withDefined('precondition', preconditionOf(body.precondition, false)),
        });
        return json(memoryJson(row, view));
      }
      if (m === 'DELETE') {
        const expected = q.get('expected_content_sha256');
        await repo.deleteMemory(tenant, storeId, memoryId, {
          actor,
          ...withDefined(
            'expectedSha',
            expected === null ? undefined : validateSha(expected, 'expected_content_sha256'),
          ),
        });
        return json({ type: 'memory_deleted', id: memoryId });
      }
      throw methodNotAllowed(m);
    }

    if (rest[1] === 'memory_versions') {
      if (rest.length === 2) {
        if (m !== 'GET') throw methodNotAllowed(m);
        const view = viewOf(q, 'basic');
        const limit = limitOf(q, view === 'full' ? LIMITS.fullPageMax : LIMITS.basicPageMax);
        const before = decodeCursor(q.get('page'));
        if (before !== undefined && !/^\d+$/.test(before))
          throw invalid('page: not a cursor this API returned.');
        const operation = q.get('operation');
        if (operation !== null && !['created', 'modified', 'deleted'].includes(operation))
          throw invalid('operation: must be created, modified or deleted.');
        const memoryId = q.get('memory_id');
        const rows = await repo.listVersions(tenant, storeId, {
          limit,
          beforeSeq: before,
          ...withDefined('memoryId', memoryId ?? undefined),
          ...withDefined('operation', operation ?? undefined),
          ...withDefined('sessionId', q.get('session_id') ?? undefined),
          ...withDefined('apiKeyId', q.get('api_key_id') ?? undefined),
          ...withDefined('serviceAccountId', q.get('service_account_id') ?? undefined),
          ...withDefined('gte', dateOf(q, 'created_at[gte]')),
          ...withDefined('lte', dateOf(q, 'created_at[lte]')),
        });
        const page = rows.slice(0, limit);
        return json({
          data: page.map((v) => versionJson(v, view)),
          next_page: rows.length > limit ? encodeCursor(page.at(-1)!.seq) : null,
        });
      }
      const versionId = idOf(rest[2]!, VERSION_ID, 'memory version');
      if (rest.length === 3) {
        if (m !== 'GET') throw methodNotAllowed(m);
        return json(versionJson(await repo.getVersion(tenant, storeId, versionId), viewOf(q, 'full')));
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
