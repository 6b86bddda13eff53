import {
  deleteMemoryQuery,
  listMemoriesQuery,
  listStoresQuery,
  listVersionsQuery,
  MEMORY_ID_PATTERN,
  memoryCreateBody,
  memoryDeletedSchema,
  memoryListSchema,
  memorySchema,
  memoryStoreDeletedSchema,
  memoryStoreErrorSchema,
  memoryStoreListSchema,
  memoryStoreSchema,
  memoryUpdateBody,
  memoryVersionListSchema,
  memoryVersionSchema,
  readQuery,
  STORE_ID_PATTERN,
  storeCreateBody,
  storeUpdateBody,
  VERSION_ID_PATTERN,
  writeQuery,
} from '@engram/team-memory/memory-stores/schemas';
import { z } from 'zod';
import { errorSchema } from './api-schemas.js';
import type { ApiRoute } from './openapi.js';

// The OpenAPI entries of the Memory Stores API (`/v1/memory_stores…`, served by
// packages/team-memory/src/memory-stores/api.ts; docs/memory-stores.md) and of `/mcp` (mcp-route.ts): a route
// table over the wire schemas the handler parses and answers with (memory-stores/schemas.ts), query parameters
// included; memory-stores-openapi.test.ts checks real answers of a running server against them.

const pathParam = (name: string, pattern: RegExp) => ({
  name,
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: pattern.source },
});
const storeId = pathParam('memory_store_id', STORE_ID_PATTERN);
const memoryId = pathParam('memory_id', MEMORY_ID_PATTERN);
const versionId = pathParam('memory_version_id', VERSION_ID_PATTERN);

/** The query parameters a query schema parses, each with its JSON Schema (input side) and description. */
function queryParameters(schema: z.ZodType): object[] {
  const doc = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as {
    properties?: Record<string, { description?: string }>;
  };
  return Object.entries(doc.properties ?? {}).map(([name, { description, ...property }]) => ({
    name,
    in: 'query',
    required: false,
    ...(description ? { description } : {}),
    schema: property,
  }));
}

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
    body: storeCreateBody,
    responses: { 200: { description: 'The store', schema: memoryStoreSchema }, ...common },
  },
  {
    method: 'get',
    path: S,
    operationId: 'listMemoryStores',
    summary: 'The tenant’s memory stores, oldest first',
    tag,
    parameters: queryParameters(listStoresQuery),
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
    parameters: [storeId, ...queryParameters(writeQuery)],
    body: memoryCreateBody,
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
    parameters: [storeId, ...queryParameters(listMemoriesQuery)],
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
    parameters: [storeId, ...queryParameters(readQuery)],
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
    parameters: [storeId, memoryId, ...queryParameters(readQuery)],
    responses: { 200: { description: 'The memory', schema: memorySchema }, ...withId },
  },
  {
    method: 'post',
    path: `${S}/{memory_store_id}/memories/{memory_id}`,
    operationId: 'updateStoreMemory',
    summary: 'Change a memory’s path or content (precondition `content_sha256`: compare and set)',
    tag,
    parameters: [storeId, memoryId, ...queryParameters(writeQuery)],
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
    parameters: [storeId, memoryId, ...queryParameters(deleteMemoryQuery)],
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
    parameters: [storeId, ...queryParameters(listVersionsQuery)],
    responses: { 200: { description: 'A page of versions', schema: memoryVersionListSchema }, ...withId },
  },
  {
    method: 'get',
    path: `${S}/{memory_store_id}/memory_versions/{memory_version_id}`,
    operationId: 'getMemoryVersion',
    summary: 'A memory version',
    tag,
    parameters: [storeId, versionId, ...queryParameters(readQuery)],
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
