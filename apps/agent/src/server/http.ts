import { EngramError } from '@engram/errors/engram-error';
import type { Tenant } from '@engram/tenants/tenant-store';
import type { HttpBindings } from '@hono/node-server';
import type { Context } from 'hono';
import type { z } from 'zod';

// What every route module of `engram serve` shares: the Hono environment (the tenant the request
// authenticated as), the one HTTP error type and its body, and the JSON body reader.

export type Env = { Bindings: HttpBindings; Variables: { tenant: Tenant } };

export class HttpError extends EngramError {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 415 | 429 | 503,
    code: string,
    message: string,
    /** Extra fields of the error body (e.g. the limit that refused the request). */
    readonly details: Record<string, unknown> = {},
    readonly retryAfterSeconds?: number,
  ) {
    // 429 (a limit that frees up) and 503 (the engine is back soon) may succeed later; the rest will not.
    super(code, message, { retryable: status === 429 || status === 503 });
  }
}

export function errorBody(code: string, message: string, details: Record<string, unknown> = {}) {
  return { error: { code, message, ...details } };
}

export async function readJson<T>(c: Context<Env>, schema: z.ZodType<T>): Promise<T> {
  const text = await c.req.text();
  let value: unknown;
  try {
    value = text.trim() === '' ? undefined : JSON.parse(text);
  } catch (error) {
    throw new HttpError(
      400,
      'INVALID_JSON',
      `The request body is not valid JSON: ${(error as Error).message}`,
    );
  }
  if (value === undefined)
    throw new HttpError(400, 'INVALID_JSON', 'The request body is empty; send a JSON object.');
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ');
    throw new HttpError(400, 'INVALID_REQUEST', `Invalid request body — ${issues}`);
  }
  return parsed.data;
}
