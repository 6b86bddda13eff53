import { z } from 'zod';
import { errorSchema } from './api-schemas.js';
import type { ApiRoute } from './openapi.js';

// The OpenAPI entries of the Memory Stores API (`/v1/memory_stores…`, served by
// packages/team-memory/src/memory-stores/api.ts; docs/memory-stores.md) and of `/mcp` (mcp-route.ts). The
// handler there validates by hand and has no zod schemas, so the wire shapes it answers with are written here
// as zod, once; memory-stores-openapi.test.ts checks real answers of a running server against them.

const time = z.string().describe('RFC 3339 time');
const nullableTime = time.nullable();

export const memoryStoreSchema = z.object({
  type: z.literal('memory_store'),
  id: z.string().regex(/^memstore_[A-Za-z0-9]+$/),
  name: z.string(),
  description: z.string(),
  metadata: z.record(z.string(), z.string()),
  archived_at: nullableTime,
  created_at: time,
  updated_at: time,
});

export const memorySchema = z.object({
  type: z.literal('memory'),
  id: z.string().regex(/^mem_[A-Za-z0-9]+$/),
  memory_store_id: z.string(),
  path: z.string(),
  /** null in the `basic` view. */
  content: z.string().nullable(),
  content_sha256: z.string(),
  content_size_bytes: z.number().int(),
  memory_version_id: z.string(),
  created_at: time,
  updated_at: time,
});

export const memoryPrefixSchema = z.object({ type: z.literal('memory_prefix'), path: z.string() });

export const memoryVersionSchema = z.object({
  type: z.literal('memory_version'),
  id: z.string().regex(/^memver_[A-Za-z0-9]+$/),
  memory_id: z.string(),
  memory_store_id: z.string(),
  operation: z.enum(['created', 'modified', 'deleted']),
  /** null once redacted (as content and its hash). */
  path: z.string().nullable(),
  content: z.string().nullable(),
  content_sha256: z.string().nullable(),
  content_size_bytes: z.number().int().nullable(),
  created_by: z.looseObject({ type: z.string() }),
  created_at: time,
  redacted_at: nullableTime,
  redacted_by: z.looseObject({ type: z.string() }).nullable(),
});

const page = <T extends z.ZodType>(item: T) =>
  z.object({ data: z.array(item), next_page: z.string().nullable() });
export const memoryStoreListSchema = page(memoryStoreSchema);
export const memoryListSchema = page(z.union([memorySchema, memoryPrefixSchema]));
export const memoryVersionListSchema = page(memoryVersionSchema);
export const memoryStoreDeletedSchema = z.object({ type: z.literal('memory_store_deleted'), id: z.string() });
export const memoryDeletedSchema = z.object({ type: z.literal('memory_deleted'), id: z.string() });

/** The Anthropic error envelope the Memory Stores API answers every refusal with. */
export const memoryStoreErrorSchema = z.object({
  type: z.literal('error'),
  error: z.looseObject({ type: z.string(), message: z.string() }),
});

const storeBody = z.strictObject({
  name: z.string().min(1),
  description: z.string().optional(),
  metadata: z.record(z.string(), z.string()).optional(),
});
const storeUpdateBody = z.strictObject({
  name: z.string().min(1).nullable().optional(),
  description: z.string().nullable().optional(),
  metadata: z.record(z.string(), z.string().nullable()).nullable().optional(),
});
const precondition = z.union([
  z.object({ type: z.literal('content_sha256'), content_sha256: z.string() }),
  z.object({ type: z.literal('not_exists') }),
]);
const memoryBody = z.strictObject({
  path: z.string(),
  content: z.string().nullable(),
  precondition: precondition.nullable().optional(),
});
const memoryUpdateBody = z.strictObject({
  path: z.string().nullable().optional(),
  content: z.string().nullable().optional(),
  precondition: precondition.nullable().optional(),
});

const pathParam = (name: string, prefix: string) => ({
  name,
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: `^${prefix}_[A-Za-z0-9]{1,64}$` },
});
const storeId = pathParam('memory_store_id', 'memstore');
const memoryId = pathParam('memory_id', 'mem');
const versionId = pathParam('memory_version_id', 'memver');
const query = (name: string, description: string, schema: object = { type: 'string' }) => ({
  name,
  in: 'query',
  required: false,
  description,
  schema,
});
const view = (fallback: string) =>
  query('view', `\`basic\` (content null) or \`full\`; default ${fallback}`, {
    type: 'string',
    enum: ['basic', 'full'],
  });
const paging = [
  query('limit', 'Page size', { type: 'integer', minimum: 1 }),
  query('page', 'The `next_page` cursor of the previous page'),
];

const e = (description: string) => ({ description, schema: memoryStoreErrorSchema });
const common = {
  400: e('invalid_request_error'),
  401: e('authentication_error: no key, a wrong one, or a revoked one'),
  503: e('The memory store database is not reachable (or not configured: the body names the setting)'),
};
const withId = { ...common, 404: e('not_found_error (also for another tenant’s id)') };
const tag = 'Memory stores' as const;
const S = '/v1/memory_stores';

export const MEMORY_STORES_ROUTES: readonly ApiRoute[] = [
  {
    method: 'post',
    path: S,
    operationId: 'createMemoryStore',
    summary: 'Create a memory store',
    tag,
    body: storeBody,
    responses: { 200: { description: 'The store', schema: memoryStoreSchema }, ...common },
  },
  {
    method: 'get',
    path: S,
    operationId: 'listMemoryStores',
    summary: 'The tenant’s memory stores, oldest first',
    tag,
    parameters: [
      ...paging,
      query('include_archived', 'Also list archived stores', { type: 'boolean' }),
      query('created_at[gte]', 'Created at or after (RFC 3339)'),
      query('created_at[lte]', 'Created at or before (RFC 3339)'),
    ],
    responses: { 200: { description: 'A page of stores', schema: memoryStoreListSchema }, ...common },
  },
  {
    method: 'get',
    path: `${S}/{memory_store_id}`,
    operationId: 'getMemoryStore',
    summary: 'A memory store',
    tag,
    parameters: [storeId],
    responses: { 200: { description: 'The store', schema: memoryStoreSchema }, ...withId },
  },
  {
    method: 'post',
    path: `${S}/{memory_store_id}`,
    operationId: 'updateMemoryStore',
    summary: 'Change a store’s name, description or metadata (a null metadata value removes the key)',
    tag,
    parameters: [storeId],
    body: storeUpdateBody,
    responses: { 200: { description: 'The store', schema: memoryStoreSchema }, ...withId },
  },
  {
    method: 'delete',
    path: `${S}/{memory_store_id}`,
    operationId: 'deleteMemoryStore',
    summary: 'Delete a store with its memories and versions',
    tag,
    parameters: [storeId],
    responses: { 200: { description: 'Deleted', schema: memoryStoreDeletedSchema }, ...withId },
  },
  {
    method: 'post',
    path: `${S}/{memory_store_id}/archive`,
    operationId: 'archiveMemoryStore',
    summary: 'Archive a store (read-only from then on)',
    tag,
    parameters: [storeId],
    responses: { 200: { description: 'The archived store', schema: memoryStoreSchema }, ...withId },
  },
  {
    method: 'post',
    path: `${S}/{memory_store_id}/memories`,
    operationId: 'createStoreMemory',
    summary: 'Create a memory at a path (precondition `not_exists` answers 409 on an existing path)',
    tag,
    parameters: [storeId, view('basic')],
    body: memoryBody,
    responses: {
      200: { description: 'The memory', schema: memorySchema },
      ...withId,
      409: e('memory_path_conflict_error / memory_precondition_failed_error'),
      413: e('request_too_large'),
    },
  },
  {
    method: 'get',
    path: `${S}/{memory_store_id}/memories`,
    operationId: 'listStoreMemories',
    summary: 'Memories under a path prefix in path order; `memory_prefix` entries below the depth',
    tag,
    parameters: [
      storeId,
      view('basic'),
      ...paging,
      query('path_prefix', 'A prefix ending in `/` (default `/`)'),
      query('depth', '0 (all) or how many segments below the prefix to list', { type: 'integer' }),
      query('order_by', 'Only `path`', { type: 'string', enum: ['path'] }),
      query('order', 'Only `asc`', { type: 'string', enum: ['asc'] }),
    ],
    responses: {
      200: { description: 'A page of memories and prefixes', schema: memoryListSchema },
      ...withId,
    },
  },
  {
    method: 'get',
    path: `${S}/{memory_store_id}/memories/export`,
    operationId: 'exportStoreMemories',
    summary: 'Every memory of a store as lines of JSON: the store, each memory, then `{type: complete}`',
    tag,
    parameters: [storeId, view('full')],
    responses: {
      200: { description: 'One JSON object per line', contentType: 'application/x-ndjson' },
      ...withId,
    },
  },
  {
    method: 'get',
    path: `${S}/{memory_store_id}/memories/{memory_id}`,
    operationId: 'getStoreMemory',
    summary: 'A memory',
    tag,
    parameters: [storeId, memoryId, view('full')],
    responses: { 200: { description: 'The memory', schema: memorySchema }, ...withId },
  },
  {
    method: 'post',
    path: `${S}/{memory_store_id}/memories/{memory_id}`,
    operationId: 'updateStoreMemory',
    summary: 'Change a memory’s path or content (precondition `content_sha256`: compare and set)',
    tag,
    parameters: [storeId, memoryId, view('basic')],
    body: memoryUpdateBody,
    responses: {
      200: { description: 'The memory', schema: memorySchema },
      ...withId,
      409: e('memory_path_conflict_error / memory_precondition_failed_error'),
      413: e('request_too_large'),
    },
  },
  {
    method: 'delete',
    path: `${S}/{memory_store_id}/memories/{memory_id}`,
    operationId: 'deleteStoreMemory',
    summary: 'Delete a memory (its versions stay)',
    tag,
    parameters: [
      storeId,
      memoryId,
      query('expected_content_sha256', 'Delete only if the content still has this SHA-256'),
    ],
    responses: {
      200: { description: 'Deleted', schema: memoryDeletedSchema },
      ...withId,
      409: e('memory_precondition_failed_error'),
    },
  },
  {
    method: 'get',
    path: `${S}/{memory_store_id}/memory_versions`,
    operationId: 'listMemoryVersions',
    summary: 'The versions of a store’s memories, newest first',
    tag,
    parameters: [
      storeId,
      view('basic'),
      ...paging,
      query('memory_id', 'Only this memory’s versions'),
      query('operation', 'Only this operation', { type: 'string', enum: ['created', 'modified', 'deleted'] }),
      query('session_id', 'Only versions written by this session'),
      query('api_key_id', 'Only versions written with this key'),
      query('service_account_id', 'Only versions written by this service account'),
      query('created_at[gte]', 'Created at or after (RFC 3339)'),
      query('created_at[lte]', 'Created at or before (RFC 3339)'),
    ],
    responses: { 200: { description: 'A page of versions', schema: memoryVersionListSchema }, ...withId },
  },
  {
    method: 'get',
    path: `${S}/{memory_store_id}/memory_versions/{memory_version_id}`,
    operationId: 'getMemoryVersion',
    summary: 'A memory version',
    tag,
    parameters: [storeId, versionId, view('full')],
    responses: { 200: { description: 'The version', schema: memoryVersionSchema }, ...withId },
  },
  {
    method: 'post',
    path: `${S}/{memory_store_id}/memory_versions/{memory_version_id}/redact`,
    operationId: 'redactMemoryVersion',
    summary: 'Erase an old version’s content (the current version of a memory cannot be redacted)',
    tag,
    parameters: [storeId, versionId],
    responses: {
      200: { description: 'The redacted version', schema: memoryVersionSchema },
      ...withId,
      409: e('conflict_error: the version is its memory’s current one'),
    },
  },
];

const mcpCwd = {
  name: 'cwd',
  in: 'query',
  required: true,
  description: 'A directory inside the tenant workspace: the project whose memory the server serves',
  schema: { type: 'string' },
};
const mcpErrors = {
  400: { description: 'INVALID_REQUEST: no `cwd`', schema: errorSchema },
  401: { description: 'UNAUTHORIZED: no key, a wrong one, or a revoked one', schema: errorSchema },
  403: { description: 'CWD_OUTSIDE_WORKSPACE', schema: errorSchema },
};
/** A JSON-RPC 2.0 message (or a batch) of the Model Context Protocol. */
const jsonRpc = z.looseObject({ jsonrpc: z.literal('2.0') });

const mcpDescription =
  'The memory MCP server (search, list, read, save, forget; the MEMORY.md resource) over Streamable HTTP, ' +
  'stateless (no `Mcp-Session-Id`), for the memory directory of the tenant’s `cwd` project ' +
  '(docs/mcp-and-sdk.md).';
const description = mcpDescription;

export const MCP_OPENAPI_ROUTES: readonly ApiRoute[] = [
  {
    method: 'post',
    path: '/mcp',
    operationId: 'postMcpMessage',
    summary: 'Send an MCP JSON-RPC message (or batch); the answer is JSON',
    description,
    tag: 'MCP',
    parameters: [mcpCwd],
    body: z.union([jsonRpc, z.array(jsonRpc)]),
    responses: {
      200: { description: 'The JSON-RPC response(s)', schema: z.union([jsonRpc, z.array(jsonRpc)]) },
      202: { description: 'Accepted: a notification or a response (no body)', empty: true },
      ...mcpErrors,
      406: { description: 'The client does not accept both application/json and text/event-stream' },
    },
  },
  {
    method: 'get',
    path: '/mcp',
    operationId: 'openMcpStream',
    summary: 'Open the server-to-client event stream (`Accept: text/event-stream`)',
    description,
    tag: 'MCP',
    parameters: [mcpCwd],
    responses: {
      200: { description: 'Server-Sent Events', contentType: 'text/event-stream' },
      ...mcpErrors,
      406: { description: 'The client does not accept text/event-stream' },
    },
  },
  {
    method: 'delete',
    path: '/mcp',
    operationId: 'closeMcpSession',
    summary: 'End the MCP session (stateless: nothing to end; answers 200)',
    description,
    tag: 'MCP',
    parameters: [mcpCwd],
    responses: { 200: { description: 'Closed (no body)', empty: true }, ...mcpErrors },
  },
];
