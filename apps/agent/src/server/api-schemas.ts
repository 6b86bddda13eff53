import { z } from 'zod';

// The hosted API's request and response shapes, in one place: the routes parse requests with them, the
// OpenAPI document (openapi.ts) is generated from them, and the server test checks every answer it gets
// against the schema its route documents.

export const MAX_PROMPT_CHARS = 200_000;

export const errorSchema = z
  .object({
    error: z.object({
      code: z.string().describe('Machine-readable, UPPER_SNAKE_CASE'),
      message: z.string().describe('What happened and what to do'),
    }),
  })
  .describe('Every error answer');

export const createSessionBody = z.strictObject({
  cwd: z
    .string()
    .min(1)
    .refine((p) => p.startsWith('/'), 'must be an absolute path')
    .describe('Absolute path inside the tenant workspace'),
});

export const turnBody = z.strictObject({
  prompt: z.string().min(1).max(MAX_PROMPT_CHARS),
  /** Narrows the tenant's tools for this turn; can never add one. */
  allowedTools: z
    .array(z.string().max(64))
    .max(16)
    .optional()
    .describe(
      'Narrows the tenant policy for this turn (Read, Grep, Glob, Write, Edit, Bash); never widens it',
    ),
  /** Wait for a busy session instead of 409: true (up to the server's maximum) or seconds. */
  wait: z
    .union([z.boolean(), z.number().min(0).max(3_600)])
    .optional()
    .describe('Wait for a busy session instead of 409: true (up to the server maximum) or seconds'),
});

export const sessionCreatedSchema = z.object({
  id: z.string(),
  cwd: z.string(),
  createdAt: z.string().describe('ISO 8601'),
});

export const sessionSchema = sessionCreatedSchema.extend({
  busy: z.boolean().describe('A turn of this session is running on some replica'),
});

export const usageSchema = z.object({
  inputTokens: z.number().int(),
  outputTokens: z.number().int(),
  cacheReadInputTokens: z.number().int(),
  cacheCreationInputTokens: z.number().int(),
});

const memoryWorkStatusSchema = z
  .object({
    status: z.enum(['queued', 'skipped', 'not-queued']),
    jobId: z.string().optional(),
    reason: z.string().optional(),
    kept: z.boolean().optional().describe('The work waits in the session outbox until the engine is back'),
  })
  .describe('Whether the turn handed this memory work to the queue');

export const turnResultSchema = z.object({
  sessionId: z.string(),
  answer: z.string(),
  endReason: z.enum(['completed', 'max_turns', 'aborted']),
  turns: z.number().int(),
  deniedCalls: z.number().int(),
  usage: usageSchema,
  memory: z.object({
    extract: memoryWorkStatusSchema,
    recall: z
      .object({
        status: z.enum(['skipped', 'not-queued', 'pending', 'dropped', 'injected', 'failed']),
        jobId: z.string().optional(),
        reason: z.string().optional(),
        outcome: z.string().optional(),
        paths: z.array(z.string()).optional(),
      })
      .describe('What recall did for this turn'),
    dream: memoryWorkStatusSchema,
    sessionMemoryUpdates: z.number().int(),
  }),
  events: z
    .array(z.object({ event: z.string(), data: z.unknown() }))
    .describe('The turn events (as the SSE stream has them, without text_delta and done)'),
});

export const extractReceiptSchema = z.object({
  fromSeq: z.number().int(),
  toSeq: z.number().int(),
  memories: z.array(
    z.object({ path: z.string(), type: z.string().optional(), action: z.enum(['created', 'updated']) }),
  ),
  more: z.number().int().optional(),
  atMs: z.number(),
});

export const sessionMemorySchema = z.object({
  id: z.string(),
  receipts: z.array(extractReceiptSchema).describe('What the workers saved from this session, newest last'),
  extractCursor: z
    .object({ leafUuid: z.string(), leafSeq: z.number().int() })
    .nullable()
    .describe('How far extraction has covered the transcript'),
});

export const memoryListSchema = z.object({
  memories: z.array(
    z.object({
      file: z.string().describe('Relative to the memory directory'),
      type: z.string().optional(),
      name: z.string().optional(),
      description: z.string().nullable(),
      mtimeMs: z.number(),
      ageDays: z.number(),
      age: z.string(),
    }),
  ),
  problems: z
    .array(z.object({ filename: z.string(), code: z.string(), message: z.string() }))
    .describe('Memory files that could not be read, as `engram memory list --json` reports them'),
});

export const usageLedgerSchema = z.object({
  tenant: z.string(),
  kinds: z
    .record(
      z.string(),
      z.object({
        input: z.number(),
        output: z.number(),
        cache_read: z.number(),
        cache_write: z.number(),
        count: z.number(),
      }),
    )
    .describe('Tokens per kind: turn, extract, recall, session-memory, dream'),
});

export const healthSchema = z.object({ ok: z.literal(true) });
export const readySchema = z.object({ ready: z.boolean(), reason: z.string().optional() });
