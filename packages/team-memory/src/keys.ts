import { validateTeamKey } from '@engram/memory-core/paths/containment';
import { MAX_KEY_LENGTH } from './contract.js';

// Which entry keys the service stores and the client writes: memory-core's team key rules (no NUL, no encoded
// or look-alike traversal, no backslash, relative) plus one canonical spelling per file (no `.` or empty
// segment), so two clients can never hold one file under two keys.

/** Why a key may not be stored, or undefined: the client's key rules plus a canonical form (no `.`, no `//`). */
export function invalidKeyReason(key: string): { code: string; reason: string } | undefined {
  if (key.length > MAX_KEY_LENGTH)
    return { code: 'TOO_LONG', reason: `longer than ${MAX_KEY_LENGTH} characters` };
  const valid = validateTeamKey(key);
  if (!valid.ok) return { code: valid.code, reason: valid.reason };
  if (key.split('/').some((segment) => segment === '' || segment === '.')) {
    return { code: 'NOT_CANONICAL', reason: 'team memory key has an empty or "." path segment' };
  }
  if (key.endsWith('/')) return { code: 'NOT_CANONICAL', reason: 'team memory key names a directory' };
  return undefined;
}
