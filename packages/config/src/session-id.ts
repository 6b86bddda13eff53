import { z } from 'zod';

// The one rule for session ids, used by the CLI (`--session`), transcript paths and every job payload: a
// session id names a transcript file, so it has no separators and no dots; 1–128 characters of
// [A-Za-z0-9_-], starting with a letter or digit (a UUID qualifies).

export const SESSION_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export const SESSION_ID_RULE = '1–128 characters of [A-Za-z0-9_-], starting with a letter or digit';

export const sessionIdSchema = z
  .string()
  .regex(SESSION_ID_PATTERN, `must be a session id (${SESSION_ID_RULE})`);

export function isSessionId(value: unknown): value is string {
  return typeof value === 'string' && SESSION_ID_PATTERN.test(value);
}
