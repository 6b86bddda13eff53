import { createHash } from 'node:crypto';
import { z } from 'zod';

// The team memory wire contract, shared by the service (server/) and the client (client/). docs/team-memory.md
// describes it in full; every name and number here is part of it, so a client written against the same
// contract can use Engram's service and Engram's client can use any service that speaks it.

/** `GET|PUT <base>/api/claude_code/team_memory?repo=<owner/repo>[&view=hashes]`. */
export const TEAM_MEMORY_PATH = '/api/claude_code/team_memory';
export const VIEW_HASHES = 'hashes';

/** An entry larger than this (UTF-8 bytes of its content) is never uploaded, stored or written on pull. */
export const MAX_ENTRY_BYTES = 250_000;
/** The client splits a push into PUT bodies of at most this many serialized bytes (one oversize entry alone). */
export const MAX_PUT_BODY_BYTES = 200_000;
/** After this many 412s a push gives up (the next edit or flush tries again). */
export const MAX_CONFLICT_RETRIES = 2;
/** The service refuses request bodies larger than this (a lone ≤250,000-byte entry must still fit escaped). */
export const DEFAULT_MAX_REQUEST_BYTES = 1_048_576;
/** Entries one repository may hold on the service (after the upsert). */
export const DEFAULT_MAX_ENTRIES = 2_000;
/** Longest key the service accepts (characters). */
export const MAX_KEY_LENGTH = 1_024;

/** Structured `error.details.error_code` values. */
export const ERROR_CODES = {
  tooManyEntries: 'team_memory_too_many_entries',
  /** The tenant holds its limit of repositories (429). */
  tooManyRepositories: 'team_memory_too_many_repositories',
  /** The PUT would take the tenant over its bytes over all repositories (413). */
  tenantBytesExceeded: 'team_memory_tenant_bytes_exceeded',
  entryTooLarge: 'team_memory_entry_too_large',
  requestTooLarge: 'team_memory_request_too_large',
  invalidKey: 'team_memory_invalid_key',
  invalidRepo: 'team_memory_invalid_repo',
  invalidBody: 'team_memory_invalid_body',
  invalidView: 'team_memory_invalid_view',
  preconditionFailed: 'team_memory_precondition_failed',
  notFound: 'team_memory_not_found',
  unauthenticated: 'team_memory_unauthenticated',
} as const;

/** `owner/name`, as parsed from a git remote: two path segments of [A-Za-z0-9._-], neither `.`/`..`. */
export const repoSlug = z
  .string()
  .max(200)
  .regex(/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/, 'must be "owner/name" ([A-Za-z0-9._-] in each part)')
  .refine((s) => s.split('/').every((part) => part !== '.' && part !== '..'), 'must not be "." or ".."');

/** An entry checksum: `sha256:` + the hex SHA-256 of the content's UTF-8 bytes. */
export function hashContent(content: string): string {
  return `sha256:${createHash('sha256').update(content, 'utf8').digest('hex')}`;
}

export const CHECKSUM_PATTERN = /^sha256:[0-9a-f]{64}$/;

/**
 * The store's checksum (its ETag): a SHA-256 over the sorted (key, entry checksum) pairs, so it changes exactly
 * when some entry's content changes and two stores with the same entries have the same ETag.
 */
export function storeChecksum(entryChecksums: Readonly<Record<string, string>>): string {
  const pairs = Object.keys(entryChecksums)
    .sort()
    .map((key) => [key, entryChecksums[key]]);
  return `sha256:${createHash('sha256').update(JSON.stringify(pairs), 'utf8').digest('hex')}`;
}

/** `"sha256:…"` for the ETag header; `parseEntityTag` undoes it (quotes and a weak `W/` prefix stripped). */
export function formatEntityTag(checksum: string): string {
  return `"${checksum.replace(/"/g, '')}"`;
}

export function parseEntityTag(value: string): string {
  return value
    .trim()
    .replace(/^W\//, '')
    .replace(/^"(.*)"$/, '$1');
}

/** Bytes a PUT body `{"entries":{…}}` takes; the client's batching and the service's limit both count this. */
export function putBodyBytes(entries: Readonly<Record<string, string>>): number {
  return Buffer.byteLength(JSON.stringify({ entries }), 'utf8');
}

export const metadataSchema = z.object({
  organizationId: z.string(),
  repo: z.string(),
  version: z.number(),
  lastModified: z.string(),
  checksum: z.string(),
});
export type TeamMemoryMetadata = z.infer<typeof metadataSchema>;

/** `GET ?repo=…` → 200. */
export const teamMemoryDataSchema = metadataSchema.extend({
  content: z.object({
    entries: z.record(z.string(), z.string()),
    entryChecksums: z.record(z.string(), z.string()).optional(),
  }),
});
export type TeamMemoryData = z.infer<typeof teamMemoryDataSchema>;

/** `GET ?repo=…&view=hashes` → 200: the metadata and the per-key checksums, no bodies. */
export const teamMemoryHashesSchema = metadataSchema.extend({
  entryChecksums: z.record(z.string(), z.string()),
});
export type TeamMemoryHashes = z.infer<typeof teamMemoryHashesSchema>;

/** `PUT ?repo=…` body: upsert; keys absent from it are kept on the service. */
export const putBodySchema = z.object({ entries: z.record(z.string(), z.string()) });

/** Every non-2xx answer: `{error: {type, message, details?: {error_code, …}}}`. */
export const errorBodySchema = z.object({
  error: z.object({
    type: z.string().optional(),
    message: z.string().optional(),
    details: z.looseObject({ error_code: z.string().optional() }).optional(),
  }),
});
export type ErrorBody = z.infer<typeof errorBodySchema>;

export const tooManyEntriesSchema = z.object({
  error: z.object({
    details: z.object({
      error_code: z.literal(ERROR_CODES.tooManyEntries),
      max_entries: z.number().int().positive(),
      received_entries: z.number().int().positive(),
    }),
  }),
});
