import { sessionIdSchema } from '@engram/config/session-id';
import { z } from 'zod';

// Shared pieces of job payloads. Payloads carry references, never conversation contents (docs/design.md §1), so
// every worker resolves files under its own ENGRAM_HOME from these names.

/** A directory name produced by memory-core's sanitizePath: only [A-Za-z0-9-], so it can never escape. */
export const sanitizedDirName = z
  .string()
  .min(1)
  .max(250)
  .regex(/^[A-Za-z0-9-]+$/, 'must be a sanitized directory name ([A-Za-z0-9-] only)');

/** Session ids are file names of transcripts: the one rule the CLI and transcript paths use too. */
export const sessionId = sessionIdSchema;

export const entryUuid = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9-]+$/, 'must be a transcript entry uuid');

/** Where the conversation stood when the job was requested: the leaf entry and its line number. */
export const leafRef = z.object({
  leafUuid: entryUuid,
  /** 1-based line number of the leaf in the transcript; orders requests so cursors only move forward. */
  leafSeq: z.number().int().positive(),
});

/** A hosted-service tenant id (packages/tenants): its memory and transcripts live under its own area. */
export const tenantId = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be a tenant id ([a-z0-9-], at most 63 characters)');

export const projectRef = z.object({
  /**
   * The tenant whose turn requested the job, from the authenticated request (never from the model): workers
   * resolve the project under that tenant's ENGRAM_HOME area. Absent for the CLI (the operator's own home).
   */
  tenant: tenantId.optional(),
  /** sanitize(project root): where the project's memory lives. */
  projectDir: sanitizedDirName,
  /** sanitize(launch cwd): where this session's transcript and session memory live. */
  transcriptDir: sanitizedDirName,
});

/** Largest payload we accept for any job except recall (docs/design.md §1: payloads stay under 4 KiB). */
export const MAX_PAYLOAD_BYTES = 4 * 1024;

export function payloadBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

/** Tokens a forked agent used, as job receipts report them. */
export const forkUsage = z.object({
  inputTokens: z.number(),
  outputTokens: z.number(),
  cacheReadInputTokens: z.number(),
  cacheCreationInputTokens: z.number(),
});
