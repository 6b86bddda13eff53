import { z } from 'zod';
import { MemoryStoreApiError } from './errors.js';
import { LIMITS } from './limits.js';
import { memoryPathProblem, pathPrefixProblem } from './paths.js';

// The wire shapes of the Memory Stores API (`/v1/memory_stores…`), defined once: the handler (api.ts) parses
// every request body and query with these schemas and types its answers from them, and the hosted API's
// OpenAPI document (apps/agent/src/server/memory-stores-openapi.ts) is generated from them. A refusal's message
// is the issue's message, written to name the field and the rule (`name: must be 1 to 255 characters.`); an
// issue may carry the HTTP status it stands for (`params.status`, 413 for content over the limit).

// ── ids and answers ───────────────────────────────────────────────────────────────────────────────────────

export const STORE_ID_PATTERN = /^memstore_[A-Za-z0-9]{1,64}$/;
export const MEMORY_ID_PATTERN = /^mem_[A-Za-z0-9]{1,64}$/;
export const VERSION_ID_PATTERN = /^memver_[A-Za-z0-9]{1,64}$/;
const SHA_PATTERN = /^[0-9a-f]{64}$/;

const time = z.string().describe('RFC 3339 time');

export const memoryStoreSchema = z.object({
  type: z.literal('memory_store'),
  id: z.string().regex(STORE_ID_PATTERN),
  name: z.string(),
  description: z.string(),
  metadata: z.record(z.string(), z.string()),
  archived_at: time.nullable(),
  created_at: time,
  updated_at: time,
});

export const memorySchema = z.object({
  type: z.literal('memory'),
  id: z.string().regex(MEMORY_ID_PATTERN),
  memory_store_id: z.string(),
  path: z.string(),
  content: z.string().nullable().describe('null in the `basic` view'),
  content_sha256: z.string(),
  content_size_bytes: z.number().int(),
  memory_version_id: z.string(),
  created_at: time,
  updated_at: time,
});

export const memoryPrefixSchema = z.object({ type: z.literal('memory_prefix'), path: z.string() });

/** Who made a change: the SDK's actor shapes; an `api_actor` may name the worker job (`job`, Engram's addition). */
export const actorSchema = z.union([
  z.object({ type: z.literal('api_actor'), api_key_id: z.string(), job: z.string().optional() }),
  z.object({ type: z.literal('session_actor'), session_id: z.string() }),
  z.object({ type: z.literal('service_account_actor'), service_account_id: z.string() }),
  z.object({ type: z.literal('user_actor'), user_id: z.string() }),
]);

export const memoryVersionSchema = z.object({
  type: z.literal('memory_version'),
  id: z.string().regex(VERSION_ID_PATTERN),
  memory_id: z.string(),
  memory_store_id: z.string(),
  operation: z.enum(['created', 'modified', 'deleted']),
  path: z.string().nullable().describe('null once redacted (as content, its hash and size)'),
  content: z.string().nullable(),
  content_sha256: z.string().nullable(),
  content_size_bytes: z.number().int().nullable(),
  created_by: actorSchema,
  created_at: time,
  redacted_at: time.nullable(),
  redacted_by: actorSchema.nullable(),
});

const page = <T extends z.ZodType>(item: T) =>
  z.object({ data: z.array(item), next_page: z.string().nullable() });
export const memoryStoreListSchema = page(memoryStoreSchema);
export const memoryListSchema = page(z.union([memorySchema, memoryPrefixSchema]));
export const memoryVersionListSchema = page(memoryVersionSchema);
export const memoryStoreDeletedSchema = z.object({ type: z.literal('memory_store_deleted'), id: z.string() });
export const memoryDeletedSchema = z.object({ type: z.literal('memory_deleted'), id: z.string() });

/** The Anthropic error envelope every refusal answers with (path conflicts add their fields). */
export const memoryStoreErrorSchema = z.object({
  type: z.literal('error'),
  error: z.looseObject({ type: z.string(), message: z.string() }),
});

export type MemoryStoreWire = z.infer<typeof memoryStoreSchema>;
export type MemoryWire = z.infer<typeof memorySchema>;
export type MemoryPrefixWire = z.infer<typeof memoryPrefixSchema>;
export type MemoryVersionWire = z.infer<typeof memoryVersionSchema>;
export type Actor = z.infer<typeof actorSchema>;

// ── request bodies ────────────────────────────────────────────────────────────────────────────────────────

/** An object that names unknown fields in its refusal (the first one, with the fields it allows). */
function body<S extends z.ZodRawShape>(shape: S) {
  const allowed = Object.keys(shape).join(', ');
  return z.strictObject(shape, {
    error: (iss) =>
      iss.code === 'unrecognized_keys' ? `${iss.keys[0]}: unknown field; allowed: ${allowed}.` : undefined,
  });
}

const storeName = z
  .string({ error: `name: must be 1 to ${LIMITS.nameChars} characters.` })
  .min(1, { error: `name: must be 1 to ${LIMITS.nameChars} characters.` })
  .max(LIMITS.nameChars, { error: `name: must be 1 to ${LIMITS.nameChars} characters.` })
  .refine((v) => !/\p{Cc}/u.test(v), { error: 'name: cannot contain control characters.' });

const description = z.string({ error: 'description: must be a string.' }).max(LIMITS.descriptionChars, {
  error: `description: exceeds the limit of ${LIMITS.descriptionChars} characters.`,
});

function metadata<V extends z.ZodType>(value: V) {
  return z.record(z.string(), value, { error: 'metadata: must be an object.' }).superRefine((m, ctx) => {
    const entries = Object.entries(m);
    if (entries.length > LIMITS.metadataPairs)
      ctx.addIssue({
        code: 'custom',
        message: `metadata: more than the limit of ${LIMITS.metadataPairs} key-value pairs.`,
      });
    for (const [k] of entries)
      if (k.length < 1 || k.length > LIMITS.metadataKeyChars)
        ctx.addIssue({
          code: 'custom',
          message: `metadata: key ${JSON.stringify(k)} must be 1 to ${LIMITS.metadataKeyChars} characters.`,
        });
  });
}
const metadataValue = (k: string) =>
  `metadata.${k}: must be a string of at most ${LIMITS.metadataValueChars} characters.`;
const metadataString = z
  .string({ error: (iss) => metadataValue(String(iss.path?.at(-1) ?? '')) })
  .max(LIMITS.metadataValueChars, { error: (iss) => metadataValue(String(iss.path?.at(-1) ?? '')) });

const memoryPath = (field: string) =>
  z.string({ error: `${field}: must be a string.` }).superRefine((p, ctx) => {
    const problem = memoryPathProblem(p, field);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/** Content over the per-memory limit is a 413 (`request_too_large`), as the SDK documents. */
const content = z.string({ error: 'content: must be a string.' }).superRefine((c, ctx) => {
  const bytes = Buffer.byteLength(c, 'utf8');
  if (bytes > LIMITS.contentBytes)
    ctx.addIssue({
      code: 'custom',
      message: `content: ${bytes} bytes exceeds the limit of ${LIMITS.contentBytes} bytes per memory.`,
      params: { status: 413 },
    });
});

const sha256 = (field: string) =>
  z.string({ error: `${field}: must be 64 lowercase hexadecimal characters.` }).regex(SHA_PATTERN, {
    error: `${field}: must be 64 lowercase hexadecimal characters.`,
  });

const unsupported = (type: unknown) => `precondition.type: ${JSON.stringify(type)} is not supported.`;
const notAnObject = 'precondition: must be an object.';
const shaPrecondition = z.object(
  {
    type: z.literal('content_sha256', { error: (iss) => unsupported(iss.input) }),
    content_sha256: sha256('precondition.content_sha256'),
  },
  { error: notAnObject },
);
/** Claude Code creates with `not_exists`: an existing path answers 409 with the conflict fields. */
const notExistsPrecondition = z.object({ type: z.literal('not_exists') });
const createPrecondition = z.discriminatedUnion('type', [shaPrecondition, notExistsPrecondition], {
  error: (iss) =>
    (iss as { code: string }).code === 'invalid_type'
      ? notAnObject
      : unsupported((iss.input as { type?: unknown } | undefined)?.type),
});

export const storeCreateBody = body({
  name: storeName,
  description: description.optional(),
  metadata: metadata(metadataString).optional(),
});

/** A null field (or metadata value) leaves it unchanged (removes that metadata key). */
export const storeUpdateBody = body({
  name: storeName.nullable().optional(),
  description: description.nullable().optional(),
  metadata: metadata(metadataString.nullable()).nullable().optional(),
});

export const memoryCreateBody = body({
  path: memoryPath('path'),
  content: content.nullable().describe('null stores an empty memory'),
  precondition: createPrecondition.nullable().optional(),
});

/** A null field is left unchanged. */
export const memoryUpdateBody = body({
  path: memoryPath('path').nullable().optional(),
  content: content.nullable().optional(),
  precondition: shaPrecondition.nullable().optional(),
});

export type Precondition = z.infer<typeof shaPrecondition> | z.infer<typeof notExistsPrecondition>;

// ── query parameters ──────────────────────────────────────────────────────────────────────────────────────

const view = (fallback: 'basic' | 'full') =>
  z
    .enum(['basic', 'full'], { error: 'view: must be "basic" or "full".' })
    .default(fallback)
    .describe(`\`basic\` (content null) or \`full\`; default ${fallback}`);
const positive = 'limit: must be a positive integer.';
const limit = z.coerce
  .number({ error: positive })
  .int({ error: positive })
  .min(1, { error: positive })
  .optional()
  .describe('Page size');
const cursor = z
  .string()
  .regex(/^[A-Za-z0-9_-]*$/, { error: 'page: not a cursor this API returned.' })
  .optional()
  .describe('The `next_page` cursor of the previous page');
const date = (key: string, description: string) =>
  z
    .string()
    .refine((s) => !Number.isNaN(new Date(s).getTime()), { error: `${key}: not an RFC 3339 time.` })
    .transform((s) => new Date(s))
    .optional()
    .describe(description);

/** The page-size limit of a view: `basic` 100, `full` 20. */
export function pageMax(v: 'basic' | 'full'): number {
  return v === 'full' ? LIMITS.fullPageMax : LIMITS.basicPageMax;
}
function withinPage(q: { view?: 'basic' | 'full'; limit?: number | undefined }, ctx: z.RefinementCtx) {
  const max = pageMax(q.view ?? 'basic');
  if (q.limit !== undefined && q.limit > max)
    ctx.addIssue({
      code: 'custom',
      message: `limit: ${q.limit} exceeds the page-size limit of ${max} items for this view.`,
    });
}

export const listStoresQuery = z
  .object({
    limit,
    page: cursor,
    include_archived: z
      .enum(['true', 'false'], { error: 'include_archived: must be true or false.' })
      .default('false')
      .transform((v) => v === 'true')
      .describe('Also list archived stores'),
    'created_at[gte]': date('created_at[gte]', 'Created at or after (RFC 3339)'),
    'created_at[lte]': date('created_at[lte]', 'Created at or before (RFC 3339)'),
  })
  .superRefine(withinPage);

export const listMemoriesQuery = z
  .object({
    view: view('basic'),
    limit,
    page: cursor,
    path_prefix: z
      .string()
      .default('/')
      .superRefine((p, ctx) => {
        const problem = pathPrefixProblem(p);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      })
      .describe('A prefix ending in `/` (default `/`)'),
    depth: z.coerce
      .number({ error: `depth: must be an integer from 0 to ${LIMITS.pathSegments}.` })
      .int({ error: `depth: must be an integer from 0 to ${LIMITS.pathSegments}.` })
      .min(0, { error: `depth: must be an integer from 0 to ${LIMITS.pathSegments}.` })
      .max(LIMITS.pathSegments, { error: `depth: must be an integer from 0 to ${LIMITS.pathSegments}.` })
      .default(0)
      .describe('0 (all) or how many segments below the prefix to list'),
    // Claude Code adds order_by=path&order=asc: path order is the only order served.
    order_by: z
      .literal('path', { error: 'order_by: only "path" is supported.' })
      .optional()
      .describe('Only `path`'),
    order: z.literal('asc', { error: 'order: only "asc" is supported.' }).optional().describe('Only `asc`'),
  })
  .superRefine(withinPage);

export const listVersionsQuery = z
  .object({
    view: view('basic'),
    limit,
    page: cursor,
    memory_id: z.string().optional().describe('Only this memory’s versions'),
    operation: z
      .enum(['created', 'modified', 'deleted'], { error: 'operation: must be created, modified or deleted.' })
      .optional()
      .describe('Only this operation'),
    session_id: z.string().optional().describe('Only versions written by this session'),
    api_key_id: z.string().optional().describe('Only versions written with this key'),
    service_account_id: z.string().optional().describe('Only versions written by this service account'),
    'created_at[gte]': date('created_at[gte]', 'Created at or after (RFC 3339)'),
    'created_at[lte]': date('created_at[lte]', 'Created at or before (RFC 3339)'),
  })
  .superRefine(withinPage);

/** Create, update: the answer's view (default `basic`). */
export const writeQuery = z.object({ view: view('basic') });
/** Retrieve a memory or version, the export stream: default `full`. */
export const readQuery = z.object({ view: view('full') });

export const deleteMemoryQuery = z.object({
  expected_content_sha256: sha256('expected_content_sha256')
    .optional()
    .describe('Delete only if the content still has this SHA-256'),
});

// ── parsing ───────────────────────────────────────────────────────────────────────────────────────────────

/**
 * `schema`'s parse of `input`, or the refusal its first issue names: unknown fields first (a misspelt field
 * explains the missing one), then in field order. 400 `invalid_request_error`, or 413 `request_too_large`.
 */
export function parseWire<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issues = [...parsed.error.issues].sort(
    (a, b) => Number(b.code === 'unrecognized_keys') - Number(a.code === 'unrecognized_keys'),
  );
  const first = issues[0]!;
  const status = (first as { params?: { status?: number } }).params?.status;
  if (status === 413) throw new MemoryStoreApiError(413, 'request_too_large', first.message);
  throw new MemoryStoreApiError(400, 'invalid_request_error', first.message);
}

/** The query string as a plain object (a repeated parameter: its first value, as `URLSearchParams.get`). */
export function queryObject(q: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of q) if (!(k in out)) out[k] = v;
  return out;
}
