// The OpenAPI 3 description of the hosted API, served at /openapi.json. Kept beside the routes it describes
// (hosted-app.ts); the server test checks every documented path answers.

const error = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        limit: { type: 'integer', description: 'The limit that refused the request (429 TENANT_TURN_LIMIT)' },
        setting: { type: 'string', description: 'The setting that configures that limit' },
      },
    },
  },
} as const;

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

const sessionIdParam = {
  name: 'id',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9_-]*$', maxLength: 128 },
} as const;

const usage = {
  type: 'object',
  properties: {
    inputTokens: { type: 'integer' },
    outputTokens: { type: 'integer' },
    cacheReadInputTokens: { type: 'integer' },
    cacheCreationInputTokens: { type: 'integer' },
  },
} as const;

export function openApiDocument() {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Engram hosted API',
      version: '1',
      description:
        'Turns of a coding agent with long-term memory. Every /v1 route needs `Authorization: Bearer <key>` ' +
        '(`engram tenants add`). Errors are `{ error: { code, message } }`.',
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { Error: error, Usage: usage },
    },
    security: [{ bearer: [] }],
    paths: {
      '/healthz': { get: { security: [], responses: { 200: { description: 'The process is up.' } } } },
      '/readyz': {
        get: {
          security: [],
          responses: {
            200: { description: 'Ready: the queue engine answers and the replica is not draining.' },
            503: { description: 'Not ready (draining, or the queue engine is unreachable).' },
          },
        },
      },
      '/metrics': { get: { security: [], responses: { 200: { description: 'Prometheus metrics.' } } } },
      '/v1/sessions': {
        post: {
          summary: 'Create a session in a directory of the tenant workspace',
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['cwd'],
                  additionalProperties: false,
                  properties: { cwd: { type: 'string', description: 'Absolute path inside the workspace' } },
                },
              },
            },
          },
          responses: {
            201: {
              description: 'Created',
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    properties: {
                      id: { type: 'string' },
                      cwd: { type: 'string' },
                      createdAt: { type: 'string' },
                    },
                  },
                },
              },
            },
            400: errorResponse('INVALID_JSON / INVALID_REQUEST'),
            401: errorResponse('UNAUTHORIZED'),
            403: errorResponse('CWD_OUTSIDE_WORKSPACE'),
            413: errorResponse('BODY_TOO_LARGE'),
          },
        },
      },
      '/v1/sessions/{id}': {
        get: {
          parameters: [sessionIdParam],
          responses: {
            200: { description: 'The session (cwd, createdAt, busy).' },
            400: errorResponse('INVALID_SESSION_ID'),
            401: errorResponse('UNAUTHORIZED'),
            404: errorResponse('SESSION_NOT_FOUND (also for another tenant’s session)'),
          },
        },
      },
      '/v1/sessions/{id}/turns': {
        post: {
          summary: 'Run one turn',
          description:
            'With `Accept: text/event-stream` the turn streams as Server-Sent Events: turn.started, ' +
            'text_delta (`{turn, index, text}`: a piece of a text block as the model streams it), text (the ' +
            'complete block), tool_use, tool_result, recall.injected, recall, memory, done, or error. ' +
            'Otherwise one JSON object, whose `events` are the same without text_delta and done. A turn of a session that is already running answers 409 unless `wait` is set (or ' +
            '`Prefer: wait=<seconds>`).',
          parameters: [sessionIdParam],
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['prompt'],
                  additionalProperties: false,
                  properties: {
                    prompt: { type: 'string', minLength: 1, maxLength: 200000 },
                    allowedTools: {
                      type: 'array',
                      items: { type: 'string', enum: ['Read', 'Grep', 'Glob', 'Write', 'Edit', 'Bash'] },
                      description: 'Narrows the tenant policy for this turn; never widens it.',
                    },
                    wait: { oneOf: [{ type: 'boolean' }, { type: 'number', minimum: 0 }] },
                  },
                },
              },
            },
          },
          responses: {
            200: {
              description: 'The turn (JSON) or its event stream (text/event-stream).',
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    properties: {
                      sessionId: { type: 'string' },
                      answer: { type: 'string' },
                      endReason: { type: 'string', enum: ['completed', 'max_turns', 'aborted'] },
                      turns: { type: 'integer' },
                      deniedCalls: { type: 'integer' },
                      usage: { $ref: '#/components/schemas/Usage' },
                      memory: { type: 'object' },
                      events: { type: 'array', items: { type: 'object' } },
                    },
                  },
                },
                'text/event-stream': { schema: { type: 'string' } },
              },
            },
            400: errorResponse('INVALID_SESSION_ID / INVALID_JSON / INVALID_REQUEST'),
            401: errorResponse('UNAUTHORIZED'),
            403: errorResponse(
              'CWD_OUTSIDE_WORKSPACE / TENANT_REVOKED (the key was revoked during the turn)',
            ),
            404: errorResponse('SESSION_NOT_FOUND'),
            409: errorResponse('SESSION_BUSY / SESSION_LEASE_LOST'),
            413: errorResponse('BODY_TOO_LARGE'),
            429: errorResponse(
              'TENANT_TURN_LIMIT: the tenant runs ENGRAM_SERVE_MAX_TURNS_PER_TENANT turns already (body: limit, setting; Retry-After)',
            ),
            503: errorResponse('DRAINING / STATE_STORE_UNAVAILABLE'),
          },
        },
      },
      '/v1/sessions/{id}/memory': {
        get: {
          parameters: [sessionIdParam],
          responses: { 200: { description: 'What the workers saved from this session (receipts).' } },
        },
      },
      '/v1/memory': {
        get: {
          parameters: [{ name: 'cwd', in: 'query', required: true, schema: { type: 'string' } }],
          responses: {
            200: { description: 'The project’s memories (file, name, description, type, age).' },
            403: errorResponse('CWD_OUTSIDE_WORKSPACE'),
          },
        },
      },
      '/v1/usage': {
        get: {
          responses: {
            200: {
              description:
                'The tenant’s cost ledger: tokens (input, output, cache_read, cache_write, count) per kind — ' +
                'turn, extract, recall, session-memory, dream.',
            },
          },
        },
      },
    },
  };
}
