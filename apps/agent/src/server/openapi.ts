import {
  TEAM_MEMORY_PATH,
  errorBodySchema as teamErrorSchema,
  teamMemoryDataSchema,
  teamMemoryHashesSchema,
  putBodySchema as teamPutBodySchema,
  tooManyEntriesSchema,
} from '@engram/team-memory/contract';
import { z } from 'zod';
import {
  createSessionBody,
  errorSchema,
  healthSchema,
  memoryListSchema,
  readySchema,
  sessionCreatedSchema,
  sessionMemorySchema,
  sessionSchema,
  turnBody,
  turnResultSchema,
  usageLedgerSchema,
} from './api-schemas.js';
import { MCP_OPENAPI_ROUTES, MEMORY_STORES_ROUTES } from './memory-stores-openapi.js';

// The OpenAPI 3.1 description of the hosted API, served at /openapi.json, generated from the zod schemas the
// routes use (api-schemas.ts; team memory's from its wire contract). A route is one entry of ROUTES; the
// server test checks every documented path answers with a body its schema accepts, and lints the document.

type Status = 200 | 201 | 202 | 204 | 304 | 400 | 401 | 403 | 404 | 406 | 409 | 412 | 413 | 429 | 503;

interface Response {
  description: string;
  /** Omitted: no body (or a body that is not JSON: `contentType`). */
  schema?: z.ZodType;
  contentType?: string;
  /** A success answer that has no body by definition (202, or 200 of an MCP DELETE). */
  empty?: true;
}

export interface ApiRoute {
  method: 'get' | 'post' | 'put' | 'delete';
  /** OpenAPI path template (`{id}`). */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  /** Open routes (health, metrics, the document itself) need no key. */
  open?: boolean;
  tag: 'Sessions' | 'Memory' | 'Operations' | 'Team memory' | 'Memory stores' | 'MCP';
  parameters?: object[];
  body?: z.ZodType;
  responses: Partial<Record<Status, Response>>;
  /** The 200 answer may also be a Server-Sent Events stream (`Accept: text/event-stream`). */
  streams?: true;
}

const sessionIdParam = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'The session id (1–128 of [A-Za-z0-9_-], starting with a letter or digit)',
  schema: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9_-]*$', maxLength: 128 },
};

const err = (description: string): Response => ({ description, schema: errorSchema });
const unauthorized = err('UNAUTHORIZED: no key, a wrong one, or a revoked one');

export const ROUTES: readonly ApiRoute[] = [
  {
    method: 'get',
    path: '/healthz',
    operationId: 'getHealth',
    summary: 'Liveness: the process is up',
    open: true,
    tag: 'Operations',
    responses: { 200: { description: 'The process is up', schema: healthSchema } },
  },
  {
    method: 'get',
    path: '/readyz',
    operationId: 'getReadiness',
    summary: 'Readiness: the queue engine answers and the replica is not draining',
    open: true,
    tag: 'Operations',
    responses: {
      200: { description: 'Ready', schema: readySchema },
      503: { description: 'Not ready (draining, or the queue engine is unreachable)', schema: readySchema },
    },
  },
  {
    method: 'get',
    path: '/metrics',
    operationId: 'getMetrics',
    summary: 'Prometheus metrics',
    open: true,
    tag: 'Operations',
    responses: { 200: { description: 'Prometheus text exposition format', contentType: 'text/plain' } },
  },
  {
    method: 'get',
    path: '/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'This document',
    open: true,
    tag: 'Operations',
    responses: { 200: { description: 'The OpenAPI 3.1 document', contentType: 'application/json' } },
  },
  {
    method: 'post',
    path: '/v1/sessions',
    operationId: 'createSession',
    summary: 'Create a session in a directory of the tenant workspace',
    tag: 'Sessions',
    body: createSessionBody,
    responses: {
      201: { description: 'Created', schema: sessionCreatedSchema },
      400: err('INVALID_JSON / INVALID_REQUEST'),
      401: unauthorized,
      403: err('CWD_OUTSIDE_WORKSPACE'),
      413: err('BODY_TOO_LARGE'),
    },
  },
  {
    method: 'get',
    path: '/v1/sessions/{id}',
    operationId: 'getSession',
    summary: 'A session: its directory, when it was created, whether a turn is running',
    tag: 'Sessions',
    parameters: [sessionIdParam],
    responses: {
      200: { description: 'The session', schema: sessionSchema },
      400: err('INVALID_SESSION_ID'),
      401: unauthorized,
      404: err('SESSION_NOT_FOUND (also for another tenant’s session)'),
    },
  },
  {
    method: 'post',
    path: '/v1/sessions/{id}/turns',
    operationId: 'runTurn',
    summary: 'Run one turn',
    streams: true,
    description:
      'With `Accept: text/event-stream` the turn streams as Server-Sent Events: turn.started, text_delta ' +
      '(`{turn, index, text}`: a piece of a text block as the model streams it), text (the complete block), ' +
      'tool_use, tool_result, recall.injected, recall, memory, done, or error. Otherwise one JSON object, ' +
      'whose `events` are the same without text_delta and done. A turn of a session that is already running ' +
      'answers 409 unless `wait` is set (or `Prefer: wait=<seconds>`).',
    tag: 'Sessions',
    parameters: [sessionIdParam],
    body: turnBody,
    responses: {
      200: {
        description: 'The turn (JSON) or its event stream (text/event-stream)',
        schema: turnResultSchema,
      },
      400: err('INVALID_SESSION_ID / INVALID_JSON / INVALID_REQUEST'),
      401: unauthorized,
      403: err('CWD_OUTSIDE_WORKSPACE / TENANT_REVOKED (the key was revoked during the turn)'),
      404: err('SESSION_NOT_FOUND'),
      409: err('SESSION_BUSY / SESSION_LEASE_LOST'),
      413: err('BODY_TOO_LARGE'),
      429: err(
        'TENANT_TURN_LIMIT: the tenant already runs ENGRAM_SERVE_MAX_TURNS_PER_TENANT turns (body: limit, setting; Retry-After)',
      ),
      503: err('DRAINING / STATE_STORE_UNAVAILABLE'),
    },
  },
  {
    method: 'get',
    path: '/v1/sessions/{id}/memory',
    operationId: 'getSessionMemory',
    summary: 'What the workers saved from this session (receipts) and how far extraction has read',
    tag: 'Memory',
    parameters: [sessionIdParam],
    responses: {
      200: { description: 'Receipts and the extraction cursor', schema: sessionMemorySchema },
      400: err('INVALID_SESSION_ID'),
      401: unauthorized,
      404: err('SESSION_NOT_FOUND'),
    },
  },
  {
    method: 'get',
    path: '/v1/memory',
    operationId: 'listMemories',
    summary: 'The memories of the project a directory belongs to',
    tag: 'Memory',
    parameters: [
      {
        name: 'cwd',
        in: 'query',
        required: true,
        description: 'A directory inside the tenant workspace',
        schema: { type: 'string' },
      },
    ],
    responses: {
      200: { description: 'The project’s memories, newest first', schema: memoryListSchema },
      400: err('INVALID_REQUEST'),
      401: unauthorized,
      403: err('CWD_OUTSIDE_WORKSPACE'),
    },
  },
  {
    method: 'get',
    path: '/v1/usage',
    operationId: 'getUsage',
    summary: 'The tenant’s cost ledger',
    tag: 'Operations',
    responses: {
      200: { description: 'Tokens per kind of work', schema: usageLedgerSchema },
      401: unauthorized,
    },
  },
  {
    method: 'get',
    path: TEAM_MEMORY_PATH,
    operationId: 'getTeamMemory',
    summary: 'The team memory of a repository (entries and checksums, or checksums only with view=hashes)',
    tag: 'Team memory',
    parameters: [
      { name: 'repo', in: 'query', required: true, description: '`owner/name`', schema: { type: 'string' } },
      {
        name: 'view',
        in: 'query',
        required: false,
        description: '`hashes`: checksums only',
        schema: { type: 'string', enum: ['hashes'] },
      },
      { name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string' } },
    ],
    responses: {
      200: {
        description: 'Entries and checksums (or checksums only)',
        schema: z.union([teamMemoryDataSchema, teamMemoryHashesSchema]),
      },
      304: { description: 'Not modified since the ETag given' },
      400: { description: 'A bad repository slug or view', schema: teamErrorSchema },
      401: unauthorized,
      404: { description: 'No team memory for this repository yet', schema: teamErrorSchema },
      503: err('TEAM_MEMORY_UNAVAILABLE: the team memory store is not reachable'),
    },
  },
  {
    method: 'put',
    path: TEAM_MEMORY_PATH,
    operationId: 'putTeamMemory',
    summary: 'Write changed team memory entries (compare-and-set with If-Match)',
    tag: 'Team memory',
    parameters: [
      { name: 'repo', in: 'query', required: true, description: '`owner/name`', schema: { type: 'string' } },
      { name: 'If-Match', in: 'header', required: false, schema: { type: 'string' } },
    ],
    body: teamPutBodySchema,
    responses: {
      200: { description: 'Written: the new metadata', schema: teamMemoryHashesSchema },
      400: { description: 'A bad slug, key or body', schema: teamErrorSchema },
      401: unauthorized,
      412: { description: 'The store changed since If-Match', schema: teamErrorSchema },
      413: {
        description:
          "Too many entries, an entry or the body too large, or the tenant's bytes over ENGRAM_TEAM_MEMORY_MAX_BYTES",
        schema: z.union([tooManyEntriesSchema, teamErrorSchema]),
      },
      429: {
        description: 'The tenant holds ENGRAM_TEAM_MEMORY_MAX_REPOS repositories already',
        schema: teamErrorSchema,
      },
      503: err('TEAM_MEMORY_UNAVAILABLE: the team memory store is not reachable'),
    },
  },
  ...MEMORY_STORES_ROUTES,
  ...MCP_OPENAPI_ROUTES,
];

/** JSON Schema (2020-12, as OpenAPI 3.1 uses) of a zod schema, without the `$schema` marker. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): object {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return rest;
}

function responseObject(response: Response): object {
  const ref = response.schema === errorSchema ? { $ref: '#/components/schemas/Error' } : undefined;
  if (response.schema)
    return {
      description: response.description,
      content: { 'application/json': { schema: ref ?? jsonSchema(response.schema, 'output') } },
    };
  if (response.contentType)
    return {
      description: response.description,
      content: { [response.contentType]: { schema: { type: 'string' } } },
    };
  return { description: response.description };
}

let cached: object | undefined;

export function openApiDocument(): object {
  if (cached) return cached;
  const paths: Record<string, Record<string, object>> = {};
  for (const route of ROUTES) {
    const responses: Record<string, object> = {};
    for (const [status, response] of Object.entries(route.responses))
      responses[status] = responseObject(response);
    if (route.streams) {
      const ok = responses[200] as { content: Record<string, object> };
      ok.content['text/event-stream'] = { schema: { type: 'string' } };
    }
    const item = paths[route.path] ?? {};
    paths[route.path] = item;
    item[route.method] = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: [route.tag],
      ...(route.open ? { security: [] } : {}),
      ...(route.parameters ? { parameters: route.parameters } : {}),
      ...(route.body
        ? {
            requestBody: {
              required: true,
              content: { 'application/json': { schema: jsonSchema(route.body, 'input') } },
            },
          }
        : {}),
      responses,
    };
  }
  cached = {
    openapi: '3.1.0',
    info: {
      title: 'Engram hosted API',
      version: '1',
      description:
        'Turns of a coding agent with long-term memory. Every /v1 route needs `Authorization: Bearer <key>` ' +
        '(`engram tenants add`). Errors are `{ error: { code, message } }`.',
      license: { name: 'UNLICENSED', identifier: 'UNLICENSED' },
    },
    servers: [{ url: '/', description: 'The replica that serves this document' }],
    tags: [
      { name: 'Sessions', description: 'Sessions and their turns' },
      { name: 'Memory', description: 'What memory work saved' },
      { name: 'Operations', description: 'Health, readiness, metrics, usage' },
      { name: 'Team memory', description: 'Team memory sync (`engram team`, the workers)' },
      {
        name: 'Memory stores',
        description:
          'The Memory Stores API of the SDK and Claude Code 2.1.x (errors: `{type: error, error}`)',
      },
      { name: 'MCP', description: 'The memory MCP server over Streamable HTTP' },
    ],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { Error: jsonSchema(errorSchema, 'output') },
    },
    security: [{ bearer: [] }],
    paths,
  };
  return cached;
}
